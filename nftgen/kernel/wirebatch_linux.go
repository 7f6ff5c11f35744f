//go:build linux

package kernel

import (
	"encoding/binary"
	"sync"

	"github.com/mdlayher/netlink"
)

// A cold sync sends about a million rule messages. A wireBatch holds the
// messages of one batch as the kernel reads them (each message's header,
// payload and padding, one after the other) in a few large blocks, which
// sendmsg gathers: the batch is written once, never copied into one buffer
// of its size, and the garbage collector sees a few blocks instead of a
// copy per rule. The blocks go back to a free list once the batch is sent,
// so that the next batch reuses them.

const (
	// wireBlockMin and wireBlockMax are the sizes of a batch's first and
	// largest blocks (the first ones are small, so that a one-rule patch
	// does not take a megabyte).
	wireBlockMin = 4 << 10
	wireBlockMax = 1 << 20
	// wireFreeMax is the most blocks the free list keeps: two chunks of a
	// streamed sync in flight, with room. (The list outlives a patch's
	// batch, which can be hundreds of blocks.)
	wireFreeMax = 16
)

// blockPool is a free list of wire blocks.
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
		if len(p.free) < wireFreeMax && cap(b) == wireBlockMax {
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

// wireBatch is the messages of one batch in the order they were added, in
// netlink's wire format. A message never spans two blocks.
type wireBatch struct {
	pool *blockPool
	// full are the blocks before cur, the block being filled.
	full [][]byte
	cur  []byte
	// count and size are the batch's messages and bytes so far.
	count, size int
}

// add appends the message of header h (its type and flags; add writes the
// length, and number the sequence) and payload data, and returns it with
// its Data in the batch. A nil batch returns a message of its own.
func (b *wireBatch) add(h netlink.Header, data []byte) netlink.Message {
	if b == nil {
		return netlink.Message{Header: h, Data: append([]byte(nil), data...)}
	}
	length := nlmsgHeaderLen + len(data)
	total := nlmsgAlign(length)
	if cap(b.cur)-len(b.cur) < total {
		size := wireBlockMin
		if b.cur != nil {
			b.full = append(b.full, b.cur)
			size = min(cap(b.cur)*2, wireBlockMax)
		}
		b.cur = b.pool.get(max(size, total))
	}
	start := len(b.cur)
	b.cur = binary.NativeEndian.AppendUint32(b.cur, uint32(length))
	b.cur = binary.NativeEndian.AppendUint16(b.cur, uint16(h.Type))
	b.cur = binary.NativeEndian.AppendUint16(b.cur, uint16(h.Flags))
	b.cur = append(b.cur, 0, 0, 0, 0, 0, 0, 0, 0) // sequence and port ID
	b.cur = append(b.cur, data...)
	for range total - length {
		b.cur = append(b.cur, 0)
	}
	b.count++
	b.size += total
	h.Length = uint32(length)
	return netlink.Message{Header: h, Data: b.cur[start+nlmsgHeaderLen : start+length : start+length]}
}

// buffers returns the batch's blocks, each cut to what it holds.
func (b *wireBatch) buffers() [][]byte {
	if b.cur == nil {
		return b.full
	}
	return append(b.full[:len(b.full):len(b.full)], b.cur)
}

// number gives the messages the sequence numbers next returns, in order,
// and asks for an acknowledgement in the last message but one (the last
// before the batch's end). It returns that message's sequence number, or
// 0 for a batch of fewer than two messages.
func (b *wireBatch) number(next func() uint32) (ackSeq uint32) {
	// The headers of the last two messages seen.
	var prev, last []byte
	for _, block := range b.buffers() {
		for off := 0; off+nlmsgHeaderLen <= len(block); {
			hdr := block[off : off+nlmsgHeaderLen]
			binary.NativeEndian.PutUint32(hdr[8:], next())
			prev, last = last, hdr
			off += nlmsgAlign(int(binary.NativeEndian.Uint32(hdr)))
		}
	}
	if prev == nil {
		return 0
	}
	flags := binary.NativeEndian.Uint16(prev[6:]) | uint16(netlink.Acknowledge)
	binary.NativeEndian.PutUint16(prev[6:], flags)
	return binary.NativeEndian.Uint32(prev[8:])
}

// release gives the batch's blocks back; nothing may use its messages
// after.
func (b *wireBatch) release() {
	b.pool.put(b.buffers())
	b.full, b.cur = nil, nil
}
