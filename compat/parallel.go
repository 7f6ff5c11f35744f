package compat

import (
	"runtime"
	"sync"

	"github.com/nftproxy/nftproxy/nftgen"
)

// A table of tens of thousands of Services has hundreds of thousands of
// chains, and rendering each is independent of the others: Build splits
// them into contiguous runs, renders each run with a builder of its own
// and joins the results in order, so the text is the same as one
// builder's.

// parallelChains is the number of regular chains from which Build renders
// them on several goroutines.
const parallelChains = 4096

// chainsInParallel renders chains as chains does, on b.workers goroutines
// (GOMAXPROCS when 0).
func (b *builder) chainsInParallel(chains []*nftgen.Chain, at []int32) {
	n := b.workers
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if n < 2 || len(chains) < parallelChains {
		b.chains(chains, at)
		return
	}
	parts := make([]*builder, n)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := len(chains)*i/n, len(chains)*(i+1)/n
		run, runAt := chains[lo:hi], at
		part := b.fork(len(run))
		if at != nil {
			runAt = at[lo:hi]
		} else {
			part.offset = lo
		}
		parts[i] = part
		wg.Go(func() { part.chains(run, runAt) })
	}
	wg.Wait()
	for _, part := range parts {
		b.join(part)
	}
}

// fork returns an empty builder for about chains chains of b's table,
// sharing b's index.
func (b *builder) fork(chains int) *builder {
	f := newBuilder(b.st, chains)
	f.index = b.index
	f.emptyChains = map[string][]string{}
	if b.origins != nil {
		f.origins = map[Origin][]Line{}
	}
	return f
}

// join appends what part rendered to b's tables.
func (b *builder) join(part *builder) {
	for name, t := range b.tables {
		from := part.tables[name]
		for c, rules := range from.Rules {
			t.Rules[c] = append(t.Rules[c], rules...)
		}
		t.Notes = append(t.Notes, from.Notes...)
		t.noteAt = append(t.noteAt, from.noteAt...)
		b.emptyChains[name] = append(b.emptyChains[name], part.emptyChains[name]...)
	}
	for at, lines := range part.origins {
		b.origins[at] = append(b.origins[at], lines...)
	}
}

// index finds the table's chains and sets by name. It is built on first
// use, once for a builder and its forks.
type index struct {
	st     *nftgen.TableState
	once   sync.Once
	chains map[string]*nftgen.Chain
	sets   map[string]nftgen.SetSpec
}

func (x *index) build() {
	x.once.Do(func() {
		x.chains = make(map[string]*nftgen.Chain, len(x.st.Chains))
		for _, c := range x.st.Chains {
			if _, dup := x.chains[c.Name]; !dup {
				x.chains[c.Name] = c
			}
		}
		x.sets = make(map[string]nftgen.SetSpec, len(x.st.Sets))
		for _, s := range x.st.Sets {
			if _, dup := x.sets[s.Name]; !dup {
				x.sets[s.Name] = s
			}
		}
	})
}

// chain returns the chain called name, or nil.
func (x *index) chain(name string) *nftgen.Chain {
	x.build()
	return x.chains[name]
}

// set returns the set called name, if the table has it.
func (x *index) set(name string) (nftgen.SetSpec, bool) {
	x.build()
	s, ok := x.sets[name]
	return s, ok
}

// chainCount is the number of chains of st (none for nil).
func chainCount(st *nftgen.TableState) int {
	if st == nil {
		return 0
	}
	return len(st.Chains)
}
