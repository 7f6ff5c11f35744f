package objfile

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/e2e/harness"
)

// benchServices is the size of the benchmarked files: 10,000 Services x
// 10 endpoints, the size of the scale runs' smallest large cluster.
const benchServices = 10000

// scaleList returns the List `kubectl get svc,endpointslices -A -o yaml`
// would print for the scale objects, in YAML and in JSON.
func scaleList(b testing.TB, n int) (yamlText, jsonText []byte) {
	b.Helper()
	list := &v1.List{}
	list.APIVersion, list.Kind = "v1", "List"
	for i := range n {
		svc, sl := harness.ScaleObjects(i, 10)
		svc.APIVersion, svc.Kind = "v1", "Service"
		sl.APIVersion, sl.Kind = "discovery.k8s.io/v1", "EndpointSlice"
		svc.Labels = map[string]string{"app": svc.Name}
		svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`}
		list.Items = append(list.Items, runtime.RawExtension{Object: svc}, runtime.RawExtension{Object: sl})
	}
	jsonText, err := json.Marshal(list)
	if err != nil {
		b.Fatal(err)
	}
	if yamlText, err = yaml.JSONToYAML(jsonText); err != nil {
		b.Fatal(err)
	}
	return yamlText, jsonText
}

// BenchmarkDecode decodes the List of 10,000 Services and their slices
// from YAML and from JSON.
func BenchmarkDecode(b *testing.B) {
	yamlText, jsonText := scaleList(b, benchServices)
	for _, form := range []struct {
		name string
		data []byte
	}{{"yaml", yamlText}, {"json", jsonText}} {
		b.Run(form.name, func(b *testing.B) {
			b.SetBytes(int64(len(form.data)))
			for b.Loop() {
				objs, err := Decode(form.data)
				if err != nil {
					b.Fatal(err)
				}
				if len(objs.Services) != benchServices || len(objs.EndpointSlices) != benchServices {
					b.Fatalf("decoded %d Services, %d slices", len(objs.Services), len(objs.EndpointSlices))
				}
			}
		})
	}
}
