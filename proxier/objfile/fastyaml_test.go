package objfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"sigs.k8s.io/yaml"
)

// sameAsReference checks that the fast converter either gives up on doc or
// gives JSON that means what sigs.k8s.io/yaml's does; it reports whether
// the fast one converted.
func sameAsReference(t *testing.T, doc string) bool {
	t.Helper()
	var c blockConverter
	fast, err := c.toJSON(doc)
	if err != nil {
		return false
	}
	ref, refErr := yaml.YAMLToJSON([]byte(doc))
	if refErr != nil {
		t.Fatalf("the fast converter took YAML the reference rejects (%v):\n%s\nfast: %s", refErr, doc, fast)
	}
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("the fast converter wrote invalid JSON (%v) for:\n%s\n%s", err, doc, fast)
	}
	if err := json.Unmarshal(ref, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("for:\n%s\nfast: %s\nreference: %s", doc, fast, ref)
	}
	return true
}

// fastYAMLCases are documents in kubectl's style and around its edges.
var fastYAMLCases = []struct {
	doc  string
	fast bool // whether the fast converter must take it
}{
	{"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: ns\n  labels:\n    app: web\n    \"quoted/key\": \"x\"\nspec:\n  clusterIP: 10.96.0.10\n  clusterIPs:\n  - 10.96.0.10\n  - fd00::10\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n    targetPort: 8080\n  - port: -1\n  selector: {}\n  sessionAffinity: None\nstatus:\n  loadBalancer: {}\n", true},
	{"metadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: |\n      {\"apiVersion\":\"v1\",\"kind\":\"Service\"}\n\n      second line\n    other: x\n  name: a\n", true},
	{"a: |-\n  kept\n  lines\nb: c\n", true},
	{"a: 'it''s'\nb: \"tab\\there \\u00e9 \\\"q\\\"\"\nc: ~\nd: null\ne: yes\nf: No\ng: on\nh: OFF\ni: y\nj: []\n", true},
	{"# comment\nitems:\n- a: 1\n  b:\n  - x\n  - y\n-\n  c: 2\n- plain\n- \"quoted: colon\"\n", true},
	{"a: 1.5\nb: 0x1f\nc: 007\nd: 1e3\ne: 2024-01-01T00:00:00Z\nf: 2024-01-01\ng: 10m\nh: 2001:db8::1\nj: 123456789012345678901\n", true},
	{"a:\nb: x\n", true},
	{"a: x # comment\n", false},
	{"a: &anchor x\nb: *anchor\n", false},
	{"a: {b: c}\n", false},
	{"a: [1, 2]\n", false},
	{"a: >\n  folded\n  text\n", false},
	{"a: plain\n  continued\n", false},
	{"a: b\na: c\n", false},
	{"a: !!str 1\n", false},
	{"a:\n\tb: c\n", false},
	{"- - nested\n", false},
	{"? complex\n: key\n", false},
	{"a: |\n    deep\n  shallow\n", false},
	{"a: |\n  text\n  # not a comment\n", false},
}

// TestFastYAMLMatchesReference: documents in kubectl's style convert to
// what sigs.k8s.io/yaml gives, and the fast converter gives up on the rest
// (they then take the reference's path).
func TestFastYAMLMatchesReference(t *testing.T) {
	for _, c := range fastYAMLCases {
		if got := sameAsReference(t, c.doc); got != c.fast {
			t.Errorf("fast conversion %v, want %v, for:\n%s", got, c.fast, c.doc)
		}
		var yc blockConverter
		if _, err := yc.yamlToJSON(c.doc); err != nil {
			if _, refErr := yaml.YAMLToJSON([]byte(c.doc)); refErr == nil {
				t.Errorf("yamlToJSON failed (%v) where the reference converts:\n%s", err, c.doc)
			}
		}
	}
}

// TestFastYAMLTakesKubectlLists: the items of the benchmark's List, as
// kubectl prints it, all take the fast path and decode to the same objects.
func TestFastYAMLTakesKubectlLists(t *testing.T) {
	yamlText, jsonText := scaleList(t, 50)
	part := splitYAML(string(yamlText))[0]
	items, ok := listItems(part)
	if !ok || len(items) != 100 {
		t.Fatalf("%d items (%v)", len(items), ok)
	}
	for i, item := range items {
		if !sameAsReference(t, item) {
			t.Fatalf("item %d took the slow path:\n%s", i, item)
		}
	}
	fromYAML, err := Decode(yamlText)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := Decode(jsonText)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML.Services, fromJSON.Services) || !reflect.DeepEqual(fromYAML.EndpointSlices, fromJSON.EndpointSlices) {
		t.Error("the YAML and the JSON of one List decode to different objects")
	}
}

// FuzzFastYAML: whatever the input, the fast converter gives up or agrees
// with the reference.
func FuzzFastYAML(f *testing.F) {
	for _, c := range fastYAMLCases {
		f.Add(c.doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > 4096 || strings.Count(doc, "\n") > 200 {
			return // the reference's time grows fast with some shapes
		}
		sameAsReference(t, doc)
	})
}

// TestOnePassDecodeMatchesTypedDecode: the one-pass decode of an object
// (its identity and only the parts the model reads, then those parts
// typed) keeps what the whole typed decode and the trimmer keep, for
// Services and EndpointSlices with every field the model reads.
func TestOnePassDecodeMatchesTypedDecode(t *testing.T) {
	docs := []string{
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb","namespace":"ns","uid":"u1","resourceVersion":"7","labels":{"a":"b"},"annotations":{"x":"y"},
		  "managedFields":[{"manager":"kubectl","operation":"Update"}]},
		  "spec":{"type":"LoadBalancer","clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00::1"],"ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"PreferDualStack",
		  "ports":[{"name":"http","port":80,"targetPort":"web","nodePort":30080,"protocol":"TCP"},{"name":"dns","port":53,"protocol":"UDP","targetPort":53}],
		  "externalIPs":["192.0.2.1"],"loadBalancerSourceRanges":["198.51.100.0/24"],"externalTrafficPolicy":"Local","healthCheckNodePort":32000,
		  "internalTrafficPolicy":"Cluster","sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}},"trafficDistribution":"PreferClose"},
		  "status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.1","ipMode":"VIP"}]},"conditions":[{"type":"x","status":"True","lastTransitionTime":"2024-01-01T00:00:00Z","reason":"r","message":"m"}]}}`,
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain"},"spec":{"ports":[{"port":80}]}}`,
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"lb-1","namespace":"ns","labels":{"kubernetes.io/service-name":"lb"},
		  "annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"2024-01-01T00:00:00Z","other":"z"}},"addressType":"IPv4",
		  "ports":[{"name":"http","port":8080,"protocol":"TCP"}],
		  "endpoints":[{"addresses":["10.0.0.1","10.0.0.9"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"n1","zone":"z1",
		  "hints":{"forZones":[{"name":"z1"}],"forNodes":[{"name":"n1"}]},"targetRef":{"kind":"Pod","name":"p"}},{"addresses":["10.0.0.2"]}]}`,
	}
	docs = append(docs, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"topology.kubernetes.io/zone":"z1"},"annotations":{"a":"b"}},
	  "spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24","fd00:1::/64"],"taints":[{"key":"k","effect":"NoSchedule"}],"providerID":"p"},
	  "status":{"addresses":[{"type":"InternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}],"conditions":[{"type":"Ready","status":"True"}]}}`)
	for _, doc := range docs {
		one, typed := newTestObjects(), newTestObjects()
		if err := one.add([]byte(doc), "document 1"); err != nil {
			t.Fatal(err)
		}
		if err := typed.addTyped([]byte(doc), "document 1"); err != nil {
			t.Fatal(err)
		}
		// Of a Node, nftproxy reads the labels, pod CIDRs, taints and
		// addresses.
		for i, n := range typed.Nodes {
			if len(one.Nodes) <= i {
				t.Fatalf("the one-pass decode lost a Node")
			}
			got := one.Nodes[i]
			if got.Name != n.Name || !reflect.DeepEqual(got.Labels, n.Labels) || !reflect.DeepEqual(got.Spec.PodCIDRs, n.Spec.PodCIDRs) ||
				!reflect.DeepEqual(got.Spec.Taints, n.Spec.Taints) || !reflect.DeepEqual(got.Status.Addresses, n.Status.Addresses) {
				t.Errorf("Node: one pass %+v, typed %+v", got, n)
			}
		}
		if !reflect.DeepEqual(one.Services, typed.Services) || !reflect.DeepEqual(one.EndpointSlices, typed.EndpointSlices) {
			a, _ := json.Marshal([]any{one.Services, one.EndpointSlices})
			b, _ := json.Marshal([]any{typed.Services, typed.EndpointSlices})
			t.Errorf("one pass:\n%s\ntyped:\n%s", a, b)
		}
	}
}

func newTestObjects() *Objects {
	o, _ := Decode([]byte("apiVersion: v1\nkind: List\nitems: []\n"))
	return o
}

// FuzzDecodeJSON: on any input, the one-pass JSON decode and the
// document-by-document way keep the same objects, or the one-pass decode
// gives way.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n"},"spec":{"ports":[{"port":80}],"clusterIP":"10.96.0.1"}},null]}`)
	f.Add(`[{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],"ports":[{"port":8080}]}] {"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`)
	f.Add(`{"kind":"List","items":[{"kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}}}}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		data := []byte(strings.TrimSpace(doc))
		if len(data) == 0 || (data[0] != '{' && data[0] != '[') {
			return
		}
		fast := newTestObjects()
		ok, fastErr := fast.addJSON(jsoniter.ParseBytes(fast.json, data))
		if !ok {
			return
		}
		slow := newTestObjects()
		slowErr := eachDocument(data, slow.add)
		if (fastErr == nil) != (slowErr == nil) {
			t.Fatalf("one pass: %v, document by document: %v", fastErr, slowErr)
		}
		if fastErr != nil {
			return
		}
		if !reflect.DeepEqual(fast.Services, slow.Services) || !reflect.DeepEqual(fast.EndpointSlices, slow.EndpointSlices) || len(fast.Nodes) != len(slow.Nodes) || !reflect.DeepEqual(fast.Ignored, slow.Ignored) {
			a, _ := json.Marshal(fast)
			b, _ := json.Marshal(slow)
			t.Fatalf("one pass %s\ndocument by document %s", a, b)
		}
	})
}
