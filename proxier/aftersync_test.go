package proxier

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/proxier/runner"
)

// TestAfterSyncTracksWhatTheSyncRead: the work after a sync keeps the UDP
// and health details of each Service the sync read (told by the
// pipeline, not read again), and drops those of a deleted Service.
func TestAfterSyncTracksWhatTheSyncRead(t *testing.T) {
	e, _ := newEngineOn(t, Config{})
	for i := range 20 {
		name := fmt.Sprintf("s%02d", i)
		s := svc(name, fmt.Sprintf("10.96.0.%d", i+1))
		s.Spec.Ports[0].Protocol = v1.ProtocolUDP
		e.SetService(s)
	}
	sync := func() {
		t.Helper()
		if _, err := e.Sync(context.Background(), runner.Requested); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if len(e.after.info) != 20 {
		t.Errorf("cold sync: %d Services' UDP and health details kept, want 20", len(e.after.info))
	}
	gone := types.NamespacedName{Namespace: "ns", Name: "s07"}
	e.DeleteService(gone)
	sync()
	if _, ok := e.after.info[gone]; ok || len(e.after.info) != 19 {
		t.Errorf("partial sync: %d Services' details kept, the deleted one's too: %v", len(e.after.info), ok)
	}
}
