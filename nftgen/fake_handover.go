package nftgen

import "context"

// WriteHandover implements Dataplane: it keeps spec as the family's
// handover and counts the destinations of the family's table, as the
// kernel's handover holds them.
func (f *Fake) WriteHandover(_ context.Context, fam Family, spec *HandoverSpec) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fam]
	if t == nil {
		return 0, nil
	}
	n := 0
	for _, t := range f.familyTables(fam) {
		n += len(t.maps[MapServiceIPs]) + len(t.maps[MapServiceNodePorts])
	}
	if f.Handovers == nil {
		f.Handovers = map[Family]*HandoverSpec{}
	}
	f.Handovers[fam] = spec
	return n, nil
}

// DeleteHandover implements Dataplane.
func (f *Fake) DeleteHandover(_ context.Context, fam Family) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Handovers, fam)
	return nil
}
