//go:build linux

package instance

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// TryLock takes the lock called name in the network namespace at path
// ("": the current one) at once, or returns ErrHeld and the holder's PID
// (0 when it cannot be told).
func TryLock(path, name string) (*Lock, int, error) {
	var fd int
	err := netns.Do(path, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("lock socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: "@" + name}); err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EADDRINUSE) {
				return ErrHeld
			}
			return fmt.Errorf("bind the lock socket @%s: %w", name, err)
		}
		if err := unix.Listen(fd, 8); err != nil {
			unix.Close(fd)
			return fmt.Errorf("listen on the lock socket: %w", err)
		}
		return nil
	})
	if errors.Is(err, ErrHeld) {
		return nil, holderPID(path, name), ErrHeld
	}
	if err != nil {
		return nil, 0, err
	}
	// Whoever asks who holds the lock is answered by the kernel
	// (SO_PEERCRED); its connection is accepted and closed so that the
	// backlog never fills.
	go func() {
		for {
			nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
			if err != nil {
				return
			}
			unix.Close(nfd)
		}
	}()
	return &Lock{release: func() { _ = unix.Shutdown(fd, unix.SHUT_RDWR); unix.Close(fd) }}, 0, nil
}

// holderPID returns the PID of the process that holds the lock, or 0.
func holderPID(path, name string) int {
	pid := 0
	_ = netns.Do(path, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name}); err != nil {
			return err
		}
		cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return err
		}
		pid = int(cred.Pid)
		return nil
	})
	return pid
}
