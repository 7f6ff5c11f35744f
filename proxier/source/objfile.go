package source

import (
	"context"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/objfile"
)

// WatchObjectsFile re-reads the objects file at path when it changed,
// checking every interval, and hands what kube-proxy would select
// (LoadObjects) to sink, until ctx ends.
func WatchObjectsFile(ctx context.Context, path string, every time.Duration, sink Replacer) {
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
		objs, err := LoadObjects(path)
		if err != nil {
			klog.ErrorS(err, "Cannot use the objects file; keeping the current rules (write it elsewhere and rename it over the old one to replace it atomically)")
			continue
		}
		sink.Replace(objs.Parsed.Services, objs.Parsed.Slices)
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

// LoadObjects reads the objects file at path, keeping in the model's form
// (Objects.Parsed) the Services and EndpointSlices kube-proxy would program
// (its label selector, see Selected).
func LoadObjects(path string) (*objfile.Objects, error) {
	return objfile.LoadParsed(path, selectedObject)
}

// selectedObject reports whether kube-proxy would program obj, a Service
// or an EndpointSlice, and says at V(2) when it ignores a Service.
func selectedObject(obj metav1.Object) bool {
	if Selected(obj.GetLabels()) {
		return true
	}
	if _, ok := obj.(*v1.Service); ok {
		klog.V(2).InfoS("Ignoring Service by its labels, as kube-proxy does", "service", klog.KObj(obj))
	}
	return false
}
