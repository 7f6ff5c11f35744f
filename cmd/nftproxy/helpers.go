package main

import (
	"context"
	"net"

	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// netnsDialer dials from inside the network namespace at path, so that a
// daemon programming another namespace reaches an API server there.
func netnsDialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = netns.Do(path, func() error {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
