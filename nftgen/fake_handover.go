package nftgen

import (
	"context"
	"time"
)

// Handover is what the Fake's handover table of a family holds.
type Handover struct {
	Destinations int
	TTL          time.Duration
}

// WriteHandover implements Dataplane: it counts the destinations of the
// family's table, as the kernel's handover copies them.
func (f *Fake) WriteHandover(_ context.Context, fam Family, ttl time.Duration) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fam]
	if t == nil {
		return 0, nil
	}
	n := len(t.maps[MapServiceIPs]) + len(t.maps[MapServiceNodePorts])
	if f.Handovers == nil {
		f.Handovers = map[Family]Handover{}
	}
	f.Handovers[fam] = Handover{Destinations: n, TTL: ttl}
	return n, nil
}

// DeleteHandover implements Dataplane.
func (f *Fake) DeleteHandover(_ context.Context, fam Family) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Handovers, fam)
	return nil
}
