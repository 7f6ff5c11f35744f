package healthcheck

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bounds what one HTTP server of the daemon keeps: any pod can
// reach the health ports, so none may hold descriptors or memory without
// bound.
type Limits struct {
	// MaxConns is the most connections kept open at once. A new one past
	// it closes the longest-idle kept-alive connection; if none is idle,
	// it waits in the listen backlog until one ends, which the timeouts
	// below bound.
	MaxConns int
	// ReadHeader, Write and Idle are the http.Server timeouts.
	ReadHeader, Write, Idle time.Duration
}

// ServerLimits are the limits of the daemon's own servers (health and
// metrics): 256 connections; a compat view or explain answer streamed
// to a slow reader may take up to write.
func ServerLimits(write time.Duration) Limits {
	return Limits{MaxConns: 256, ReadHeader: 5 * time.Second, Write: write, Idle: 30 * time.Second}
}

// ServiceHealthLimits are those of one Service's health check node port:
// 32 connections, as a node may have thousands of such ports.
func ServiceHealthLimits() Limits {
	return Limits{MaxConns: 32, ReadHeader: 5 * time.Second, Write: 10 * time.Second, Idle: 30 * time.Second}
}

// NewServer returns an http.Server for handler with the limits' timeouts
// and its Listener, which wraps every listener the server serves so that
// together they keep at most MaxConns connections.
func (lim Limits) NewServer(handler http.Handler) (*http.Server, func(net.Listener) net.Listener) {
	cl := &connLimiter{max: lim.MaxConns, conns: map[net.Conn]time.Time{}}
	cl.cond = sync.NewCond(&cl.mu)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: lim.ReadHeader, WriteTimeout: lim.Write, IdleTimeout: lim.Idle, ConnState: cl.track}
	return srv, func(l net.Listener) net.Listener { return &limitedListener{Listener: l, limiter: cl} }
}

// connLimiter keeps at most max connections of one server.
type connLimiter struct {
	max int

	mu   sync.Mutex
	cond *sync.Cond
	// conns are the open connections, with the time each went idle (zero
	// while it is busy).
	conns map[net.Conn]time.Time
}

// limitedListener is one listener of a server under a connLimiter.
type limitedListener struct {
	net.Listener
	limiter *connLimiter
}

// Accept implements net.Listener.
func (ll *limitedListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l := ll.limiter
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.conns) >= l.max {
		if victim := l.longestIdle(); victim != nil {
			delete(l.conns, victim)
			victim.Close()
			continue
		}
		l.cond.Wait()
	}
	l.conns[c] = time.Time{}
	return c, nil
}

// longestIdle returns the connection idle the longest, or nil if every
// connection is busy.
func (l *connLimiter) longestIdle() net.Conn {
	var victim net.Conn
	var since time.Time
	for c, idle := range l.conns {
		if !idle.IsZero() && (victim == nil || idle.Before(since)) {
			victim, since = c, idle
		}
	}
	return victim
}

// track follows the server's connection states.
func (l *connLimiter) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = time.Now()
			l.cond.Broadcast() // an Accept waiting for room may close it
		}
	case http.StateActive:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = time.Time{}
		}
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		l.cond.Broadcast()
	}
}
