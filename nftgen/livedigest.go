package nftgen

import "sync"

// LiveDigests is what a reconcile of a large live table keeps of the
// chains read back: for each chain outside the top level, the digest of
// its rules (Applied's, so that it compares with the summaries of the
// fragments that replace it) and the endpoint maps they read, instead of
// the rules themselves. Decoded, the rules of a table of 30,000 Services x
// 10 endpoints are some 180 MB; their digests are a few bytes a chain.
type LiveDigests struct {
	applied *Applied
	// keep names the chains whose rules are kept (the top level's, which
	// may be base chains and are compared rule by rule).
	keep map[string]bool

	mu sync.Mutex
	// chains holds each chain's digest, and maps the endpoint maps of the
	// few chains that read any: apart, a slot of chains is 24 bytes, not
	// 48 (1.1 million chains at 100,000 Services).
	chains map[string]uint64
	maps   map[string][]string
}

// liveDigest is what LiveDigests keeps of one chain.
type liveDigest struct {
	digest uint64
	maps   []string
}

// LiveDigests returns an empty LiveDigests keyed like a's digests; the
// rules of the chains named in keep are kept whole.
func (a *Applied) LiveDigests(keep []string) *LiveDigests {
	d := &LiveDigests{applied: a, keep: make(map[string]bool, len(keep)), chains: map[string]uint64{}, maps: map[string][]string{}}
	for _, name := range keep {
		d.keep[name] = true
	}
	return d
}

// Finish records the rules read of chain and returns what the table read
// keeps of them: the rules of a kept chain, nil for the others (see
// Dataplane.ReadCompact). It may be called from several goroutines at once.
func (d *LiveDigests) Finish(chain string, rules []Rule) []Rule {
	if d.keep[chain] {
		return rules
	}
	c := &Chain{Name: chain, Rules: rules}
	var maps []string
	digest := d.applied.digestRecording(c, func(m string) { maps = append(maps, m) })
	d.mu.Lock()
	d.chains[chain] = digest
	if maps != nil {
		d.maps[chain] = maps
	}
	d.mu.Unlock()
	return nil
}

// lookup returns what d recorded of chain, if it did.
func (d *LiveDigests) lookup(chain string) (liveDigest, bool) {
	if d == nil {
		return liveDigest{}, false
	}
	digest, ok := d.chains[chain]
	if !ok {
		return liveDigest{}, false
	}
	return liveDigest{digest: digest, maps: d.maps[chain]}, true
}
