//go:build linux

package kernel

import (
	"bytes"
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
func (n *Netlink) sendBatch(batch *wireBatch) error {
	if batch.count < 3 {
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
	// them all); number asks for the one.
	lastSeq := batch.number(func() uint32 { n.batchSeq++; return n.batchSeq })
	// The kernel refuses a message longer than the send buffer less 32
	// bytes (netlink_sendmsg), so a batch just under the buffer needs it
	// grown too.
	if wb, err := c.WriteBuffer(); err == nil && wb < batch.size+sendBufferSlack {
		if err := c.SetWriteBuffer(batch.size + sendBufferSlack); err != nil {
			return fmt.Errorf("socket send buffer of %d bytes: %w", batch.size, err)
		}
	}
	err := writeBatch(c, batch)
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

// writeBatch sends batch's blocks with one sendmsg, which the kernel
// gathers into the one message a batch must be. (mdlayher/netlink's
// SendMessages marshals each message apart and grows one buffer as it
// goes: five times the batch's size in garbage, a quarter of a cold sync's
// allocations.)
func writeBatch(c *netlink.Conn, batch *wireBatch) error {
	bufs := batch.buffers()
	if len(bufs) > maxIovecs {
		// More blocks than one sendmsg takes (a batch of over a GB).
		bufs = [][]byte{bytes.Join(bufs, nil)}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var sent int
	var sendErr error
	if err := rc.Write(func(fd uintptr) bool {
		sent, sendErr = unix.SendmsgBuffers(int(fd), bufs, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
		return sendErr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if sendErr == nil && sent != batch.size {
		return fmt.Errorf("sent %d of the batch's %d bytes", sent, batch.size)
	}
	return sendErr
}

// sendBufferSlack is what the send buffer must hold beyond a batch: the
// kernel's 32 bytes, rounded up.
const sendBufferSlack = 64

// maxIovecs is the most buffers one sendmsg takes (the kernel's UIO_MAXIOV).
const maxIovecs = 1024

func (n *Netlink) dropBatchSocket() {
	if n.batches != nil {
		_ = n.batches.Close()
		n.batches = nil
	}
}

// nlmsgHeaderLen is the size of a netlink message header.
const nlmsgHeaderLen = 16

// nlmsgAlign rounds a netlink message length up to its 4-byte alignment.
func nlmsgAlign(n int) int { return (n + 3) &^ 3 }
