package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/objfile"
	"github.com/nftproxy/nftproxy/proxier/source"
)

// watchFile re-reads the objects file at path when it changed, checking
// every interval, and hands what kube-proxy would select to sink.
func watchFile(ctx context.Context, path string, every time.Duration, sink source.Replacer) {
	w := fileWatch{path: path, last: statFile(path)}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !w.changedAndSettled(time.Now()) {
			continue
		}
		objs, err := objfile.Load(path)
		if err != nil {
			klog.ErrorS(err, "Cannot use the objects file; keeping the current rules (write it elsewhere and rename it over the old one to replace it atomically)")
			continue
		}
		services, slices := selected(objs)
		sink.Replace(model.ParseServices(services), model.ParseSlices(slices))
	}
}

// fileSettle is how long an objects file must stay unchanged after a
// change before it is read, so that a file still being written (a shell
// redirect truncates it first) is not taken for the new state.
const fileSettle = 200 * time.Millisecond

// fileState is what tells that a file changed.
type fileState struct {
	mod  time.Time
	size int64
}

func statFile(path string) fileState {
	st, err := os.Stat(path)
	if err != nil {
		return fileState{}
	}
	return fileState{mod: st.ModTime(), size: st.Size()}
}

// fileWatch notices changes of a file and reports one once the file has
// stayed the same for fileSettle and no process holds it open for
// writing (writing elsewhere and renaming over it needs neither wait).
type fileWatch struct {
	path    string
	last    fileState // what was last read
	pending fileState // what was last seen, if different
	since   time.Time // when pending was first seen
}

func (w *fileWatch) changedAndSettled(now time.Time) bool {
	cur := statFile(w.path)
	if cur == w.last {
		w.since = time.Time{}
		return false
	}
	if w.since.IsZero() || cur != w.pending {
		w.pending, w.since = cur, now
		return false
	}
	if now.Sub(w.since) < fileSettle || openForWriting(w.path) {
		return false
	}
	w.last, w.since = cur, time.Time{}
	return true
}

// configPoll is how often the daemon looks at its --config file.
const configPoll = 2 * time.Second

// watchConfigFile sends an error to changed once the content of the
// configuration file differs from what it was at start (or the file is
// gone): kube-proxy exits then, so that it restarts with the new one.
func watchConfigFile(ctx context.Context, path string, every time.Duration, changed chan<- error) {
	initial, err := os.ReadFile(path)
	if err != nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(now, initial) {
			changed <- fmt.Errorf("the configuration file %s changed; exiting so that the new one is used", path)
			return
		}
	}
}
