package model

import (
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTriggerTimesCountRealChangesAfterStart: as kube-proxy's tracker, a
// slice's last-change-trigger-time counts only when it is after the store
// started (not the initial list's), once (a resync delivers the same time
// again), with the slice's family; a deletion drops the Service's pending
// ones.
func TestTriggerTimesCountRealChangesAfterStart(t *testing.T) {
	for _, share := range []bool{false, true} {
		s := NewStore()
		// share: the slices come as the informers cache them, parsed by a
		// Trimmer.
		set := s.SetEndpointSlice
		if share {
			trim := NewTrimmer()
			set = func(sl *discovery.EndpointSlice) (bool, *Problem) { return s.SetSlice(trim.Slice(sl)) }
		}
		at := func(name string, when time.Time, family discovery.AddressType) *discovery.EndpointSlice {
			sl := slice(name, "p80", 8080, epSpec{ip: "10.0.0.1"})
			if family == discovery.AddressTypeIPv6 {
				sl = slice(name, "p80", 8080, epSpec{ip: "fd00::1"})
			}
			sl.AddressType = family
			sl.Annotations = map[string]string{TriggerTimeAnnotation: when.Format(time.RFC3339Nano)}
			return sl
		}
		names := []types.NamespacedName{svc1}
		set(at("a", s.started.Add(-time.Hour), discovery.AddressTypeIPv4))
		if got := s.TakeTriggerTimes(names); len(got) != 0 {
			t.Errorf("share %v: the initial list's trigger time counted: %v", share, got)
		}
		change := s.started.Add(time.Second)
		set(at("a", change, discovery.AddressTypeIPv4))
		set(at("a", change, discovery.AddressTypeIPv4)) // a resync
		set(at("b", change, discovery.AddressTypeIPv6))
		got := s.TakeTriggerTimes(names)
		if len(got) != 2 || got[0] != (Trigger{Time: got[0].Time, Family: svcmodel.IPv4}) || got[1].Family != svcmodel.IPv6 || !got[0].Time.Equal(change) {
			t.Errorf("share %v: triggers %v, want one svcmodel.IPv4 and one svcmodel.IPv6 change at %v", share, got, change)
		}
		set(at("a", change.Add(time.Second), discovery.AddressTypeIPv4))
		s.DeleteEndpointSlice("ns1", "b")
		if got := s.TakeTriggerTimes(names); len(got) != 0 {
			t.Errorf("share %v: after a deletion: %v, want none", share, got)
		}
	}
}
