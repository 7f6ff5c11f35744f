package metrics

import (
	"runtime"
	"testing"
)

// TestBuildInfoNamesTheRelease: kubernetes_build_info says which kube-proxy
// release nftproxy matches and nftproxy's own version (component-base's
// gauge said v0.0.0-master+$Format:%H$ in an nftproxy build).
func TestBuildInfoNamesTheRelease(t *testing.T) {
	m := New()
	m.RegisterBuildInfo("v0.9.1-3-gfe84a71")
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubernetes_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["git_version"] != "v1.37.2+nftproxy.0.9.1-3-gfe84a71" || labels["major"] != "1" || labels["minor"] != "37" || labels["go_version"] != runtime.Version() {
			t.Errorf("labels %v", labels)
		}
		return
	}
	t.Fatal("no kubernetes_build_info")
}
