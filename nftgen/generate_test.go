package nftgen

import (
	"crypto/sha256"
	"encoding/base32"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestChainNamesMatchKubeProxy(t *testing.T) {
	// The example from kube-proxy's own tests.
	n := svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP}
	if got := ServiceChainName(n); got != "KUBE-SVC-XPGD46QRK7WJZT7O" {
		t.Errorf("ServiceChainName = %s, want KUBE-SVC-XPGD46QRK7WJZT7O", got)
	}
	if got := EndpointChainName(n, "10.180.0.1:80"); !strings.HasPrefix(got, "KUBE-SEP-") || len(got) != len("KUBE-SEP-")+16 {
		t.Errorf("EndpointChainName = %s", got)
	}
	// The formula written out, for a short name and for one longer than
	// hashedName's stack buffer.
	long := svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("s", 253)}, Port: "p", Protocol: v1.ProtocolSCTP}
	for _, n := range []svcmodel.ServicePortName{n, long} {
		sum := sha256.Sum256([]byte(n.String() + n.LowerProtocol() + "[fd00::1]:8080"))
		want := "KUBE-SEP-" + base32.StdEncoding.EncodeToString(sum[:])[:16]
		if got := EndpointChainName(n, "[fd00::1]:8080"); got != want {
			t.Errorf("EndpointChainName(%s) = %s, want %s", n, got, want)
		}
		svc, svl, ext, fw := portChainNames(n)
		if svc != ServiceChainName(n) || svl != LocalChainName(n) || ext != ExternalChainName(n) || fw != FirewallChainName(n) {
			t.Errorf("portChainNames(%s) = %s %s %s %s, not the four names", n, svc, svl, ext, fw)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden file (go test -update rewrites it).\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestGenerateClusterIP(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	rs := g.Ruleset([]svcmodel.ServicePortState{
		nftgentest.Port("ns1", "svc1", 80, "10.96.0.10", "10.244.0.2:8080", "10.244.0.3:8080", "10.244.0.4:8080"),
		nftgentest.Port("ns1", "single", 443, "10.96.0.11", "10.244.0.5:8443"),
		nftgentest.Port("ns1", "empty", 53, "10.96.0.12"),
	})
	golden(t, "clusterip.nft", rs.Text())
}

func TestGenerateMasqueradeModes(t *testing.T) {
	sp := nftgentest.Port("ns1", "svc1", 80, "10.96.0.10", "10.244.0.2:8080")
	tests := []struct {
		name     string
		cfg      Config
		wantMasq string // the KUBE-SVC masquerade rule, or "" for none
	}{
		{"cluster CIDR", Config{ClusterCIDRs: testGenerator("10.244.0.0/16").cfg.ClusterCIDRs},
			`ip daddr 10.96.0.10 meta l4proto tcp th dport 80 ip saddr != 10.244.0.0/16 jump KUBE-MARK-MASQ comment "ns1/svc1:p80 cluster IP"`},
		{"masquerade all", Config{MasqueradeAll: true},
			`ip daddr 10.96.0.10 meta l4proto tcp th dport 80 jump KUBE-MARK-MASQ comment "ns1/svc1:p80 cluster IP"`},
		{"neither", Config{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bit := 3
			tt.cfg.Family, tt.cfg.MasqueradeBit = FamilyIPv4, &bit
			g, err := NewGenerator(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			svc := g.Service(&sp).Chains[0]
			var got string
			if len(svc.Rules) == 2 {
				got = svc.Rules[0].Text(FamilyIPv4)
			}
			if got != tt.wantMasq {
				t.Errorf("masquerade rule = %q, want %q", got, tt.wantMasq)
			}
			top := g.Top()
			var markRule string
			for _, c := range top.Chains {
				if c.Name == ChainMarkMasq {
					markRule = c.Rules[0].Text(FamilyIPv4)
				}
			}
			if markRule != "meta mark set meta mark | 0x00000008" {
				t.Errorf("--masquerade-bit 3 gave %q", markRule)
			}
		})
	}
}

func TestCommentsNeverExceedKernelLimit(t *testing.T) {
	long := strings.Repeat("a", 63)
	sp := nftgentest.Port(long, long, 80, "10.96.0.10", "10.244.0.2:8080")
	sp.Name.Port = strings.Repeat("p", 15)
	f := testGenerator().Service(&sp)
	for _, c := range f.Chains {
		for _, r := range c.Rules {
			if len(r.Comment) > MaxCommentLen {
				t.Errorf("rule comment of %d bytes: %q", len(r.Comment), r.Comment)
			}
		}
	}
	for _, els := range f.Elements {
		for _, e := range els {
			if len(e.Comment) > MaxCommentLen {
				t.Errorf("element comment of %d bytes", len(e.Comment))
			}
		}
	}
	if got := TruncateComment(strings.Repeat("é", 100)); len(got) > MaxCommentLen || !strings.HasSuffix(got, "é") {
		t.Errorf("TruncateComment split a rune or kept too much: %d bytes", len(got))
	}
}

func TestGeneratorRejectsBadConfig(t *testing.T) {
	bit := 32
	if _, err := NewGenerator(Config{Family: FamilyIPv4, MasqueradeBit: &bit}); err == nil {
		t.Error("masquerade bit 32 accepted")
	}
	if _, err := NewGenerator(Config{Family: FamilyIPv4, ClusterCIDRs: testGenerator().cfg.ClusterCIDRs}); err != nil {
		t.Error(err)
	}
}

// TestGeneratorDefaultsToKubeProxysMarkBit: a Config that does not name a
// masquerade bit gets kube-proxy's default, 0x4000, not bit 0.
func TestGeneratorDefaultsToKubeProxysMarkBit(t *testing.T) {
	g, err := NewGenerator(Config{Family: FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range g.Top().Chains {
		writeChain(&b, FamilyIPv4, c)
	}
	if !strings.Contains(b.String(), "meta mark set meta mark | 0x00004000") {
		t.Errorf("KUBE-MARK-MASQ does not set 0x4000:\n%s", b.String())
	}
}
