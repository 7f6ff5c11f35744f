package nftgen

import (
	"encoding/binary"
	"slices"
	"sync"
)

// ChainFinish is given the rules a compact read (Dataplane.ReadCompact,
// ReadTable) read of a chain of table (TableName or a shard's name) once
// they are all read, and returns what the read's state keeps of them:
// kept as the chain's rules, or, with omit set, nothing at all, the chain
// itself left out of the state's Chains (a base chain is listed all the
// same, with kept as its rules). The finisher then answers for the
// chain: LiveDigests.Finish keeps its digest. It may be called from
// several goroutines at once.
type ChainFinish func(table, chain string, rules []Rule) (kept []Rule, omit bool)

// KeepRules is the ChainFinish of a compact read that keeps every chain
// whole, as Read does.
func KeepRules(_, _ string, rules []Rule) ([]Rule, bool) { return rules, false }

// LiveDigests is what a reconcile of large live tables keeps of the
// chains read back outside the top levels: per table, the digest of each
// one's rules (Applied's, so that it compares with the summaries of the
// fragments that replace it) and the endpoint maps they read, instead of
// the chains. Decoded, the rules of a table of 30,000 Services x 10
// endpoints are some 180 MB; a chain kept as a name and a digest, by its
// packed name, is a 20-byte slot, where a listed chain with its name
// string and index took some 200 bytes (1.1 million chains at 100,000
// Services). A LiveDigests serves one reconcile: the Reconciler marks in
// it the chains it wants.
type LiveDigests struct {
	applied *Applied
	// keep names the chains whose rules are kept (the top levels', which
	// may be base chains and are compared rule by rule).
	keep map[string]bool

	mu     sync.Mutex
	tables map[string]*tableDigests
}

// tableDigests is what LiveDigests keeps of one table's chains: by packed
// name, sorted once the read is done (a slice of 20-byte slots takes half
// the memory of a map of them), or by name for one that does not pack
// (not nftproxy's).
type tableDigests struct {
	packed []packedDigest
	sorted bool
	odd    map[string]*digestSlot
	// maps are the endpoint maps that the few chains that read any read.
	maps map[string][]string
}

// packedDigest is a chain's packed name with what tableDigests keeps of
// it.
type packedDigest struct {
	name packedName
	digestSlot
}

// digestSlot is what tableDigests keeps of one chain: its digest, and
// whether the reconcile wants the chain. Aligned to one byte, it packs
// beside its 11-byte name.
type digestSlot struct {
	digest [8]byte
	wanted bool
}

// LiveDigests returns an empty LiveDigests keyed like a's digests; the
// rules of the chains named in keep are kept whole.
func (a *Applied) LiveDigests(keep []string) *LiveDigests {
	d := &LiveDigests{applied: a, keep: make(map[string]bool, len(keep)), tables: map[string]*tableDigests{}}
	for _, name := range keep {
		d.keep[name] = true
	}
	return d
}

// Finish is the ChainFinish of a read for a reconcile: it keeps the rules
// of a chain d keeps whole, and otherwise records their digest and has
// the read omit the chain.
func (d *LiveDigests) Finish(table, chain string, rules []Rule) ([]Rule, bool) {
	if d.keep[chain] {
		return rules, false
	}
	c := &Chain{Name: chain, Rules: rules}
	var maps []string
	var slot digestSlot
	binary.LittleEndian.PutUint64(slot.digest[:], d.applied.digestRecording(c, func(m string) { maps = append(maps, m) }))
	p, packed := packName(chain)
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tables[table]
	if t == nil {
		t = &tableDigests{}
		d.tables[table] = t
	}
	switch {
	case packed:
		t.packed = append(t.packed, packedDigest{name: p, digestSlot: slot})
		t.sorted = false
	case t.odd == nil:
		t.odd = map[string]*digestSlot{chain: &slot}
	default:
		t.odd[chain] = &slot
	}
	switch {
	case maps != nil && t.maps == nil:
		t.maps = map[string][]string{chain: maps}
	case maps != nil:
		t.maps[chain] = maps
	default:
		delete(t.maps, chain) // read again, it reads none now
	}
	return nil, true
}

// table returns what d recorded of table's chains, sorted for lookups:
// nil when d is nil or recorded none. It is for after the read.
func (d *LiveDigests) table(name string) *tableDigests {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tables[name]
	if t != nil && !t.sorted {
		t.sortLatest()
	}
	return t
}

// sortLatest sorts t's packed digests by name and keeps, of a chain
// recorded more than once (a read that found the table incomplete lists
// it whole and reads its chains again), the one recorded last.
func (t *tableDigests) sortLatest() {
	slices.SortStableFunc(t.packed, func(a, b packedDigest) int { return a.name.compare(b.name) })
	out := t.packed[:0]
	for i, e := range t.packed {
		if i+1 < len(t.packed) && t.packed[i+1].name == e.name {
			continue // a later one follows
		}
		out = append(out, e)
	}
	clear(t.packed[len(out):])
	t.packed = out
	t.sorted = true
}

// slot returns the slot of chain, nil if t recorded none.
func (t *tableDigests) slot(chain string) *digestSlot {
	if t == nil {
		return nil
	}
	p, packed := packName(chain)
	if !packed {
		return t.odd[chain]
	}
	i, found := slices.BinarySearchFunc(t.packed, p, func(e packedDigest, p packedName) int { return e.name.compare(p) })
	if !found {
		return nil
	}
	return &t.packed[i].digestSlot
}

// lookup returns the digest recorded of chain, if t recorded one.
func (t *tableDigests) lookup(chain string) (uint64, bool) {
	slot := t.slot(chain)
	if slot == nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(slot.digest[:]), true
}

// want is lookup, marking the chain wanted when t recorded it.
func (t *tableDigests) want(chain string) (uint64, bool) {
	slot := t.slot(chain)
	if slot == nil {
		return 0, false
	}
	slot.wanted = true
	return binary.LittleEndian.Uint64(slot.digest[:]), true
}

// chains returns the names of the chains t recorded, sorted, those the
// reconcile wants left out when unwanted is set.
func (t *tableDigests) chains(unwanted bool) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, e := range t.packed {
		if !unwanted || !e.wanted {
			out = append(out, e.name.String())
		}
	}
	for name, slot := range t.odd {
		if !unwanted || !slot.wanted {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Inventory names what the tables live (as read with d's Finish) hold:
// the chains live lists and those d kept as digests. It is the inventory
// of a rewrite; a reconcile does not need it.
func (d *LiveDigests) Inventory(live *TableState) *Inventory {
	if live == nil {
		return nil
	}
	inv := &Inventory{Sets: live.SetNames, Chains: live.chainNames()}
	listed := make(map[string]bool, len(inv.Chains))
	for _, name := range inv.Chains {
		listed[name] = true
	}
	for _, name := range d.table(live.TableName()).chains(false) {
		if !listed[name] { // a base chain is listed and digested
			inv.Chains = append(inv.Chains, name)
		}
	}
	for _, sh := range live.Shards {
		if inv.Shards == nil {
			inv.Shards = map[string]*Inventory{}
		}
		inv.Shards[sh.Name] = d.Inventory(sh)
	}
	return inv
}
