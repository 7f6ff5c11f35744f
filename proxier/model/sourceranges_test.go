package model

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestSourceRangesLikeKubeProxyButFailClosed: entries with white space and
// IPv4 leading zeros are what the API server accepts and kube-proxy trims;
// an entry that still does not parse marks the port so that the generator
// fails closed.
func TestSourceRangesLikeKubeProxyButFailClosed(t *testing.T) {
	tests := []struct {
		in          []string
		want        []string
		wantInvalid bool
	}{
		{in: []string{" 198.51.100.0/24 "}, want: []string{"198.51.100.0/24"}},
		{in: []string{"\t2001:db8::/32\n", "10.1.2.3/8"}, want: []string{"2001:db8::/32", "10.0.0.0/8"}},
		{in: []string{"010.000.000.000/8"}, want: []string{"10.0.0.0/8"}},
		{in: []string{"", "  "}},
		{in: []string{"bogus"}, wantInvalid: true},
		{in: []string{"198.51.100.0/33", "192.0.2.0/24"}, want: []string{"192.0.2.0/24"}, wantInvalid: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.in), func(t *testing.T) {
			svc := service(func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerSourceRanges = tt.in
			})
			ports, problems := ServicePorts(svc)
			if len(ports) != 1 {
				t.Fatalf("ports = %v, problems = %v", ports, problems)
			}
			var got []string
			for _, p := range ports[0].LoadBalancerSourceRanges {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ranges = %v, want %v", got, tt.want)
			}
			if ports[0].SourceRangesInvalid != tt.wantInvalid {
				t.Errorf("invalid = %v, want %v", ports[0].SourceRangesInvalid, tt.wantInvalid)
			}
			if tt.wantInvalid != (len(problems) > 0) {
				t.Errorf("problems = %v", problems)
			}
		})
	}
	if _, err := parsePrefixSloppy("1.2.3.4"); err == nil {
		t.Error("an address without a length parsed as a CIDR")
	}
	if p, _ := parsePrefixSloppy("0.0.0.0/0"); p != netip.MustParsePrefix("0.0.0.0/0") {
		t.Errorf("0.0.0.0/0 parsed as %v", p)
	}
}
