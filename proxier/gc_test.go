package proxier

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestSetGCPercentYieldsToGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	debug.SetGCPercent(100)
	SetGCPercent()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("without GOGC: collector at %d%%, want %d%%", got, GCPercent)
	}
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	SetGCPercent()
	if got := debug.SetGCPercent(100); got != 80 {
		t.Errorf("with GOGC=80: collector at %d%%, want 80%% (the operator's setting)", got)
	}
}
