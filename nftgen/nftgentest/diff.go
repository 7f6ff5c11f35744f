package nftgentest

import (
	"slices"
	"strings"
)

// LineDiff lists the lines only one of want ("- ") and got ("+ ") has,
// for test failures that compare rulesets or their compat views as text.
func LineDiff(want, got string) string {
	ws, gs := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range ws {
		if !slices.Contains(gs, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range gs {
		if !slices.Contains(ws, l) {
			out = append(out, "+ "+l)
		}
	}
	if len(out) == 0 {
		return "(the same lines in another order)"
	}
	return strings.Join(out, "\n")
}
