//go:build linux

package kernel

import "sync"

// A cold sync sends about a million rule messages, each built in the batch
// writer's scratch buffer and kept until its batch is sent. An arena holds
// the messages of one batch in a few large blocks, which go back to a free
// list once the batch is sent, so that the next batch reuses them: the
// garbage collector sees a few blocks instead of a copy per rule.

// arenaBlockMax is the size of an arena's largest blocks; the first ones
// are smaller, so that a one-rule patch does not take a megabyte.
const (
	arenaBlockMin = 4 << 10
	arenaBlockMax = 1 << 20
	// arenaFreeMax is the most blocks the free list keeps: two batches of
	// a streamed sync in flight, with room.
	arenaFreeMax = 16
)

// blockPool is a free list of arena blocks.
type blockPool struct {
	mu   sync.Mutex
	free [][]byte
}

func (p *blockPool) get(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; cap(b) >= size {
			p.free = append(p.free[:i], p.free[i+1:]...)
			return b[:0]
		}
	}
	return make([]byte, 0, size)
}

func (p *blockPool) put(blocks [][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range blocks {
		if len(p.free) < arenaFreeMax && cap(b) == arenaBlockMax {
			p.free = append(p.free, b[:0])
		}
	}
}

// drop empties the free list (after a streamed sync: a patch needs little).
func (p *blockPool) drop() {
	p.mu.Lock()
	p.free = nil
	p.mu.Unlock()
}

// arena hands out the message buffers of one batch.
type arena struct {
	pool   *blockPool
	blocks [][]byte
	cur    []byte
}

// copy returns a copy of b in the arena.
func (a *arena) copy(b []byte) []byte {
	if cap(a.cur)-len(a.cur) < len(b) {
		size := arenaBlockMin
		if n := len(a.blocks); n > 0 {
			size = min(cap(a.blocks[n-1])*2, arenaBlockMax)
		}
		a.cur = a.pool.get(max(size, len(b)))
		a.blocks = append(a.blocks, a.cur)
	}
	start := len(a.cur)
	a.cur = append(a.cur, b...)
	return a.cur[start:len(a.cur):len(a.cur)]
}

// copyOf is copy, or a plain copy for a nil arena.
func (a *arena) copyOf(b []byte) []byte {
	if a == nil {
		return append([]byte(nil), b...)
	}
	return a.copy(b)
}

// release gives the arena's blocks back; nothing may use its copies after.
func (a *arena) release() {
	a.pool.put(a.blocks)
	a.blocks, a.cur = nil, nil
}
