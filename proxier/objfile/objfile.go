package objfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	jsoniter "github.com/json-iterator/go"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// Objects are the objects a file holds, in file order.
type Objects struct {
	Services       []*v1.Service
	EndpointSlices []*discovery.EndpointSlice
	// Parsed holds, for objects read by LoadParsed, the Services and
	// EndpointSlices in the model's form, in place of Services and
	// EndpointSlices.
	Parsed *Parsed
	Nodes  []*v1.Node
	// IPv6Service is set when a Service of the file, selected or not, has
	// an IPv6 cluster IP (spec.clusterIP or spec.clusterIPs).
	IPv6Service bool
	// Ignored counts objects of other kinds.
	Ignored map[string]int
	// trim keeps of each Service and EndpointSlice what the model reads.
	trim *model.Trimmer
	// json decodes objects as encoding/json does (the same types, tags,
	// Unmarshaler methods and results) without its validating pre-pass,
	// several times faster; encoding/json stays the reference for errors.
	json jsoniter.API
}

// Parsed are the Services and EndpointSlices of a file that a selector
// accepted, in the model's form (see LoadParsed).
type Parsed struct {
	Services []*model.Service
	Slices   []*model.Slice
	// selected says whether an object is kept.
	selected func(metav1.Object) bool
}

// LoadParsed is Load keeping only the model's form (Objects.Parsed) of the
// Services and EndpointSlices that selected accepts: each
// is parsed as soon as it is decoded, so that the file's objects never
// exist all at once as API objects (at 100,000 Services x 10 endpoints
// they took 370 MB, the model 110 MB).
func LoadParsed(path string, selected func(metav1.Object) bool) (*Objects, error) {
	return loadPath(path, func() *Objects {
		o := newObjects()
		o.Parsed = &Parsed{selected: selected}
		return o
	})
}

// Load reads and decodes path. A JSON file is decoded as it is read, so
// that neither the file's text nor its objects untrimmed are held whole;
// any other file, or JSON that does not decode so, is read whole and
// decoded as Decode does.
func Load(path string) (*Objects, error) { return loadPath(path, newObjects) }

// loadPath reads and decodes path into the Objects made by newObjects.
func loadPath(path string, newObjects func() *Objects) (*Objects, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := load(f, newObjects)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// readBuffer is the size of the buffer a JSON file is read through.
const readBuffer = 64 << 10

// load decodes the objects f holds from its start into the Objects made
// by newObjects.
func load(f io.ReadSeeker, newObjects func() *Objects) (*Objects, error) {
	r := bufio.NewReaderSize(f, readBuffer)
	if c, ok := firstByte(r); ok && (c == '{' || c == '[') {
		objs := newObjects()
		if ok, err := objs.addJSON(jsoniter.Parse(objs.json, r, readBuffer)); err != nil {
			return nil, err
		} else if ok {
			return objs, nil
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return decode(data, newObjects())
}

// firstByte returns the first byte of r after JSON's white space and puts
// it back; ok is false at the end of r.
func firstByte(r *bufio.Reader) (c byte, ok bool) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			return 0, false
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		_ = r.UnreadByte()
		return c, true
	}
}

// newObjects returns an empty Objects.
func newObjects() *Objects {
	return &Objects{Ignored: map[string]int{}, trim: model.NewTrimmer(), json: newJSONAPI()}
}

// ErrEmpty is returned for a file with nothing in it (not even an empty
// List), which is what a shell redirect leaves while the writer has not
// written yet: taken as "no Services", it would delete every rule.
var ErrEmpty = errors.New("the file is empty; an empty cluster is written as a List with no items")

// Decode decodes the objects in data, keeps of each Service and
// EndpointSlice what the model reads (see model.Trimmer) and applies the
// API server's defaults that kube-proxy relies on (see keepService,
// keepSlice). An object that does not decode is an error that names the
// object (kind, namespace/name, position) and the field.
func Decode(data []byte) (*Objects, error) { return decode(data, newObjects()) }

// decode is Decode into objs.
func decode(data []byte, objs *Objects) (*Objects, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmpty
	}
	if trimmed := bytes.TrimSpace(data); trimmed[0] == '{' || trimmed[0] == '[' {
		// JSON: in one pass when it decodes so; otherwise the slower way
		// below says what and where.
		if ok, err := objs.addJSON(jsoniter.ParseBytes(objs.json, trimmed)); err != nil {
			return nil, err
		} else if ok {
			return objs, nil
		}
	}
	if err := eachDocument(data, objs.add); err != nil {
		return nil, err
	}
	return objs, nil
}

// keepService keeps svc, with the API server's defaults that kube-proxy
// relies on (a port's protocol, TCP): trimmed to what the model reads, or
// parsed when o keeps the model's form (and the selector accepts it).
func (o *Objects) keepService(svc *v1.Service) {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Protocol == "" {
			svc.Spec.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	o.IPv6Service = o.IPv6Service || hasIPv6ClusterIP(svc)
	switch {
	case o.Parsed == nil:
		o.Services = append(o.Services, o.trim.Service(svc))
	case o.Parsed.selected(svc):
		o.Parsed.Services = append(o.Parsed.Services, model.ParseService(svc))
	}
}

// keepSlice is keepService for an EndpointSlice, whose ports' names ("")
// and protocols (TCP) the API server defaults.
func (o *Objects) keepSlice(sl *discovery.EndpointSlice) {
	for i := range sl.Ports {
		if sl.Ports[i].Name == nil {
			sl.Ports[i].Name = new(string)
		}
		if sl.Ports[i].Protocol == nil {
			tcp := v1.ProtocolTCP
			sl.Ports[i].Protocol = &tcp
		}
	}
	switch {
	case o.Parsed == nil:
		o.EndpointSlices = append(o.EndpointSlices, o.trim.EndpointSlice(sl))
	case o.Parsed.selected(sl):
		o.Parsed.Slices = append(o.Parsed.Slices, o.trim.Slice(sl))
	}
}

// hasIPv6ClusterIP reports whether svc has an IPv6 cluster IP.
func hasIPv6ClusterIP(svc *v1.Service) bool {
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
			return true
		}
	}
	return false
}

// eachDocument calls fn with each JSON document of data, one at a time,
// and where it is ("document 3", "document 1, items[7]"). A YAML List in
// block style (what kubectl prints) is split into its items before any is
// converted, so that only one object's text and tree exist at a time: a
// 20 MB List is never held as one generic tree.
func eachDocument(data []byte, fn func(doc json.RawMessage, where string) error) error {
	var yc blockConverter
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for n := 1; ; n++ {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("document %d: invalid JSON: %w", n, err)
			}
			if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
				var items []json.RawMessage
				if err := json.Unmarshal(raw, &items); err != nil {
					return fmt.Errorf("document %d: %w", n, err)
				}
				for i, item := range items {
					if err := fn(item, fmt.Sprintf("document %d, items[%d]", n, i)); err != nil {
						return err
					}
				}
				continue
			}
			if err := fn(raw, fmt.Sprintf("document %d", n)); err != nil {
				return err
			}
		}
	}
	for i, part := range splitYAML(string(data)) {
		if strings.TrimSpace(stripComments(part)) == "" {
			continue
		}
		where := fmt.Sprintf("document %d", i+1)
		if items, ok := listItems(part); ok {
			for j, item := range items {
				doc, err := yc.yamlToJSON(item)
				if err != nil {
					return fmt.Errorf("%s, items[%d]: invalid YAML: %w", where, j, err)
				}
				if err := fn(doc, fmt.Sprintf("%s, items[%d]", where, j)); err != nil {
					return err
				}
			}
			continue
		}
		doc, err := yc.yamlToJSON(part)
		if err != nil {
			return fmt.Errorf("%s: invalid YAML: %w", where, err)
		}
		if err := fn(doc, where); err != nil {
			return err
		}
	}
	return nil
}

// listItems splits a YAML document that is a List in block style into the
// texts of its items, each de-indented into a document of its own. ok is
// false for anything else (flow style, an unusual layout), which is then
// decoded whole.
func listItems(doc string) (items []string, ok bool) {
	lines := strings.SplitAfter(doc, "\n")
	isList, start := false, -1
	for i, l := range lines {
		if strings.HasPrefix(l, "kind:") && strings.HasSuffix(strings.TrimSpace(strings.TrimPrefix(l, "kind:")), "List") {
			isList = true
		}
		if strings.TrimRight(l, " \r\n") == "items:" {
			start = i + 1
		}
	}
	if !isList || start < 0 {
		return nil, false
	}
	// The items' dash and its indentation, from the first item.
	prefix := ""
	for _, l := range lines[start:] {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		i := strings.Index(l, "- ")
		if i < 0 || strings.TrimSpace(l[:i]) != "" {
			return nil, false
		}
		prefix = l[:i]
		break
	}
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			items = append(items, cur.String())
			cur.Reset()
		}
	}
	for _, l := range lines[start:] {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			cur.WriteString("\n")
		case strings.HasPrefix(l, prefix+"- "):
			flush()
			cur.WriteString("  " + l[len(prefix)+2:])
		case strings.HasPrefix(l, prefix+"  "):
			cur.WriteString(l[len(prefix):])
		case len(prefix) == 0 && l[0] != ' ':
			// The next top-level key: the items are over.
			flush()
			return items, true
		default:
			return nil, false
		}
	}
	flush()
	return items, true
}

func splitYAML(s string) []string {
	var parts []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.TrimPrefix(line, "---")) == "" {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(parts, cur.String())
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}
