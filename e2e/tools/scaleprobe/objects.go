package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/nftproxy/nftproxy/e2e/harness"
)

// writeObjects writes the probe's n Services and their EndpointSlices to
// path as the List `kubectl get svc,endpointslices -A -o yaml` prints (JSON
// if path ends in .json), for timing `nftproxy sync --objects` on the same
// objects the probe programs.
func writeObjects(path string, n, endpoints int) error {
	list := &v1.List{}
	list.APIVersion, list.Kind = "v1", "List"
	for i := range n {
		svc, sl := harness.ScaleObjects(i, endpoints)
		svc.APIVersion, svc.Kind = "v1", "Service"
		sl.APIVersion, sl.Kind = "discovery.k8s.io/v1", "EndpointSlice"
		list.Items = append(list.Items, runtime.RawExtension{Object: svc}, runtime.RawExtension{Object: sl})
	}
	out, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	if !strings.HasSuffix(path, ".json") {
		if out, err = yaml.JSONToYAML(out); err != nil {
			return fmt.Errorf("objects: %w", err)
		}
	}
	return os.WriteFile(path, out, 0o644)
}
