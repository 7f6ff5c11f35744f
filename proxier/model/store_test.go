package model

import (
	"testing"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// versioned returns sl with resourceVersion rv.
func versioned(sl *discovery.EndpointSlice, rv string) *discovery.EndpointSlice {
	sl.ResourceVersion = rv
	return sl
}

// TestStoreIgnoresAnObjectItHolds: an informer delivers the objects of its
// first list again as events after the store was filled from that list,
// and again on every relist. Such a delivery (the same resourceVersion)
// marks nothing changed, so it costs no sync; a new version, or an object
// without one (an objects file's), always does.
func TestStoreIgnoresAnObjectItHolds(t *testing.T) {
	for _, sharing := range []bool{false, true} {
		s := NewStore()
		// sharing: the slices come as the informers cache them.
		trim := NewTrimmer()
		setSlice := s.SetEndpointSlice
		if sharing {
			setSlice = func(sl *discovery.EndpointSlice) (bool, *Problem) { return s.SetSlice(trim.Slice(sl)) }
		}
		svc := service(nil)
		svc.ResourceVersion = "7"
		if !s.SetService(svc) {
			t.Fatalf("sharing %v: a new Service changed nothing", sharing)
		}
		if _, p := setSlice(versioned(slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}), "8")); p != nil {
			t.Fatal(p)
		}
		s.TakeChanged()

		again := service(nil)
		again.ResourceVersion = "7"
		if s.SetService(again) {
			t.Errorf("sharing %v: the same Service version changed it", sharing)
		}
		againSlice := trim.Slice(versioned(slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}), "8"))
		if changed, p := s.SetSlice(againSlice); changed || p != nil {
			t.Errorf("sharing %v: the same slice version: changed %v, problem %v", sharing, changed, p)
		}
		if got := s.TakeChanged(); len(got) != 0 {
			t.Errorf("sharing %v: changed after second deliveries: %v", sharing, got)
		}
		if s.heldSlice(againSlice.Key()).Slice != againSlice {
			t.Errorf("sharing %v: the store kept the old copy of the slice, which the informer no longer holds", sharing)
		}

		if changed, _ := setSlice(versioned(slice("a", "p80", 8080, epSpec{ip: "10.0.0.2"}), "9")); !changed {
			t.Errorf("sharing %v: a new slice version changed nothing", sharing)
		}
		if states, _ := s.State(svc1); len(states) != 1 || endpointList(states[0].Endpoints) != "10.0.0.2:8080" {
			t.Errorf("sharing %v: state after the new version = %+v", sharing, states)
		}
		s.TakeChanged()
		if changed, _ := setSlice(slice("a", "p80", 8080, epSpec{ip: "10.0.0.2"})); !changed {
			t.Errorf("sharing %v: a slice without a resourceVersion changed nothing", sharing)
		}
	}
}

// TestReplaceMarksOnlyWhatChanged: a relist that returns what the store
// holds marks nothing; a slice or Service it no longer lists is deleted
// and a new version set, each marking its Service.
func TestReplaceMarksOnlyWhatChanged(t *testing.T) {
	s := NewStore()
	svc := service(nil)
	svc.ResourceVersion = "5"
	svcs := []*Service{ParseService(svc)}
	a := versioned(slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}), "1")
	b := versioned(slice("b", "p80", 8080, epSpec{ip: "10.0.0.2"}), "2")
	other := versioned(slice("c", "p80", 8080, epSpec{ip: "10.0.0.3"}), "3")
	other.Labels[discovery.LabelServiceName] = "svc2"
	if changed, problems := s.Replace(svcs, ParseSlices([]*discovery.EndpointSlice{a, b, other})); !changed || len(problems) != 0 {
		t.Fatalf("first replace: changed %v, problems %v", changed, problems)
	}
	s.TakeChanged()
	if changed, _ := s.Replace(svcs, ParseSlices([]*discovery.EndpointSlice{a, b, other})); changed {
		t.Errorf("replace with the same versions changed something")
	}
	if got := s.TakeChanged(); len(got) != 0 {
		t.Errorf("changed after the same list: %v", got)
	}
	if changed, _ := s.Replace(svcs, ParseSlices([]*discovery.EndpointSlice{a, other})); !changed {
		t.Errorf("replace without slice b changed nothing")
	}
	svc2 := types.NamespacedName{Namespace: "ns1", Name: "svc2"}
	if got := s.TakeChanged(); len(got) != 1 || got[0] != svc1 {
		t.Errorf("changed after b was dropped = %v, want only %v (not %v)", got, svc1, svc2)
	}
	if states, _ := s.State(svc1); endpointList(states[0].Endpoints) != "10.0.0.1:8080" {
		t.Errorf("svc1's endpoints after b was dropped: %s", endpointList(states[0].Endpoints))
	}
	if changed, _ := s.Replace(nil, ParseSlices([]*discovery.EndpointSlice{a, other})); !changed {
		t.Errorf("replace without the Service changed nothing")
	}
	if got := s.TakeChanged(); len(got) != 1 || got[0] != svc1 {
		t.Errorf("changed after the Service was dropped = %v, want only %v", got, svc1)
	}
	if states, _ := s.State(svc1); states != nil {
		t.Errorf("the dropped Service still has state: %+v", states)
	}
}
