package pipeline

import (
	"time"

	"github.com/nftproxy/nftproxy/nftgen"
)

// HandoverSpecs returns the handover of each family: the fragments of
// every Service, generated again from the store, with the destinations the
// last sync gave each (see owners.go): a Service that lost one, or whose
// address was refused, is not served there either. Each Service's state
// is read once for all families; a family whose table holds no Service
// destination is not generated at all.
func (s *Pipeline) HandoverSpecs(ttl time.Duration) map[nftgen.Family]*nftgen.HandoverSpec {
	specs := map[nftgen.Family]*nftgen.HandoverSpec{}
	var fams []*familyState
	for _, f := range s.Families() {
		fs := s.families[f]
		specs[f] = nftgen.NewHandoverSpec(fs.gen, ttl)
		if fs.applied != nil {
			if c := fs.applied.ElementCounts(); c[nftgen.MapServiceIPs]+c[nftgen.MapServiceNodePorts] == 0 {
				continue
			}
		}
		fams = append(fams, fs)
	}
	if len(fams) == 0 {
		return specs
	}
	owners := map[*familyState]map[destination]claim{}
	for _, fs := range fams {
		if owners[fs] = fs.owners; owners[fs] == nil {
			// The last sync of this family failed: decide anew.
			owners[fs] = map[destination]claim{}
			for _, nn := range s.store.ServiceNames() {
				states, _ := s.store.State(nn)
				for _, c := range s.candidates(fs, nn, states) {
					for _, d := range c.domains.destinations(c.frag) {
						if cur, ok := owners[fs][d]; !ok || c.claimOn(d).beats(cur) {
							owners[fs][d] = c.claimOn(d)
						}
					}
				}
			}
		}
	}
	for _, nn := range s.store.ServiceNames() {
		states, _ := s.store.State(nn)
		for _, fs := range fams {
			for _, c := range s.candidates(fs, nn, states) {
				f, _ := withoutLost(c, owners[fs])
				specs[fs.gen.Family()].Add(f)
			}
		}
	}
	return specs
}
