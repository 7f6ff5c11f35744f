//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// selectLimit is FD_SETSIZE. github.com/google/nftables waits for replies
// on its socket with pselect, whose fd_set holds only descriptors below
// it: a socket numbered higher panics the process (index out of range).
// A node agent cannot keep its descriptors low (health check listeners,
// keep-alive connections of any pod), so the sockets it gives the library
// are kept low instead.
const selectLimit = 1024

// spareDescriptors is how many descriptors below selectLimit are kept in
// reserve for the library's sockets: all are given up just before each
// dial, so that the kernel, which hands out the lowest free number, gives
// one to the new socket (a dial into another network namespace opens that
// namespace's handle first, and a concurrent accept may take one), and
// taken back after it.
const spareDescriptors = 8

// errHighDescriptor says a socket would have been numbered at or above
// selectLimit; it is refused rather than handed to the library.
var errHighDescriptor = errors.New("no netlink socket descriptor below 1024 is free")

// lowDescriptors is the reserve. A process has one descriptor table, so
// it has one reserve (reserve below), shared by every Netlink and by the
// cleanup of kube-proxy's rules.
type lowDescriptors struct {
	mu    sync.Mutex
	spare []int
}

var reserve = &lowDescriptors{}

// fill tops the reserve up with descriptors below selectLimit; a
// descriptor the kernel numbers higher is closed again.
func (r *lowDescriptors) fill() {
	for len(r.spare) < spareDescriptors {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		if fd >= selectLimit {
			unix.Close(fd)
			return
		}
		r.spare = append(r.spare, fd)
	}
}

// Reserve fills the process's reserve of low descriptors. A daemon calls
// it at start, before it opens listeners and accepts connections.
func Reserve() {
	reserve.mu.Lock()
	defer reserve.mu.Unlock()
	reserve.fill()
}

// NewConn opens a lasting github.com/google/nftables connection whose
// socket is numbered below selectLimit, or fails with an error (never a
// panic later) when no such number can be had. Close it with CloseLasting.
func NewConn(opts ...nftables.ConnOption) (*nftables.Conn, error) {
	reserve.mu.Lock()
	defer reserve.mu.Unlock()
	reserve.fill()
	opts = append(opts, nftables.AsLasting(), nftables.WithSockOptions(refuseHighDescriptor))
	var err error
	for range 3 {
		for _, fd := range reserve.spare {
			unix.Close(fd)
		}
		reserve.spare = reserve.spare[:0]
		var c *nftables.Conn
		c, err = nftables.New(opts...)
		reserve.fill()
		if !errors.Is(err, errHighDescriptor) {
			return c, err
		}
	}
	return nil, fmt.Errorf("open nftables socket: %w", err)
}

// refuseHighDescriptor is a socket option that closes and refuses a
// socket numbered at or above selectLimit. As any socket option does, it
// also stops the library from resizing the socket's buffers, which only
// batches sent through the library (small ones here) would use.
func refuseHighDescriptor(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return err
	}
	high := false
	if err := raw.Control(func(fd uintptr) { high = fd >= selectLimit }); err != nil {
		c.Close()
		return err
	}
	if high {
		c.Close()
		return errHighDescriptor
	}
	return nil
}
