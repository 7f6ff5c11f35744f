//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Reading a table of 30,000 Services takes hundreds of thousands of
// requests (one rule dump per chain: a dump of the whole table restarts
// its walk for every buffer). Through mdlayher/netlink each cost several
// system calls, goroutine hand-offs and a fresh receive buffer, which was
// most of `nftproxy save`'s time. Here each worker's socket is driven with
// plain sendto/recvfrom: the kernel answers inside the system call, so no
// call waits.
//
// The kernel handles every message of one sendmsg in turn, so requests
// that are not dumps go out a window at a time. Dumps cannot: a socket
// runs one dump at a time, and a dump's end (Done) is only written when
// its first buffer has been read, so the requests behind it in a window
// would be refused with EBUSY. Dumps go one at a time per socket, on
// pipelineWorkers sockets at once.

// pipelineWorkers is how many sockets request uses at once.
const pipelineWorkers = 4

// pipelineWindow is how many requests go out in one sendmsg. Each answer
// takes at most one 32 KB buffer until it is read, and the window's
// answers must fit in the socket's receive buffer (pipelineReadBuffer).
const pipelineWindow = 256

// pipelineReadBuffer is the receive buffer asked for (root may exceed
// the system's limit; others get what the limit allows and a smaller
// window).
const pipelineReadBuffer = 16 << 20

// pipelineTimeout bounds the wait for one window's answers.
const pipelineTimeout = 30 * time.Second

// request sends one request of msgType per attribute list and returns each
// one's answer messages, in the order of requests. Dumps (flags with
// netlink.Dump) end with Done; other requests ask for an acknowledgement.
// An answer that is an error for which skip returns true is left empty.
func (n *Netlink) request(msgType uint16, flags netlink.HeaderFlags, family nftables.TableFamily, requests [][]netlink.Attribute, skip func(error) bool) ([][]netlink.Message, error) {
	body, err := marshalBodies(requests)
	if err != nil {
		return nil, err
	}
	out := make([][]netlink.Message, len(requests))
	return out, n.requestEach(msgType, flags, family, len(requests), body, skip, out, nil)
}

// marshalBodies encodes each attribute list once and returns the
// requestBody that appends request i's.
func marshalBodies(requests [][]netlink.Attribute) (requestBody, error) {
	bodies := make([][]byte, len(requests))
	for i, attrs := range requests {
		data, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		bodies[i] = data
	}
	return func(i int, dst []byte) []byte { return append(dst, bodies[i]...) }, nil
}

// requestBody appends the attributes of request i to dst. It is called
// as each request goes out, so that hundreds of thousands of requests are
// never held encoded at once.
type requestBody func(i int, dst []byte) []byte

// answerSink takes answer message h, data of request i as it arrives;
// data is only valid during the call. A dump's Done comes last, with no
// data: the request's answer is then complete. It is called from several
// goroutines at once, never twice at once for one request.
type answerSink func(i int, h netlink.Header, data []byte) error

// requestEach is request with count requests whose attributes body
// appends, and the answers given to sink instead of kept in out (when
// sink is not nil), so that a large listing is decoded without holding or
// copying its messages.
func (n *Netlink) requestEach(msgType uint16, flags netlink.HeaderFlags, family nftables.TableFamily, count int, body requestBody, skip func(error) bool, out [][]netlink.Message, sink answerSink) error {
	window := pipelineWindow
	if flags&netlink.Dump != 0 {
		window = 1
	} else {
		flags |= netlink.Acknowledge
	}
	workers := min(pipelineWorkers, (count+window-1)/window)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Worker w takes every workers-th window.
			var mine []int
			for i := w * window; i < count; i += workers * window {
				for j := i; j < min(i+window, count); j++ {
					mine = append(mine, j)
				}
			}
			errs[w] = n.runPipeline(unix.NFNL_SUBSYS_NFTABLES<<8|msgType, uint16(flags), byte(family), window, mine, body, out, skip, sink)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runPipeline sends the requests numbered mine on a socket of its own, a
// window at a time, and stores their answers in out.
func (n *Netlink) runPipeline(typ, flags uint16, family byte, window int, mine []int, body requestBody, out [][]netlink.Message, skip func(error) bool, sink answerSink) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: max(n.netnsFd, 0)})
	if err != nil {
		return fmt.Errorf("open netfilter socket: %w", err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netfilter socket: %w", err)
	}
	if got := readBuffer(rc); got < pipelineReadBuffer {
		window = max(1, min(window, got/(64<<10)))
	}
	p := &pipeline{rc: rc, conn: c, typ: typ, flags: flags, family: family, body: body, out: out, skip: skip, sink: sink, buf: make([]byte, 64<<10)}
	for len(mine) > 0 {
		w := mine[:min(window, len(mine))]
		// The first request of a window always gets through: exchange
		// reads every dump to its end.
		busy, err := p.exchange(w)
		if err != nil {
			return err
		}
		if mine = mine[len(w):]; len(busy) > 0 {
			mine = append(busy, mine...)
		}
	}
	return nil
}

// pipeline is one socket's state while request runs.
type pipeline struct {
	rc     syscall.RawConn
	conn   *netlink.Conn
	typ    uint16
	flags  uint16
	family byte
	body   requestBody
	out    [][]netlink.Message
	skip   func(error) bool
	sink   answerSink
	buf    []byte
	// msg is the send buffer and open the requests not yet answered,
	// both reused from window to window.
	msg  []byte
	open map[uint32]bool
}

// exchange sends the requests numbered w in one sendmsg and reads until
// each is answered. It returns the ones the kernel refused as busy.
func (p *pipeline) exchange(w []int) (busy []int, err error) {
	msg := p.encode(w)
	var sendErr error
	if err := p.rc.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return sendErr != unix.EAGAIN
	}); err != nil || sendErr != nil {
		return nil, fmt.Errorf("send %d requests: %w", len(w), errors.Join(err, sendErr))
	}
	if p.open == nil {
		p.open = map[uint32]bool{}
	}
	clear(p.open)
	for _, i := range w {
		p.open[uint32(i+1)] = true
	}
	if err := p.conn.SetReadDeadline(time.Now().Add(pipelineTimeout)); err != nil {
		return nil, err
	}
	a := answers{}
	for len(p.open) > 0 {
		var got int
		var recvErr error
		if err := p.rc.Read(func(fd uintptr) bool {
			// read(2), not recvfrom: the sender is always the kernel,
			// and its address would be allocated for every answer.
			got, recvErr = unix.Read(int(fd), p.buf)
			return recvErr != unix.EAGAIN
		}); err != nil {
			return nil, fmt.Errorf("answers to %d requests (%d open): %w", len(w), len(p.open), err)
		}
		if recvErr != nil {
			// ENOBUFS: the kernel dropped answers it had no room for.
			return nil, fmt.Errorf("answers to %d requests: %w", len(w), recvErr)
		}
		if err := p.take(p.buf[:got], &a); err != nil {
			return nil, err
		}
	}
	if a.failed != nil {
		return nil, a.failed
	}
	return a.busy, nil
}

// encode writes the requests numbered w, one netlink message each
// (sequence number i+1), into the reused send buffer.
func (p *pipeline) encode(w []int) []byte {
	msg := p.msg[:0]
	for _, i := range w {
		start := len(msg)
		var h [nlmsgHeaderLen]byte
		binary.NativeEndian.PutUint16(h[4:], p.typ)
		binary.NativeEndian.PutUint16(h[6:], p.flags)
		binary.NativeEndian.PutUint32(h[8:], uint32(i+1))
		msg = append(msg, h[:]...)
		msg = append(msg, p.family, unix.NFNETLINK_V0, 0, 0)
		msg = p.body(i, msg)
		binary.NativeEndian.PutUint32(msg[start:], uint32(len(msg)-start))
		for len(msg)%4 != 0 {
			msg = append(msg, 0)
		}
	}
	p.msg = msg
	return msg
}

// answers is what a window's answers said: the requests refused as busy,
// and the first failure.
type answers struct {
	busy   []int
	failed error
}

// take handles the answers in b, one read's worth: a request's end
// (Done, or an error message, 0 for success) closes it; its data go to
// the sink or into out. It returns an error only for a malformed answer.
func (p *pipeline) take(b []byte, a *answers) error {
	for len(b) >= nlmsgHeaderLen {
		size := int(binary.NativeEndian.Uint32(b[0:]))
		if size < nlmsgHeaderLen || size > len(b) {
			return fmt.Errorf("malformed answer of %d bytes", size)
		}
		h := netlink.Header{Length: uint32(size), Type: netlink.HeaderType(binary.NativeEndian.Uint16(b[4:])),
			Flags: netlink.HeaderFlags(binary.NativeEndian.Uint16(b[6:])), Sequence: binary.NativeEndian.Uint32(b[8:]), PID: binary.NativeEndian.Uint32(b[12:])}
		data := b[nlmsgHeaderLen:size]
		b = b[min(nlmsgAlign(size), len(b)):]
		if !p.open[h.Sequence] {
			continue
		}
		i := int(h.Sequence) - 1
		switch h.Type {
		case netlink.Done:
			delete(p.open, h.Sequence)
			if p.sink != nil {
				if err := p.sink(i, h, nil); err != nil && a.failed == nil {
					a.failed = fmt.Errorf("request %d: %w", i, err)
				}
			}
		case netlink.Error:
			delete(p.open, h.Sequence)
			if len(data) < 4 {
				return fmt.Errorf("malformed error answer")
			}
			errno := syscall.Errno(-int32(binary.NativeEndian.Uint32(data)))
			switch {
			case errno == 0:
			case errno == unix.EBUSY:
				a.busy = append(a.busy, i)
			case p.skip != nil && p.skip(errno):
				p.out[i] = nil
			case a.failed == nil:
				a.failed = fmt.Errorf("request %d: %w", i, errno)
			}
		default:
			if p.sink == nil {
				p.out[i] = append(p.out[i], netlink.Message{Header: h, Data: append([]byte(nil), data...)})
			} else if err := p.sink(i, h, data); err != nil && a.failed == nil {
				a.failed = fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	return nil
}

// readBuffer raises the socket's receive buffer to pipelineReadBuffer
// (beyond the system's limit when allowed) and returns what it got.
func readBuffer(rc syscall.RawConn) int {
	got := 0
	_ = rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, pipelineReadBuffer) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, pipelineReadBuffer)
		}
		// The kernel reports twice the size it was given.
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
			got = v / 2
		}
	})
	return got
}
