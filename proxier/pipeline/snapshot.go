package pipeline

import (
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// snapshot is what one sync reads of the store: the service ports of each
// Service the sync looks at, with their endpoints. Store.State merges the
// Service's EndpointSlices' endpoints, so each read is kept for every
// consumer of the sync: the endpoint counts of the large cluster mode, the
// planner and its claims, and, through the Pipeline's OnRead, what follows
// the sync (health check node ports, conntrack, metrics). A read's
// problems are reported once, when it is read.
//
// A partial sync keeps what it reads until the sync ends: every family and
// the engine look at the same few Services. A full sync's pass over every
// Service keeps nothing beyond the Service in hand (see get): at 30,000
// Services x 10 endpoints the states of all of them take 45 MiB of heap,
// more than the rest of a cold sync holds at a time. A dual-stack full sync
// therefore reads each Service once per family.
type snapshot struct {
	read   func(types.NamespacedName) ([]svcmodel.ServicePortState, []model.Problem)
	report func([]model.Problem)
	onRead func(types.NamespacedName, []svcmodel.ServicePortState)
	kept   map[types.NamespacedName][]svcmodel.ServicePortState
}

// newSnapshot returns the snapshot of one sync of s.
func (s *Pipeline) newSnapshot() *snapshot {
	read := s.readState
	if read == nil {
		read = s.store.State
	}
	return &snapshot{read: read, report: s.report, onRead: s.OnRead, kept: map[types.NamespacedName][]svcmodel.ServicePortState{}}
}

// get returns the service ports of nn: what this sync already kept of it,
// or a new read, kept if keep is set. The states are shared: a consumer
// that changes one copies it first.
func (sn *snapshot) get(nn types.NamespacedName, keep bool) []svcmodel.ServicePortState {
	if states, ok := sn.kept[nn]; ok {
		return states
	}
	states, problems := sn.read(nn)
	sn.report(problems)
	if sn.onRead != nil {
		sn.onRead(nn, states)
	}
	if keep {
		sn.kept[nn] = states
	}
	return states
}

// familyEndpoints counts the endpoints of states' ports in the family of
// fs, as kube-proxy counts them for its large cluster mode: per service
// port that has a cluster IP of the family.
func familyEndpoints(fs *familyState, states []svcmodel.ServicePortState) int {
	fam := fs.gen.Family().IPFamily()
	n := 0
	for i := range states {
		if _, ok := states[i].ClusterIP(fam); !ok {
			continue
		}
		for _, e := range states[i].Endpoints {
			if svcmodel.FamilyOf(e.Addr) == fam {
				n++
			}
		}
	}
	return n
}

// familyStates returns the ports of states that have a cluster IP of fs's
// family, each with only its endpoints of that family: all that family's
// generator reads of them, in a copy (the snapshot's states are shared).
// A single-stack cluster's Services, read for the other family while its
// large cluster mode was undecided, were all held whole: 47 MB of heap at
// 30,000 Services x 10 endpoints.
func familyStates(fs *familyState, states []svcmodel.ServicePortState) []svcmodel.ServicePortState {
	fam := fs.gen.Family().IPFamily()
	var out []svcmodel.ServicePortState
	for i := range states {
		if _, ok := states[i].ClusterIP(fam); !ok {
			continue
		}
		st := states[i]
		st.Endpoints = nil
		for _, e := range states[i].Endpoints {
			if svcmodel.FamilyOf(e.Addr) == fam {
				st.Endpoints = append(st.Endpoints, e)
			}
		}
		out = append(out, st)
	}
	return out
}

// setEndpoints records n endpoints of nn in the family's total.
func (fs *familyState) setEndpoints(nn types.NamespacedName, n int) {
	fs.total += n - fs.endpoints[nn]
	if n == 0 {
		delete(fs.endpoints, nn)
	} else {
		fs.endpoints[nn] = n
	}
}

// setLargeCluster switches the family's generator to kube-proxy's large
// cluster mode (no per-endpoint comments) or out of it, and reports whether
// that changed it.
func (fs *familyState) setLargeCluster(large bool) bool {
	if large == fs.gen.Config().LargeCluster {
		return false
	}
	fs.gen = fs.gen.WithLargeCluster(large)
	return true
}

// largeCluster reports whether total endpoints put a family in the large
// cluster mode.
func largeCluster(total int) bool { return total > nftgen.LargeClusterEndpoints }
