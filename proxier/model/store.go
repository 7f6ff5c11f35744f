package model

import (
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Store holds the current Services and EndpointSlices and remembers which
// Services changed since the last call to TakeChanged, so that a sync only
// recomputes what changed. It is not safe for concurrent use.
type Store struct {
	// NoExternalIPs drops every Service's spec.externalIPs, as kube-proxy
	// does with the AllowServiceExternalIPs feature gate off.
	NoExternalIPs bool

	// entries holds, by Service name, the Service and its slices: one
	// map for both, since a map's slot costs more than what it holds.
	entries map[types.NamespacedName]*entry
	// trim parses what SetEndpointSlice is given, sharing node and zone
	// names.
	trim *Trimmer
	// sliceOwner maps a slice (namespace/name) to the entry that holds
	// it, so that replacing one slice costs O(1).
	sliceOwner map[types.NamespacedName]*entry
	// changed holds the Services changed since TakeChanged, with what
	// changed: the Service object, its endpoints, or both.
	changed map[types.NamespacedName]changeKind
	// triggers are the last-change-trigger-time annotations of slice
	// changes not yet programmed, with the slice's family.
	triggers map[types.NamespacedName][]Trigger
	// started is when the store was made: a trigger time before it is the
	// initial list's, not a change this proxy programs (as kube-proxy's
	// tracker start time).
	started time.Time
}

// changeKind says what of a Service changed.
type changeKind uint8

const (
	serviceChanged changeKind = 1 << iota
	endpointsChanged
)

// TriggerTimeAnnotation is the EndpointSlice annotation with the time of
// the change (a pod becoming ready, say) that caused the update; kube-proxy
// measures network programming latency from it.
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// entry is what the store holds under one Service's name: the Service
// (nil before it arrives or once it is deleted) and its slices, which can
// arrive before it (most Services have one or two: a list costs less than
// a map per Service). An entry with neither is dropped.
type entry struct {
	svc    *Service
	slices []*heldSlice
}

// entryOf returns the entry of nn, made if there is none.
func (s *Store) entryOf(nn types.NamespacedName) *entry {
	e := s.entries[nn]
	if e == nil {
		e = &entry{}
		s.entries[nn] = e
	}
	return e
}

// service returns the Service nn, or nil.
func (s *Store) service(nn types.NamespacedName) *Service {
	if e := s.entries[nn]; e != nil {
		return e.svc
	}
	return nil
}

// dropIfEmpty drops nn's entry e when it holds nothing.
func (s *Store) dropIfEmpty(nn types.NamespacedName, e *entry) {
	if e.svc == nil && len(e.slices) == 0 {
		delete(s.entries, nn)
	}
}

// heldSlice is a Slice in the store with the trigger time last recorded
// for it.
type heldSlice struct {
	*Slice
	trigger time.Time
}

// NewStore returns an empty Store. It keeps each EndpointSlice as a Slice
// (16 bytes an IPv4 endpoint, 28 an IPv6 one) and each Service as a
// Service, nothing of the objects, so that a caller can drop the objects
// it stored; an informer that caches these compact forms shares them with
// it.
func NewStore() *Store {
	return &Store{
		entries:    map[types.NamespacedName]*entry{},
		trim:       NewTrimmer(),
		sliceOwner: map[types.NamespacedName]*entry{},
		changed:    map[types.NamespacedName]changeKind{},
		triggers:   map[types.NamespacedName][]Trigger{},
		started:    time.Now(),
	}
}

// SetService adds or replaces a Service (see SetParsedService).
func (s *Store) SetService(svc *v1.Service) bool { return s.SetParsedService(ParseService(svc)) }

// SetParsedService adds or replaces a Service and reports whether that
// changed anything: the version it holds already (the same
// resourceVersion, as an informer delivers it again after its first list
// or a relist) is only swapped for the new copy.
func (s *Store) SetParsedService(svc *Service) bool {
	nn := svc.Key()
	e := s.entryOf(nn)
	old := e.svc
	e.svc = svc
	if old != nil && sameVersion(old.version, svc.version) {
		return false
	}
	s.changed[nn] |= serviceChanged
	return true
}

// sameVersion reports whether two resourceVersions name the same write of
// one object; objects without one (an objects file's) are never the same.
func sameVersion(a, b string) bool { return a != "" && a == b }

// Created returns when the Service nn was created (the zero time when it
// does not say, or is not stored).
func (s *Store) Created(nn types.NamespacedName) time.Time {
	if svc := s.service(nn); svc != nil {
		return svc.created
	}
	return time.Time{}
}

// DeleteService removes a Service.
func (s *Store) DeleteService(nn types.NamespacedName) {
	if e := s.entries[nn]; e != nil && e.svc != nil {
		e.svc = nil
		s.dropIfEmpty(nn, e)
		s.changed[nn] |= serviceChanged
	}
}

// SetEndpointSlice adds or replaces an EndpointSlice (see SetSlice).
func (s *Store) SetEndpointSlice(slice *discovery.EndpointSlice) (bool, *Problem) {
	return s.SetSlice(s.trim.Slice(slice))
}

// SetSlice adds or replaces an EndpointSlice and reports whether that
// changed anything (see SetService). A slice without a
// kubernetes.io/service-name label belongs to no Service; it is rejected
// with a Problem.
func (s *Store) SetSlice(slice *Slice) (bool, *Problem) {
	svc, ok := slice.ServiceName()
	if !ok {
		return false, &Problem{Kind: "EndpointSlice", Object: slice.Key(),
			Field: "metadata.labels", Reason: "no " + discovery.LabelServiceName + " label"}
	}
	if held := s.heldSlice(slice.Key()); held != nil && sameVersion(held.version, slice.version) {
		held.Slice = slice // the informer's cache holds this copy now
		return false, nil
	}
	// A slice may move between Services if its label changes.
	previous := s.deleteSliceNamed(slice.Key())
	stored := &heldSlice{Slice: slice}
	e := s.entryOf(svc)
	e.slices = append(e.slices, stored)
	s.sliceOwner[slice.Key()] = e
	s.changed[svc] |= endpointsChanged
	// As kube-proxy: a change's trigger time counts once (a resync
	// delivers the same one again) and only when it is after the start.
	if previous != nil {
		stored.trigger = previous.trigger
	}
	if slice.trigger != "" {
		if t, err := time.Parse(time.RFC3339Nano, slice.trigger); err == nil && t.After(s.started) && t.After(stored.trigger) {
			stored.trigger = t
			fam, _ := sliceFamily(slice.parsed.addressType)
			s.triggers[svc] = append(s.triggers[svc], Trigger{Time: t, Family: fam})
		}
	}
	return true, nil
}

// heldSlice returns what the store holds of the slice key, or nil.
func (s *Store) heldSlice(key types.NamespacedName) *heldSlice {
	e, ok := s.sliceOwner[key]
	if !ok {
		return nil
	}
	for _, sl := range e.slices {
		if sl.name == key.Name {
			return sl
		}
	}
	return nil
}

// Trigger is the time a change was made that a sync programs, and the
// family of the EndpointSlice that carried it.
type Trigger struct {
	Time   time.Time
	Family svcmodel.IPFamily
}

// TakeTriggerTimes returns the change trigger times recorded for these
// Services and forgets them.
func (s *Store) TakeTriggerTimes(names []types.NamespacedName) []Trigger {
	var out []Trigger
	for _, nn := range names {
		out = append(out, s.triggers[nn]...)
		delete(s.triggers, nn)
	}
	return out
}

// Pending returns how many Services have changes not yet taken: of the
// Service object, and of its endpoints (kube-proxy's service and endpoint
// "changes pending").
func (s *Store) Pending() (services, endpoints int) {
	for _, k := range s.changed {
		if k&serviceChanged != 0 {
			services++
		}
		if k&endpointsChanged != 0 {
			endpoints++
		}
	}
	return services, endpoints
}

// DeleteEndpointSlice removes the EndpointSlice namespace/name.
func (s *Store) DeleteEndpointSlice(namespace, name string) {
	if held := s.deleteSliceNamed(types.NamespacedName{Namespace: namespace, Name: name}); held != nil {
		// A deletion's trigger time is that of the last update, not of
		// the deletion: kube-proxy drops the Service's pending ones.
		svc, _ := held.ServiceName()
		delete(s.triggers, svc)
	}
}

// deleteSliceNamed removes the slice key and returns what was stored of
// it (held under the Service its label named then).
func (s *Store) deleteSliceNamed(key types.NamespacedName) *heldSlice {
	e, ok := s.sliceOwner[key]
	if !ok {
		return nil
	}
	delete(s.sliceOwner, key)
	i := slices.IndexFunc(e.slices, func(sl *heldSlice) bool { return sl.name == key.Name })
	if i < 0 {
		return nil // never: sliceOwner names only the entries that hold the slice
	}
	previous := e.slices[i]
	e.slices = slices.Delete(e.slices, i, i+1)
	svc, _ := previous.ServiceName()
	s.dropIfEmpty(svc, e)
	s.changed[svc] |= endpointsChanged
	return previous
}

// TakeChanged returns the Services that changed since the last call, sorted,
// and forgets them.
func (s *Store) TakeChanged() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(s.changed))
	for nn := range s.changed {
		out = append(out, nn)
	}
	sortNames(out)
	s.changed = map[types.NamespacedName]changeKind{}
	return out
}

// ServiceCount returns the number of Services in the store that have a
// cluster IP of family ipv6 or not (an IPv4-only cluster's IPv6 table
// holds none of them), and how many of those are open: they have a node
// port, or an external or load balancer IP of that family, so their
// packets do not tell a shard by the cluster IP (nftgen.Place).
func (s *Store) ServiceCount(ipv6 bool) (services, open int) {
	for _, e := range s.entries {
		if svc := e.svc; svc != nil && ((ipv6 && svc.ipv6) || (!ipv6 && svc.ipv4)) {
			services++
			if svc.open(ipv6) {
				open++
			}
		}
	}
	return services, open
}

// ServiceNames returns every Service in the store, sorted.
func (s *Store) ServiceNames() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(s.entries))
	for nn, e := range s.entries {
		if e.svc != nil {
			out = append(out, nn)
		}
	}
	sortNames(out)
	return out
}

// EachServiceName yields the name of every Service, in no order: for a
// pass that does not need ServiceNames' sorted copy.
func (s *Store) EachServiceName() iter.Seq[types.NamespacedName] {
	return func(yield func(types.NamespacedName) bool) {
		for nn, e := range s.entries {
			if e.svc != nil && !yield(nn) {
				return
			}
		}
	}
}

// State computes the service ports of one Service with their endpoints. A
// deleted or skipped Service yields nothing.
func (s *Store) State(nn types.NamespacedName) ([]svcmodel.ServicePortState, []Problem) {
	e := s.entries[nn]
	if e == nil || e.svc == nil {
		return nil, nil
	}
	svc := e.svc
	// The Service's lists are shared by every read: the problems are
	// copied before anything is added to them.
	ports, problems := svc.ports, slices.Clip(svc.problems)
	if len(ports) == 0 {
		return nil, problems
	}
	held := e.slices
	parsed := make([]*storedSlice, len(held))
	for i, sl := range held {
		parsed[i] = &sl.parsed
	}
	eps, epProblems := endpointsOf(nn, parsed)
	problems = append(problems, epProblems...)
	out := make([]svcmodel.ServicePortState, 0, len(ports))
	for _, p := range ports {
		if s.NoExternalIPs {
			p.ExternalIPs = nil
		}
		out = append(out, svcmodel.ServicePortState{ServicePort: p, Endpoints: eps[p.Name]})
	}
	return out, problems
}

func sortNames(names []types.NamespacedName) { slices.SortFunc(names, CompareNames) }

// CompareNames orders Services by namespace, then name.
func CompareNames(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		return strings.Compare(a.Namespace, b.Namespace)
	}
	return strings.Compare(a.Name, b.Name)
}

// Replace makes services and slices the store's objects: those it does
// not list are deleted, the others set. An object held already in the same
// version changes nothing, so a relist marks only the Services that really
// changed. It reports whether anything changed, and the slices' problems.
func (s *Store) Replace(services []*Service, slices []*Slice) (bool, []Problem) {
	changed := false
	listedServices := make(map[types.NamespacedName]bool, len(services))
	for _, svc := range services {
		listedServices[svc.Key()] = true
		changed = s.SetParsedService(svc) || changed
	}
	for nn, e := range s.entries {
		if e.svc != nil && !listedServices[nn] {
			s.DeleteService(nn)
			changed = true
		}
	}
	listedSlices := make(map[types.NamespacedName]bool, len(slices))
	var problems []Problem
	for _, sl := range slices {
		listedSlices[sl.Key()] = true
		c, p := s.SetSlice(sl)
		changed = changed || c
		if p != nil {
			problems = append(problems, *p)
		}
	}
	for key := range s.sliceOwner {
		if !listedSlices[key] {
			s.deleteSliceNamed(key)
			changed = true
		}
	}
	return changed, problems
}
