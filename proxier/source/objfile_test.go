package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileWatchWaitsForTheFileToSettle: a change is reported only once the
// file has stayed the same for fileSettle.
func TestFileWatchWaitsForTheFileToSettle(t *testing.T) {
	f := filepath.Join(t.TempDir(), "objects.yaml")
	os.WriteFile(f, []byte("a"), 0o644)
	w := fileWatch{path: f, last: statFile(f)}
	now := time.Now()
	if w.changedAndSettled(now) {
		t.Fatal("reported without a change")
	}
	os.WriteFile(f, []byte("ab"), 0o644)
	if w.changedAndSettled(now) {
		t.Fatal("reported a change at once")
	}
	os.WriteFile(f, []byte("abc"), 0o644) // still being written
	if w.changedAndSettled(now.Add(fileSettle)) {
		t.Fatal("reported a file that changed again")
	}
	if w.changedAndSettled(now.Add(fileSettle + fileSettle/2)) {
		t.Fatal("reported before the file stayed the same for fileSettle")
	}
	if !w.changedAndSettled(now.Add(3 * fileSettle)) {
		t.Fatal("a settled change was not reported")
	}
	if w.changedAndSettled(now.Add(4 * fileSettle)) {
		t.Fatal("the same change was reported twice")
	}
}

// TestFileWatchWaitsForTheWriterToClose: a file written in place by a
// writer that pauses longer than fileSettle (half of its endpoints
// written) is not reported until the writer closes it.
func TestFileWatchWaitsForTheWriterToClose(t *testing.T) {
	f := filepath.Join(t.TempDir(), "objects.yaml")
	os.WriteFile(f, []byte("a"), 0o644)
	w := fileWatch{path: f, last: statFile(f)}
	writer, err := os.OpenFile(f, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	writer.WriteString("half")
	now := time.Now()
	w.changedAndSettled(now)
	if w.changedAndSettled(now.Add(10 * fileSettle)) {
		t.Fatal("reported a file that a process still holds open for writing")
	}
	writer.WriteString(" and the rest")
	writer.Close()
	w.changedAndSettled(now.Add(11 * fileSettle))
	if !w.changedAndSettled(now.Add(13 * fileSettle)) {
		t.Fatal("the closed, settled file was not reported")
	}
	reader, _ := os.Open(f)
	defer reader.Close()
	if openForWriting(f) {
		t.Error("a file open only for reading counts as being written")
	}
}
