//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// batchReplyTimeout bounds the wait for the kernel's answer to a batch. The
// kernel processes a batch inside sendmsg and queues every answer before
// sendmsg returns, so the answer is there at once; the limit only guards
// against an answer that never comes.
const batchReplyTimeout = 10 * time.Second

// sendBatch commits one batch (begin marker, messages, end marker) as one
// sendmsg on a netfilter socket of its own, kept open between commits.
//
// google/nftables asks the kernel to echo every new rule (NLM_F_ECHO), and
// the kernel then builds a notification of about 8 KB per rule and holds
// them all until the commit ends: over half of the kernel's time in a cold
// sync of 10,000 Services, and memory in proportion to the batch. Here no
// message asks for an echo; only the last one asks for an acknowledgement,
// which the kernel sends after the errors of any earlier message, so its
// arrival ends the wait.
func (n *Netlink) sendBatch(batch []netlink.Message) error {
	if len(batch) < 3 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.batches == nil {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: max(n.netnsFd, 0)})
		if err != nil {
			return fmt.Errorf("open netfilter socket: %w", err)
		}
		n.batches = c
	}
	c := n.batches
	// No message asks for an echo or an acknowledgement (nftproxy encodes
	// them all); writeBatch numbers them.
	last := len(batch) - 2
	batch[last].Header.Flags |= netlink.Acknowledge
	if size := batchBytes(batch); size > 0 {
		if wb, err := c.WriteBuffer(); err == nil && wb < size {
			if err := c.SetWriteBuffer(size); err != nil {
				return fmt.Errorf("socket send buffer of %d bytes: %w", size, err)
			}
		}
	}
	lastSeq, err := n.writeBatch(c, batch)
	if err != nil {
		n.dropBatchSocket()
		return fmt.Errorf("send batch: %w", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(batchReplyTimeout)); err != nil {
		n.dropBatchSocket()
		return err
	}
	var first error
	for {
		msgs, err := c.Receive()
		if err != nil {
			var oe *netlink.OpError
			if errors.As(err, &oe) && oe.Sequence != 0 {
				if first == nil {
					first = err
				}
				if oe.Sequence == lastSeq {
					return first
				}
				continue
			}
			// No answer in time, or the socket broke: start over on a new
			// socket next time, so that a late answer cannot be taken for
			// the next batch's.
			n.dropBatchSocket()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("no acknowledgement within %v", batchReplyTimeout)
			}
			return errors.Join(first, err)
		}
		for _, m := range msgs {
			if m.Header.Sequence == lastSeq && m.Header.Type == netlink.Error {
				return first
			}
		}
	}
}

// writeBatch marshals batch into one buffer of exactly its size and sends
// it with one sendto; it returns the sequence number of the message that
// asks for the acknowledgement. (mdlayher/netlink's SendMessages marshals
// each message apart and grows the buffer as it goes: five times the
// batch's size in garbage, a quarter of a cold sync's allocations.)
func (n *Netlink) writeBatch(c *netlink.Conn, batch []netlink.Message) (lastSeq uint32, err error) {
	// One buffer serves every batch (they are sent one at a time): a cold
	// sync's hundreds of MB then cost the heap one chunk.
	buf := n.sendBuf[:0]
	if need := batchBytes(batch); cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	defer func() { n.sendBuf = buf[:0] }()
	for i, m := range batch {
		n.batchSeq++
		if i == len(batch)-2 {
			lastSeq = n.batchSeq
		}
		size := nlmsgHeaderLen + len(m.Data)
		buf = binary.NativeEndian.AppendUint32(buf, uint32(size))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(m.Header.Type))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(m.Header.Flags))
		buf = binary.NativeEndian.AppendUint32(buf, n.batchSeq)
		buf = binary.NativeEndian.AppendUint32(buf, 0)
		buf = append(buf, m.Data...)
		for range nlmsgAlign(size) - size {
			buf = append(buf, 0)
		}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var sendErr error
	if err := rc.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return sendErr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	return lastSeq, sendErr
}

func (n *Netlink) dropBatchSocket() {
	if n.batches != nil {
		_ = n.batches.Close()
		n.batches = nil
	}
}

// batchBytes is the size of a batch's netlink messages on the wire.
func batchBytes(batch []netlink.Message) int {
	size := 0
	for _, m := range batch {
		size += nlmsgAlign(nlmsgHeaderLen + len(m.Data))
	}
	return size
}

// nlmsgHeaderLen is the size of a netlink message header.
const nlmsgHeaderLen = 16

// nlmsgAlign rounds a netlink message length up to its 4-byte alignment.
func nlmsgAlign(n int) int { return (n + 3) &^ 3 }
