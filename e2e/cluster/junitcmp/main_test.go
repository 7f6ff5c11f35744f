package main

import (
	"os"
	"path/filepath"
	"testing"
)

// writeReport writes a JUnit report of the given test cases (XML
// fragments) and returns its path.
func writeReport(t *testing.T, name, cases string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	doc := `<?xml version="1.0"?><testsuites><testsuite>` + cases + `</testsuite></testsuites>`
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadAllMergesPasses checks that a spec the parallel pass left out
// and the serial pass ran counts with the serial pass's result, and that
// the suite's own cases are dropped.
func TestReadAllMergesPasses(t *testing.T) {
	parallel := writeReport(t, "parallel.xml", `
<testcase name="[SynchronizedBeforeSuite]" time="1"></testcase>
<testcase name="a" time="2"></testcase>
<testcase name="s" time="0"><skipped message="skipped"/></testcase>`)
	serial := writeReport(t, "serial.xml", `
<testcase name="a" time="0"><skipped message="skipped"/></testcase>
<testcase name="s" time="5"><failure message="boom"/></testcase>`)
	got, err := readAll(parallel + "," + serial)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d cases, want 2: %v", len(got), got)
	}
	if got["a"].state != "passed" || got["a"].seconds != 2 {
		t.Errorf("a = %+v, want the parallel pass's pass (2 s)", got["a"])
	}
	if got["s"].state != "failed" || got["s"].detail != "boom" {
		t.Errorf("s = %+v, want the serial pass's failure", got["s"])
	}
}

// TestReadAllMissingReport checks that a missing report is an error, not
// an empty run.
func TestReadAllMissingReport(t *testing.T) {
	if _, err := readAll(filepath.Join(t.TempDir(), "none.xml")); err == nil {
		t.Fatal("readAll of a missing report: no error")
	}
}
