package objfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/proxier/model"
)

const svcYAML = `apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns}
spec:
  clusterIP: 10.96.0.1
  ports: [{name: http, port: 80}]
`

const sliceYAML = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, namespace: ns, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.0.0.1]}]
`

func TestDecodeForms(t *testing.T) {
	forms := map[string]string{
		"multi-document YAML": "# leading comment\n---\n" + svcYAML + "---\n" + sliceYAML + "---\n",
		"kubectl List": "apiVersion: v1\nkind: List\nitems:\n" + indentItem(svcYAML) + indentItem(sliceYAML) +
			"- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n",
		"JSON List":   `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1","ports":[{"name":"http","port":80}]}},{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"ns","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","endpoints":[]}]}`,
		"JSON stream": `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1"}}` + "\n" + `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"ns"},"addressType":"IPv4"}`,
	}
	for name, data := range forms {
		t.Run(name, func(t *testing.T) {
			objs, err := Decode([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.Services) != 1 || objs.Services[0].Name != "a" || objs.Services[0].Spec.ClusterIP != "10.96.0.1" {
				t.Errorf("services = %+v", objs.Services)
			}
			if len(objs.EndpointSlices) != 1 || objs.EndpointSlices[0].Name != "a-1" {
				t.Errorf("slices = %+v", objs.EndpointSlices)
			}
		})
	}
}

func indentItem(doc string) string {
	lines := strings.Split(strings.TrimSpace(doc), "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = "- " + lines[i]
		} else {
			lines[i] = "  " + lines[i]
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestDecodeErrorsNameObjectAndField(t *testing.T) {
	tests := map[string]struct{ data, want string }{
		"wrong type": {strings.Replace(svcYAML, "port: 80", "port: eighty", 1),
			`Service ns/a (document 1): field spec.ports.port: cannot use JSON string as int32`},
		"second document": {svcYAML + "---\n" + strings.Replace(sliceYAML, "addressType: IPv4", "addressType: [IPv4]", 1),
			`EndpointSlice ns/a-1 (document 2): field addressType`},
		"item in a List": {"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: b}\n  spec: {clusterIP: 1}\n",
			`Service b (document 1, items[0]): field spec.clusterIP`},
		"no kind":        {"apiVersion: v1\nmetadata: {name: x}\n", "document 1: field kind: missing"},
		"no name":        {"apiVersion: v1\nkind: Service\nmetadata: {}\n", "field metadata.name: missing"},
		"bad apiVersion": {"apiVersion: v2\nkind: Service\nmetadata: {name: x}\n", `field apiVersion: unsupported "v2"`},
		"broken YAML":    {"kind: [\n", "document 1: invalid YAML"},
		"broken JSON":    {`{"kind": `, "document 1: invalid JSON"},
		"cut array":      {`[{"apiVersion": "v1"`, "document 1: invalid JSON"},
		"garbage after":  {`{"apiVersion": "v1", "kind": "List", "items": []} x`, "document 2: invalid JSON"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestEmptyFileIsRefusedAndDefaultsApplied: an empty file is not an empty
// cluster (an empty List is); objects get the API server's defaults.
func TestEmptyFileIsRefusedAndDefaultsApplied(t *testing.T) {
	for _, data := range []string{"", "  \n\t\n"} {
		if _, err := Decode([]byte(data)); !errors.Is(err, ErrEmpty) {
			t.Errorf("Decode(%q) = %v, want ErrEmpty", data, err)
		}
	}
	objs, err := Decode([]byte("apiVersion: v1\nkind: List\nitems: []\n"))
	if err != nil || len(objs.Services) != 0 {
		t.Errorf("empty List: %v, %v", objs, err)
	}
	objs, err = Decode([]byte(`
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: web}
spec:
  clusterIP: 10.96.0.1
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: ns, name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := objs.EndpointSlices[0].Ports[0]; p.Name == nil || *p.Name != "" || p.Protocol == nil || *p.Protocol != "TCP" {
		t.Errorf("slice port not defaulted: %+v", p)
	}
	if p := objs.Services[0].Spec.Ports[0]; p.Protocol != "TCP" {
		t.Errorf("service port not defaulted: %+v", p)
	}
}

// TestListItemsDecodeOneByOneAsAWhole: a List in block style is split into
// its items before decoding (so a large file is never one generic tree);
// the result equals decoding it whole, for kubectl's layout, an indented
// sequence and flow style (which are decoded whole), and an error still
// names the item.
func TestListItemsDecodeOneByOneAsAWhole(t *testing.T) {
	kubectl := `apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: a
    namespace: ns
  spec:
    clusterIP: 10.96.0.1
    ports:
    - name: http
      port: 80

- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  # a comment inside an item
  metadata:
    labels:
      kubernetes.io/service-name: a
    name: a-1
    namespace: ns
  addressType: IPv4
  endpoints:
  - addresses: ["10.0.0.1"]
  ports:
  - name: http
    port: 8080
kind: List
metadata:
  resourceVersion: ""
`
	// The same List with its sequence indented under items:.
	var ind []string
	inItems := false
	for _, l := range strings.Split(kubectl, "\n") {
		switch {
		case l == "items:":
			inItems = true
		case strings.HasPrefix(l, "kind: List"):
			inItems = false
		case inItems && l != "":
			l = "  " + l
		}
		ind = append(ind, l)
	}
	indented := strings.Join(ind, "\n")
	if items, ok := listItems(kubectl); !ok || len(items) != 2 {
		t.Fatalf("kubectl's layout: %d items, ok %v", len(items), ok)
	}
	if _, ok := listItems(`{"kind": "List", "items": []}`); ok {
		t.Error("flow style split")
	}
	want, err := Decode([]byte(kubectl))
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Services) != 1 || len(want.EndpointSlices) != 1 || want.EndpointSlices[0].Ports[0].Port == nil || *want.EndpointSlices[0].Ports[0].Port != 8080 {
		t.Fatalf("decoded %+v", want)
	}
	for name, text := range map[string]string{"indented sequence": indented} {
		got, err := Decode([]byte(text))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(got.Services) != 1 || len(got.EndpointSlices) != 1 || got.Services[0].Name != "a" {
			t.Errorf("%s: %+v", name, got)
		}
	}
	_, err = Decode([]byte(strings.Replace(kubectl, "port: 8080", "port: eighty", 1)))
	if err == nil || !strings.Contains(err.Error(), "document 1, items[1]") {
		t.Errorf("error %v, want one naming document 1, items[1]", err)
	}
}

// TestLoadParsedKeepsWhatLoadKeeps: LoadParsed keeps, in the model's
// form, exactly the Services and EndpointSlices that Load reads and the
// selector accepts, with the same defaults, through the one-pass JSON
// decode and the document-by-document way (YAML) alike.
func TestLoadParsedKeepsWhatLoadKeeps(t *testing.T) {
	ignored := "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns, labels: {service.kubernetes.io/service-proxy-name: other}}\nspec: {clusterIP: 'fd00::1', clusterIPs: ['fd00::1'], ports: [{port: 81}]}\n"
	yaml := svcYAML + "---\n" + sliceYAML + "---\n" + ignored
	json := `{"kind":"List","apiVersion":"v1","items":[` +
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1"],"ports":[{"name":"http","port":80}]}},` +
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"ns","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","ports":[{"port":8080}],"endpoints":[{"addresses":["10.0.0.1"]}]},` +
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"b","namespace":"ns","labels":{"service.kubernetes.io/service-proxy-name":"other"}},"spec":{"clusterIP":"fd00::1","clusterIPs":["fd00::1"],"ports":[{"port":81}]}}]}`
	selected := func(obj metav1.Object) bool {
		_, other := obj.GetLabels()["service.kubernetes.io/service-proxy-name"]
		return !other
	}
	for name, text := range map[string]string{"YAML": yaml, "JSON": json} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "objects")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			whole, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := LoadParsed(path, selected)
			if err != nil {
				t.Fatal(err)
			}
			if parsed.Services != nil || parsed.EndpointSlices != nil {
				t.Errorf("LoadParsed kept API objects: %d Services, %d EndpointSlices", len(parsed.Services), len(parsed.EndpointSlices))
			}
			if !whole.IPv6Service || !parsed.IPv6Service {
				t.Errorf("IPv6Service = %v (Load), %v (LoadParsed); the ignored Service has an IPv6 cluster IP", whole.IPv6Service, parsed.IPv6Service)
			}
			var want []*model.Service
			for _, svc := range whole.Services {
				if selected(svc) {
					want = append(want, model.ParseService(svc))
				}
			}
			if len(want) != 1 || !reflect.DeepEqual(parsed.Parsed.Services, want) {
				t.Errorf("LoadParsed kept Services %+v, want %+v", parsed.Parsed.Services, want)
			}
			wantSlices := []*model.Slice{model.ParseSlice(whole.EndpointSlices[0])}
			if len(whole.EndpointSlices) != 1 || !reflect.DeepEqual(parsed.Parsed.Slices, wantSlices) {
				t.Errorf("LoadParsed kept EndpointSlices %+v, want %+v", parsed.Parsed.Slices, wantSlices)
			}
		})
	}
}
