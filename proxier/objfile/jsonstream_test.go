package objfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// countingReader hands out its text a few bytes at a time and, at each
// read, records how many Services objs kept by then.
type countingReader struct {
	text string
	off  int
	objs *Objects
	kept map[int]int // offset -> Services kept when it was read
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.off >= len(r.text) {
		return 0, io.EOF
	}
	r.kept[r.off] = len(r.objs.Services)
	n := copy(p[:min(len(p), 16)], r.text[r.off:])
	r.off += n
	return n, nil
}

// TestListItemsAreKeptAsTheyAreRead: a JSON List's items are trimmed and
// kept while the rest of the List is still being read, not once it is
// whole.
func TestListItemsAreKeptAsTheyAreRead(t *testing.T) {
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s%d","namespace":"ns"},"spec":{"clusterIP":"10.96.0.%d","ports":[{"port":80}]}}`, i, i+1))
	}
	text := `{"apiVersion":"v1","items":[` + strings.Join(items, ",") + `],"kind":"List"}`
	objs := newObjects()
	r := &countingReader{text: text, objs: objs, kept: map[int]int{}}
	ok, err := objs.addJSON(jsoniter.Parse(objs.json, r, 16))
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if len(objs.Services) != 20 {
		t.Fatalf("kept %d Services, want 20", len(objs.Services))
	}
	last := strings.Index(text, `"s19"`)
	keptBefore := 0
	for off, n := range r.kept {
		if off <= last {
			keptBefore = max(keptBefore, n)
		}
	}
	if keptBefore < 18 {
		t.Errorf("when the last item was read, %d Services were kept; want the 18 or more read before it", keptBefore)
	}
}

// TestStreamedDocumentsDecodeAsWhole: what a List's items decide only at
// its end (whether it is a List at all, which of two "items" fields
// counts, which error comes first) comes out as the document-by-document
// decode has it.
func TestStreamedDocumentsDecodeAsWhole(t *testing.T) {
	svc := func(name string) string {
		return `{"apiVersion":"v1","kind":"Service","metadata":{"name":"` + name + `"},"spec":{"ports":[{"port":80}]}}`
	}
	cases := map[string]string{
		"kind after items":        `{"items":[` + svc("a") + `,null,` + svc("b") + `],"kind":"List"}`,
		"not a List":              `{"items":[` + svc("a") + `],"kind":"Service","apiVersion":"v1","metadata":{"name":"outer"}}`,
		"two items fields":        `{"kind":"List","items":[` + svc("a") + `],"Items":[` + svc("b") + `]}`,
		"items then null":         `{"kind":"List","items":[` + svc("a") + `],"items":null}`,
		"ignored kinds":           `{"kind":"DeploymentList","items":[{"kind":"Deployment","metadata":{"name":"d"}}]} {"kind":"ConfigMap","items":[{"kind":"Pod","metadata":{"name":"p"}}],"metadata":{"name":"c"}}`,
		"item error":              `{"kind":"List","items":[` + svc("a") + `,{"kind":"Service","metadata":{}}]}`,
		"item error in not-List":  `{"kind":"Thing","metadata":{"name":"t"},"items":[{"kind":"Service","metadata":{}}]}`,
		"nested List":             `{"kind":"List","items":[{"kind":"List","items":[` + svc("a") + `]},` + svc("b") + `]}`,
		"array of documents":      `[` + svc("a") + `,{"kind":"List","items":[` + svc("b") + `]}]`,
		"first error wins":        `{"kind":"Service","metadata":{}} {"kind":"List","items":[{"kind":"Service","metadata":{}}]}`,
		"syntax error after item": `{"kind":"List","items":[{"kind":"Service","metadata":{}},` + svc("b") + `,}]}`,
		"wrong type for items":    `{"kind":"List","items":{"a":1}}`,
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			slow := newObjects()
			slowErr := eachDocument([]byte(text), slow.add)
			got, err := load(strings.NewReader(text), newObjects)
			if (err == nil) != (slowErr == nil) || (err != nil && err.Error() != slowErr.Error()) {
				t.Fatalf("streamed: %v, document by document: %v", err, slowErr)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(got.Services, slow.Services) || !reflect.DeepEqual(got.EndpointSlices, slow.EndpointSlices) || !reflect.DeepEqual(got.Ignored, slow.Ignored) {
				t.Errorf("streamed %d Services %v, document by document %d Services %v", len(got.Services), got.Ignored, len(slow.Services), slow.Ignored)
			}
			// Parsed as they are read, the same objects are kept.
			parsed, err := load(strings.NewReader(text), func() *Objects {
				o := newObjects()
				o.Parsed = &Parsed{selected: func(metav1.Object) bool { return true }}
				return o
			})
			if err != nil || len(parsed.Parsed.Services) != len(slow.Services) || len(parsed.Parsed.Slices) != len(slow.EndpointSlices) {
				t.Errorf("streamed and parsed: %v, %d Services and %d slices kept; want %d and %d", err, len(parsed.Parsed.Services), len(parsed.Parsed.Slices), len(slow.Services), len(slow.EndpointSlices))
			}
		})
	}
}

// TestLoadEqualsDecode: Load, which streams a JSON file, keeps what Decode
// of the file's text keeps, and names the file in an error.
func TestLoadEqualsDecode(t *testing.T) {
	_, jsonText := scaleList(t, 50)
	dir := t.TempDir()
	for name, text := range map[string][]byte{"list.json": jsonText, "spaced.json": append([]byte("\n\t "), jsonText...), "empty.json": []byte(" \n")} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		want, wantErr := Decode(text)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: Load %v, Decode %v", name, err, wantErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), wantErr.Error()) {
				t.Errorf("%s: Load's error %q", name, err)
			}
			continue
		}
		if len(got.Services) != 50 || !reflect.DeepEqual(got.Services, want.Services) || !reflect.DeepEqual(got.EndpointSlices, want.EndpointSlices) {
			t.Errorf("%s: Load kept %d Services, Decode %d", name, len(got.Services), len(want.Services))
		}
	}
}
