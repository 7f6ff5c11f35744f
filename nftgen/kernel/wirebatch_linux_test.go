//go:build linux

package kernel

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/mdlayher/netlink"
)

// batchMessages reads b's messages back from its blocks.
func batchMessages(t testing.TB, b *wireBatch) []netlink.Message {
	t.Helper()
	var out []netlink.Message
	for _, block := range b.buffers() {
		for off := 0; off < len(block); {
			var m netlink.Message
			length := int(binary.NativeEndian.Uint32(block[off:]))
			if length < nlmsgHeaderLen || off+nlmsgAlign(length) > len(block) {
				t.Fatalf("message of %d bytes at %d of a %d-byte block", length, off, len(block))
			}
			if err := m.UnmarshalBinary(block[off : off+nlmsgAlign(length)]); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
			off += nlmsgAlign(length)
		}
	}
	return out
}

// TestWireBatchIsWhatNetlinkMarshals: the blocks of a batch, one after the
// other, are byte for byte the messages as mdlayher/netlink marshals them,
// numbered in order and with the acknowledgement asked in the last but
// one, across blocks of every size. (Every nf_tables payload is a whole
// number of 4-byte words; TestWireBatchPadsPayloads covers the others.)
func TestWireBatchIsWhatNetlinkMarshals(t *testing.T) {
	pool := &blockPool{}
	for _, n := range []int{2, 3, 50, 20_000} {
		b := &wireBatch{pool: pool}
		var want []netlink.Message
		size := 0
		for i := range n {
			data := bytes.Repeat([]byte{byte(i)}, 4*(i%7+i%300))
			if i == n/2 {
				data = make([]byte, 3*wireBlockMax/2) // larger than any block
			}
			h := netlink.Header{Type: netlink.HeaderType(0x0a00 | i%9), Flags: netlink.Request | netlink.HeaderFlags(i%3)<<8}
			m := b.add(h, data)
			if !bytes.Equal(m.Data, data) || m.Header.Type != h.Type || m.Header.Flags != h.Flags {
				t.Fatalf("message %d: add returned %v with %d bytes", i, m.Header, len(m.Data))
			}
			want = append(want, netlink.Message{Header: h, Data: data})
			size += nlmsgAlign(nlmsgHeaderLen + len(data))
		}
		seq := uint32(100)
		ack := b.number(func() uint32 { seq++; return seq })
		if want := uint32(100 + n - 1); ack != want {
			t.Errorf("%d messages: acknowledgement asked by %d, want %d", n, ack, want)
		}
		var wire []byte
		for i, m := range want {
			m.Header.Sequence = uint32(101 + i)
			m.Header.Length = uint32(nlmsgHeaderLen + len(m.Data))
			if i == n-2 {
				m.Header.Flags |= netlink.Acknowledge
			}
			raw, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			wire = append(wire, raw...)
		}
		got := bytes.Join(b.buffers(), nil)
		if b.count != n || b.size != size || len(got) != size {
			t.Errorf("%d messages: count %d, size %d, blocks hold %d bytes; want %d bytes", n, b.count, b.size, len(got), size)
		}
		if !bytes.Equal(got, wire) {
			t.Errorf("%d messages: the blocks differ from the marshalled messages", n)
		}
		if n == 20_000 && len(b.buffers()) < 3 {
			t.Errorf("%d messages in %d blocks; the test wants several", n, len(b.buffers()))
		}
		if len(batchMessages(t, b)) != n {
			t.Errorf("%d messages read back as %d", n, len(batchMessages(t, b)))
		}
		b.release()
		if b.full != nil || b.cur != nil {
			t.Errorf("release kept blocks")
		}
	}
	if len(pool.free) == 0 {
		t.Error("no block went back to the free list")
	}
}

// TestWireBatchPadsPayloads: a payload that is not a whole number of words
// is padded with zeros to the next message, and its header gives its
// length without the padding (NLMSG_LENGTH).
func TestWireBatchPadsPayloads(t *testing.T) {
	b := &wireBatch{pool: &blockPool{}}
	for _, n := range []int{1, 2, 3, 4, 5} {
		b.add(netlink.Header{Type: 1}, bytes.Repeat([]byte{0xff}, n))
	}
	got := bytes.Join(b.buffers(), nil)
	for off, n := 0, 1; n <= 5; n++ {
		if l := binary.NativeEndian.Uint32(got[off:]); int(l) != nlmsgHeaderLen+n {
			t.Errorf("payload of %d bytes: length %d", n, l)
		}
		end := off + nlmsgHeaderLen + n
		for _, c := range got[end:min(off+nlmsgAlign(nlmsgHeaderLen+n), len(got))] {
			if c != 0 {
				t.Errorf("payload of %d bytes: padding % x", n, got[end:])
			}
		}
		off += nlmsgAlign(nlmsgHeaderLen + n)
	}
	if want := 5*16 + 4 + 4 + 4 + 4 + 8; len(got) != want || b.size != want {
		t.Errorf("%d bytes, size %d; want %d", len(got), b.size, want)
	}
}
