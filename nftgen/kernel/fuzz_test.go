package kernel

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// fuzzKernel, when set, applies every generated ruleset to a kernel; the
// linux test file sets it up when running as root.
var fuzzKernel func(t *testing.T, rs *nftgen.Ruleset)

// FuzzGenerate turns arbitrary Services and EndpointSlices into rulesets of
// both families. Generation and encoding must never panic, comments must
// stay within the kernel's limit, and (as root) the kernel must accept
// every ruleset.
func FuzzGenerate(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"metadata":{"namespace":"ns","name":"a"},"spec":{"type":"NodePort","clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00::1"],"sessionAffinity":"ClientIP","ports":[{"name":"http","port":80,"nodePort":30080},{"name":"dns","port":53,"protocol":"UDP"},{"name":"s","port":9,"protocol":"SCTP"}]}}`,
			`{"metadata":{"namespace":"ns","name":"a-1","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","ports":[{"name":"http","port":8080},{"name":"dns","port":5353,"protocol":"UDP"}],"endpoints":[{"addresses":["10.0.0.1"],"nodeName":"n"},{"addresses":["10.0.0.2"],"conditions":{"ready":false,"serving":true,"terminating":true}}]}`},
		{`{"metadata":{"namespace":"ns-with-a-very-long-name-that-is-sixty-three-characters-long-x","name":"svc-with-a-very-long-name-that-is-sixty-three-characters-long-x"},"spec":{"type":"LoadBalancer","clusterIP":"10.96.0.2","externalIPs":["192.0.2.1"],"loadBalancerSourceRanges":["198.51.100.0/24","2001:db8::/32"],"externalTrafficPolicy":"Local","healthCheckNodePort":32000,"ports":[{"name":"port-name-15chr","port":443,"nodePort":30443}]},"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.1"}]}}}`,
			`{"metadata":{"namespace":"ns","name":"b-1","labels":{"kubernetes.io/service-name":"b"}},"addressType":"IPv4","ports":[{"name":"port-name-15chr","port":8443}],"endpoints":[{"addresses":["10.0.0.3"],"nodeName":"n","hints":{"forZones":[{"name":"z"}]}}]}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, svcJSON, sliceJSON []byte) {
		var svc v1.Service
		var sl discovery.EndpointSlice
		if json.Unmarshal(svcJSON, &svc) != nil || json.Unmarshal(sliceJSON, &sl) != nil {
			return
		}
		store := model.NewStore()
		store.SetService(&svc)
		store.SetEndpointSlice(&sl)
		states, _ := store.State(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
			g := featureGenerator(t)
			if fam == nftgen.FamilyIPv6 {
				g = testGenerator6(t)
			}
			rs := g.Ruleset(states)
			b := &exprBuilder{family: fam, addAnon: func(anonVmap) (string, uint32) { return "__map%d", 1 }}
			for _, c := range rs.Chains() {
				for i := range c.Rules {
					if len(c.Rules[i].Comment) > nftgen.MaxCommentLen {
						t.Fatalf("comment of %d bytes", len(c.Rules[i].Comment))
					}
					if _, err := b.ruleExprs(&c.Rules[i]); err != nil {
						t.Fatalf("%s: %v", c.Name, err)
					}
				}
			}
			for _, m := range rs.Maps {
				for _, e := range rs.Elements(m.Name) {
					if len(e.Comment) > nftgen.MaxCommentLen {
						t.Fatalf("element comment of %d bytes", len(e.Comment))
					}
				}
			}
			if fuzzKernel != nil {
				fuzzKernel(t, rs)
			}
		}
	})
}
