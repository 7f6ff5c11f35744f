package nftgen

import (
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestLayoutDescribesEveryGeneratedObject: every chain of a ruleset with
// every feature has an iptables role (but the reject helper), every map a
// table and chain, and every comment that names a Service names it so
// that ServiceOfComment finds it.
func TestLayoutDescribesEveryGeneratedObject(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.FeaturePorts()
	rs := g.Ruleset(ports)
	names := map[string]bool{}
	for _, sp := range ports {
		names[sp.Name.String()] = true
	}
	st := rs.State()
	for _, c := range st.Chains {
		role, ok := RoleOf(c.Name)
		if c.Name == ChainReject {
			if ok {
				t.Errorf("%s has the role %+v, want none", c.Name, role)
			}
			continue
		}
		if !ok || role.Table != "nat" && role.Table != "filter" || (c.Base != nil) != role.Base {
			t.Errorf("chain %s: role %+v, %v", c.Name, role, ok)
		}
		if !role.Base && !IsKubeProxyChain(role.Chain) {
			t.Errorf("chain %s stands for %s, which kube-proxy does not write", c.Name, role.Chain)
		}
		for _, r := range c.Rules {
			if svc, ok := ServiceOfComment(r.Comment); ok && !names[svc] {
				t.Errorf("comment %q of %s names %q, not a service port", r.Comment, c.Name, svc)
			}
		}
	}
	for _, m := range st.Maps {
		if table, chain := MapRoleOf(m.Spec.Name); chain == "" || !IsKubeProxyChain(chain) {
			t.Errorf("map %s stands for %s %q", m.Spec.Name, table, chain)
		}
	}
}

func TestServiceOfComment(t *testing.T) {
	for c, want := range map[string]string{
		"ns/web:http cluster IP": "ns/web:http",
		"ns/web:http":            "ns/web:http",
		"masquerade traffic for ns/web:http external destinations":                     "ns/web:http",
		"masquerade LOCAL traffic for ns/web:http external destinations":               "ns/web:http",
		"route LOCAL traffic for ns/web:http external destinations":                    "ns/web:http",
		"pod traffic for ns/web:http external destinations":                            "ns/web:http",
		"other traffic to ns/web:http will be dropped by KUBE-PROXY-FIREWALL":          "ns/web:http",
		"ns/web has no endpoints":                                                      "ns/web",
		"kubernetes forwarding rules":                                                  "",
		"kubernetes service nodeports; NOTE: this must be the last rule in this chain": "",
		"Ns/web:http": "",
		"":            "",
	} {
		got, ok := ServiceOfComment(c)
		if got != want || ok != (want != "") {
			t.Errorf("ServiceOfComment(%q) = %q, %v; want %q", c, got, ok, want)
		}
	}
}
