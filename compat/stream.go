package compat

import (
	"cmp"
	"context"
	"io"
	"slices"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// streamBatch is the number of chains Stream reads and renders at a time:
// their rules and text are all it holds of the chains at once.
const streamBatch = 4096

// Stream writes the compat view of st to w as Write(w, Build(st), opts)
// does, without holding the text: it renders each chain as it writes it.
// The chains a leaving read left unread (st.Unread) are read through rest
// a batch at a time, in the order they are written, the next batch while
// the last is rendered. The notes come in Build's order, those about
// unread chains after those about the chains read (a table nftproxy wrote
// has none).
func Stream(ctx context.Context, w io.Writer, st *nftgen.TableState, rest nftgen.ChainRules, opts Options) error {
	if st == nil {
		return Write(w, Build(nil), opts)
	}
	s := &streamer{b: newBuilder(st, 0), rest: rest, places: map[string][]int32{}}
	s.b.top()
	s.plan()
	// filter and mangle are small, and a note they make about the nat
	// table must be in before its COMMIT: they are rendered first, whole.
	for _, name := range tableOrder[1:] {
		if err := s.eachBatch(ctx, s.places[name], len(s.places[name]), func([]int32) error { return nil }); err != nil {
			return err
		}
	}
	out := newSaveWriter(w, opts)
	for _, name := range tableOrder {
		if !out.selected(name) {
			continue
		}
		t := s.b.tables[name]
		out.begin(t, s.declared(name))
		for _, c := range builtins[name] {
			out.rules(c, t.Rules[c])
		}
		if name == tableOrder[0] {
			err := s.eachBatch(ctx, s.places[name], streamBatch, func(batch []int32) error {
				s.write(out, t, batch)
				return nil
			})
			if err != nil {
				return err
			}
		} else {
			s.write(out, t, s.places[name])
		}
		t.sortNotes()
		out.end(t)
	}
	return out.flush()
}

// streamer holds what Stream knows of the table between batches.
type streamer struct {
	b    *builder
	rest nftgen.ChainRules
	// places lists, for each iptables table, the places of its regular
	// chains: p < len(Chains) is Chains[p], others Unread[p-len(Chains)],
	// sorted by name, then place (the order Build's text has them in).
	places map[string][]int32
}

// name returns the name of the chain at place p.
func (s *streamer) name(p int32) string {
	if n := int32(len(s.b.st.Chains)); p >= n {
		return s.b.st.Unread[p-n].Chain
	}
	return s.b.st.Chains[p].Name
}

// plan sorts the regular chains into their iptables tables, noting those
// that are not nftproxy's as chains does.
func (s *streamer) plan() {
	st := s.b.st
	for p := range int32(len(st.Chains) + len(st.Unread)) {
		name := s.name(p)
		role, ok := nftgen.RoleOf(name)
		if role.Base || name == nftgen.ChainReject {
			continue
		}
		s.b.at = int(p)
		if int(p) < len(st.Chains) && st.Chains[p].Base != nil {
			s.b.note("filter", "base chain %s is not nftproxy's", name)
			continue
		}
		if !ok {
			s.b.note("nat", "chain %s is not nftproxy's", name)
			continue
		}
		s.places[role.Table] = append(s.places[role.Table], p)
	}
	// A table's chains share their prefix (nat: none, filter:
	// FilterChainPrefix), so the nftables names sort as the iptables ones.
	for _, places := range s.places {
		slices.SortFunc(places, func(a, b int32) int {
			return cmp.Or(strings.Compare(s.name(a), s.name(b)), cmp.Compare(a, b))
		})
	}
}

// declared yields the chains the table called name declares: the
// built-in ones, then the canary and every regular chain, sorted, each
// once.
func (s *streamer) declared(name string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for _, c := range builtins[name] {
			if !yield(c) {
				return
			}
		}
		last, canary := "", canary
		for _, p := range s.places[name] {
			role, _ := nftgen.RoleOf(s.name(p))
			if canary != "" && canary <= role.Chain {
				if canary < role.Chain && !yield(canary) {
					return
				}
				canary = ""
			}
			if role.Chain != last && !yield(role.Chain) {
				return
			}
			last = role.Chain
		}
		if canary != "" {
			yield(canary)
		}
	}
}

// eachBatch renders the chains at places, size at a time, and calls done
// with each batch once it is rendered; the rules of the next batch's
// unread chains are read meanwhile.
func (s *streamer) eachBatch(ctx context.Context, places []int32, size int, done func(batch []int32) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type read struct {
		batch  []int32
		chains []*nftgen.Chain
		err    error
	}
	reads := make(chan read, 1)
	go func() {
		defer close(reads)
		for start := 0; start < len(places); start += size {
			batch := places[start:min(start+size, len(places))]
			chains, err := s.chains(ctx, batch)
			select {
			case reads <- read{batch, chains, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for r := range reads {
		if r.err != nil {
			return r.err
		}
		s.b.chainsInParallel(r.chains, r.batch)
		for table := range s.b.emptyChains {
			s.b.emptyChains[table] = nil
		}
		if err := done(r.batch); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// chains returns the chains at places, with the rules of the unread ones
// read through rest.
func (s *streamer) chains(ctx context.Context, places []int32) ([]*nftgen.Chain, error) {
	st := s.b.st
	out := make([]*nftgen.Chain, len(places))
	var refs []nftgen.ChainRef
	var at []int
	for i, p := range places {
		if int(p) < len(st.Chains) {
			out[i] = st.Chains[p]
			continue
		}
		refs = append(refs, st.Unread[int(p)-len(st.Chains)])
		at = append(at, i)
	}
	var rules [][]nftgen.Rule
	if len(refs) > 0 && s.rest != nil {
		var err error
		if rules, err = s.rest(ctx, refs); err != nil {
			return nil, err
		}
	}
	for i, j := range at {
		out[j] = &nftgen.Chain{Name: refs[i].Chain}
		if rules != nil {
			out[j].Rules = rules[i]
		}
	}
	return out, nil
}

// write writes the rules rendered of the chains at places (a run of the
// table's sorted places) and lets them go.
func (s *streamer) write(out *saveWriter, t *Table, places []int32) {
	last := ""
	for _, p := range places {
		role, _ := nftgen.RoleOf(s.name(p))
		if role.Chain == last {
			continue
		}
		last = role.Chain
		out.rules(role.Chain, t.Rules[role.Chain])
		delete(t.Rules, role.Chain)
	}
}

// sortNotes puts the table's notes in the order of the places they were
// made at (a stable sort: the notes of one place keep their order).
func (t *Table) sortNotes() {
	idx := make([]int, len(t.Notes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(t.noteAt[a], t.noteAt[b]) })
	notes := make([]string, len(idx))
	for i, j := range idx {
		notes[i] = t.Notes[j]
	}
	t.Notes = notes
}
