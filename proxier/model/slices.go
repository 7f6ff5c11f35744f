package model

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// storedSlice is what the Store keeps of an EndpointSlice: what Endpoints
// reads, parsed once. An endpoint costs 12 bytes and its address 4 (IPv4)
// or 16 (IPv6), none of it a pointer for the garbage collector to follow,
// and nothing of the object it came from is kept but its node and zone
// names (shared) and hints, so that the objects of a file or a list can be
// dropped once stored.
type storedSlice struct {
	name        string
	addressType discovery.AddressType
	ports       []slicePort
	endpoints   []storedEndpoint
	// addrs holds the endpoints' addresses in order, addrLen bytes each
	// (zeros for one that has none).
	addrs   []byte
	addrLen uint8
	// names are the node and zone names the endpoints name, each once.
	names []string
	// rare holds what few slices have; nil when the slice has none of it.
	rare *sliceRarities
}

// sliceRarities is what few slices have.
type sliceRarities struct {
	// hints are the endpoints' topology hints by index; nil when none
	// has any.
	hints []*discovery.EndpointHints
	// raws are the addresses as written of the endpoints that cannot be
	// used (endpointInvalid, endpointWrongFamily), by index.
	raws map[int]string
}

// rarities returns slice.rare, made if nil.
func (slice *storedSlice) rarities() *sliceRarities {
	if slice.rare == nil {
		slice.rare = &sliceRarities{}
	}
	return slice.rare
}

// slicePort is one port of an EndpointSlice, kept without the pointers of
// the object's (which held its name, protocol and number in allocations
// of their own).
type slicePort struct {
	name     string
	protocol v1.Protocol
	port     int32
	// hasName and hasPort say whether the name and the number were set.
	hasName, hasPort bool
}

// newSlicePorts returns the ports of ports, their names shared by intern.
func newSlicePorts(ports []discovery.EndpointPort, intern func(*string) *string) []slicePort {
	out := make([]slicePort, len(ports))
	for i, p := range ports {
		sp := slicePort{protocol: v1.ProtocolTCP}
		if p.Name != nil {
			sp.name, sp.hasName = *intern(p.Name), true
		}
		if p.Port != nil {
			sp.port, sp.hasPort = *p.Port, true
		}
		if p.Protocol != nil {
			sp.protocol = sharedProtocol(*p.Protocol)
		}
		out[i] = sp
	}
	return out
}

// sharedProtocol returns p, as the constant's string when it is one (not
// the object's copy of it).
func sharedProtocol(p v1.Protocol) v1.Protocol {
	switch p {
	case v1.ProtocolTCP:
		return v1.ProtocolTCP
	case v1.ProtocolUDP:
		return v1.ProtocolUDP
	case v1.ProtocolSCTP:
		return v1.ProtocolSCTP
	}
	return p
}

// endpointStatus says whether an endpoint's first address can be used.
type endpointStatus uint8

const (
	endpointOK endpointStatus = iota
	// endpointNoAddress: the endpoint lists no address.
	endpointNoAddress
	// endpointInvalid: the address is not an IP (rare.raws holds it).
	endpointInvalid
	// endpointWrongFamily: the address is not of the slice's type (rare.raws
	// holds it).
	endpointWrongFamily
)

// endpointFlags are an endpoint's conditions, with Kubernetes' defaults
// for unset ones applied.
type endpointFlags uint8

const (
	endpointReady endpointFlags = 1 << iota
	endpointServing
	endpointTerminating
)

// storedEndpoint is one endpoint of a storedSlice.
type storedEndpoint struct {
	// node and zone are 1 + the index of the endpoint's node and zone
	// names in storedSlice.names; 0 when unset.
	node, zone uint32
	flags      endpointFlags
	status     endpointStatus
}

// address returns endpoint i's address (of the slice's family; the
// endpoint's status says whether it is one).
func (slice *storedSlice) address(i int) netip.Addr {
	a := slice.addrs[i*int(slice.addrLen) : (i+1)*int(slice.addrLen)]
	if slice.addrLen == 4 {
		return netip.AddrFrom4([4]byte(a))
	}
	return netip.AddrFrom16([16]byte(a))
}

// nameOf returns the name of index i (see storedEndpoint), "" for 0.
func (slice *storedSlice) nameOf(i uint32) string {
	if i == 0 {
		return ""
	}
	return slice.names[i-1]
}

// wrongFamily returns the family of an address that is not of a slice of
// type t (IPv4 or IPv6).
func wrongFamily(t discovery.AddressType) svcmodel.IPFamily {
	if t == discovery.AddressTypeIPv4 {
		return svcmodel.IPv6
	}
	return svcmodel.IPv4
}

// sliceFamily returns the IP family of a slice's address type; ok is false
// for FQDN and unknown types, whose endpoints are never used.
func sliceFamily(t discovery.AddressType) (svcmodel.IPFamily, bool) {
	switch t {
	case discovery.AddressTypeIPv4:
		return svcmodel.IPv4, true
	case discovery.AddressTypeIPv6:
		return svcmodel.IPv6, true
	}
	return 0, false
}

// newStoredSlice parses sl; intern, unless nil, shares the node and zone
// names.
func newStoredSlice(sl *discovery.EndpointSlice, intern func(*string) *string) storedSlice {
	if intern == nil {
		intern = func(s *string) *string { return s }
	}
	out := storedSlice{name: sl.Name, addressType: sl.AddressType, ports: newSlicePorts(sl.Ports, intern)}
	family, ok := sliceFamily(sl.AddressType)
	if !ok {
		return out
	}
	out.addrLen = 16
	if family == svcmodel.IPv4 {
		out.addrLen = 4
	}
	out.endpoints = make([]storedEndpoint, len(sl.Endpoints))
	out.addrs = make([]byte, len(sl.Endpoints)*int(out.addrLen))
	// A slice names a few nodes and zones: a search of those found so far
	// costs less than a map per slice, until there are many.
	var many map[string]uint32
	index := func(s *string) uint32 {
		if s == nil {
			return 0
		}
		if many != nil {
			if i, ok := many[*s]; ok {
				return i
			}
		} else if i := slices.Index(out.names, *s); i >= 0 {
			return uint32(i + 1)
		}
		out.names = append(out.names, *intern(s))
		if len(out.names) == 32 {
			many = make(map[string]uint32, 64)
			for i, n := range out.names {
				many[n] = uint32(i + 1)
			}
		} else if many != nil {
			many[*s] = uint32(len(out.names))
		}
		return uint32(len(out.names))
	}
	for i := range sl.Endpoints {
		ep := &sl.Endpoints[i]
		se := storedEndpoint{node: index(ep.NodeName), zone: index(ep.Zone)}
		// Unset means ready and serving (kube-proxy's EndpointSliceCache).
		if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
			se.flags |= endpointReady
		}
		if ep.Conditions.Serving == nil || *ep.Conditions.Serving {
			se.flags |= endpointServing
		}
		if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
			se.flags |= endpointTerminating
		}
		if ep.Hints != nil {
			r := out.rarities()
			if r.hints == nil {
				r.hints = make([]*discovery.EndpointHints, len(sl.Endpoints))
			}
			r.hints[i] = ep.Hints
		}
		if len(ep.Addresses) == 0 {
			se.status = endpointNoAddress
			out.endpoints[i] = se
			continue
		}
		addr, err := netip.ParseAddr(ep.Addresses[0])
		switch {
		case err != nil || addr.Zone() != "":
			se.status = endpointInvalid
		case svcmodel.FamilyOf(addr.Unmap()) != family:
			se.status = endpointWrongFamily
		case family == svcmodel.IPv4:
			a := addr.Unmap().As4()
			copy(out.addrs[i*4:], a[:])
		default:
			a := addr.As16()
			copy(out.addrs[i*16:], a[:])
		}
		if se.status != endpointOK {
			r := out.rarities()
			if r.raws == nil {
				r.raws = map[int]string{}
			}
			r.raws[i] = ep.Addresses[0]
		}
		out.endpoints[i] = se
	}
	return out
}

// Endpoints merges the EndpointSlices of one Service into endpoints per
// service port. Ports are matched by name and protocol, which resolves named
// target ports per slice, as kube-proxy does. An endpoint listed in several
// slices is kept once, preferring a ready copy. Slices of address type FQDN
// are ignored.
func Endpoints(svc types.NamespacedName, slices []*discovery.EndpointSlice) (map[svcmodel.ServicePortName][]svcmodel.Endpoint, []Problem) {
	stored := make([]*storedSlice, len(slices))
	for i, sl := range slices {
		parsed := newStoredSlice(sl, nil)
		stored[i] = &parsed
	}
	return endpointsOf(svc, stored)
}

// endpointsOf is Endpoints of stored slices.
func endpointsOf(svc types.NamespacedName, list []*storedSlice) (map[svcmodel.ServicePortName][]svcmodel.Endpoint, []Problem) {
	sorted := slices.Clone(list)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })

	var problems []Problem
	byPort := map[svcmodel.ServicePortName][]svcmodel.Endpoint{}
	for _, slice := range sorted {
		sliceName := types.NamespacedName{Namespace: svc.Namespace, Name: slice.name}
		report := func(field, format string, args ...any) {
			problems = append(problems, Problem{Kind: "EndpointSlice", Object: sliceName, Field: field, Reason: fmt.Sprintf(format, args...)})
		}
		if _, ok := sliceFamily(slice.addressType); !ok {
			if slice.addressType != discovery.AddressTypeFQDN {
				report("addressType", "unsupported address type %q", slice.addressType)
			}
			continue
		}
		for pi, port := range slice.ports {
			if !port.hasPort {
				continue
			}
			if port.port < 1 || port.port > 65535 {
				report(fmt.Sprintf("ports[%d].port", pi), "port %d is outside 1..65535", port.port)
				continue
			}
			if !port.hasName {
				// kube-proxy ignores such ports too; the EndpointSlice
				// controller always sets the name, if only to "".
				report(fmt.Sprintf("ports[%d].name", pi), "missing (an unnamed port has name \"\")")
				continue
			}
			key := svcmodel.ServicePortName{NamespacedName: svc, Port: port.name, Protocol: port.protocol}
			byPort[key] = slice.appendEndpoints(byPort[key], pi, uint16(port.port), report)
		}
	}
	for name, eps := range byPort {
		byPort[name] = uniqueEndpoints(eps)
	}
	return byPort, problems
}

// appendEndpoints appends the slice's endpoints with an address of its
// type on port to eps; for the slice's first port (pi 0) it reports the
// endpoints it leaves out.
func (slice *storedSlice) appendEndpoints(eps []svcmodel.Endpoint, pi int, port uint16, report problemReporter) []svcmodel.Endpoint {
	if eps == nil {
		eps = make([]svcmodel.Endpoint, 0, len(slice.endpoints))
	}
	for ei := range slice.endpoints {
		se := &slice.endpoints[ei]
		switch se.status {
		case endpointNoAddress:
			continue
		case endpointInvalid:
			if pi == 0 {
				report(fmt.Sprintf("endpoints[%d].addresses[0]", ei), "invalid IP address %q", slice.rare.raws[ei])
			}
			continue
		case endpointWrongFamily:
			if pi == 0 {
				report(fmt.Sprintf("endpoints[%d].addresses[0]", ei), "%s address %q in a slice of type %s", wrongFamily(slice.addressType), slice.rare.raws[ei], slice.addressType)
			}
			continue
		}
		eps = append(eps, slice.endpoint(ei, port))
	}
	return eps
}

// uniqueEndpoints sorts eps by "IP:port" and keeps one endpoint of each:
// the first ready one in the slices' order, else the first one.
func uniqueEndpoints(eps []svcmodel.Endpoint) []svcmodel.Endpoint {
	sortEndpoints(eps)
	out := eps[:0]
	for i := 0; i < len(eps); {
		j, pick := i+1, i
		for ; j < len(eps) && eps[j].Addr == eps[i].Addr && eps[j].Port == eps[i].Port; j++ {
			if !eps[pick].Ready && eps[j].Ready {
				pick = j
			}
		}
		out = append(out, eps[pick])
		i = j
	}
	return out
}

// endpoint returns the model's endpoint for one port of the slice's
// endpoint ei.
func (slice *storedSlice) endpoint(ei int, port uint16) svcmodel.Endpoint {
	se := &slice.endpoints[ei]
	e := svcmodel.Endpoint{Addr: slice.address(ei), Port: port, Ready: se.flags&endpointReady != 0,
		Serving: se.flags&endpointServing != 0, Terminating: se.flags&endpointTerminating != 0,
		NodeName: slice.nameOf(se.node), Zone: slice.nameOf(se.zone)}
	if r := slice.rare; r != nil && r.hints != nil && r.hints[ei] != nil {
		for _, z := range r.hints[ei].ForZones {
			e.ZoneHints = append(e.ZoneHints, z.Name)
		}
		for _, n := range r.hints[ei].ForNodes {
			e.NodeHints = append(e.NodeHints, n.Name)
		}
	}
	return e
}
