package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Listener opens a TCP listener; tests and namespaced runs inject their own.
type Listener func(addr string) (net.Listener, error)

// ServiceServer runs one HTTP server per health check node port.
type ServiceServer struct {
	listen Listener
	// healthy reports whether nftproxy itself is healthy; a node whose
	// proxy is stale answers 503 even with local endpoints.
	healthy func() bool

	// onListenFailure, when set, hears of every health check node port
	// that could not be opened (kube-proxy records an Event then).
	onListenFailure func(nn types.NamespacedName, port uint16, err error)

	mu       sync.Mutex
	services map[types.NamespacedName]*hcService
	// addrs are the addresses to listen on; nil means every address.
	addrs []netip.Addr
}

// SetProxyHealthy makes healthy decide serviceProxyHealthy (kube-proxy
// answers 503, whatever the endpoints, while its own rules are stale).
func (s *ServiceServer) SetProxyHealthy(healthy func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthy = healthy
}

// OnListenFailure makes f hear of every health check node port that
// cannot be opened, at every sync that tries; the port is tried again at
// the next sync.
func (s *ServiceServer) OnListenFailure(f func(nn types.NamespacedName, port uint16, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onListenFailure = f
}

// SetAddresses limits the listeners to addrs, as kube-proxy limits them
// to the node port addresses (--nodeport-addresses); nil means every
// address. It applies to listeners opened from then on.
func (s *ServiceServer) SetAddresses(addrs []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = addrs
}

type hcService struct {
	port      uint16
	endpoints int
	server    *http.Server
}

// NewServiceServer returns a server that listens with listen (net.Listen
// when nil). healthy may be nil (always healthy).
func NewServiceServer(listen Listener, healthy func() bool) *ServiceServer {
	if listen == nil {
		listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if healthy == nil {
		healthy = func() bool { return true }
	}
	return &ServiceServer{listen: listen, healthy: healthy, services: map[types.NamespacedName]*hcService{}}
}

// Sync makes the server answer for exactly these Services: their health
// check node ports and local ready endpoint counts. Listeners of Services
// that are gone are closed; a port that cannot be opened is reported and the
// others are still served.
func (s *ServiceServer) Sync(ports map[types.NamespacedName]uint16, localEndpoints map[types.NamespacedName]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nn, svc := range s.services {
		if p, ok := ports[nn]; !ok || p != svc.port {
			_ = svc.server.Close()
			delete(s.services, nn)
		}
	}
	var errs []error
	for nn, port := range ports {
		if svc, ok := s.services[nn]; ok {
			svc.endpoints = localEndpoints[nn]
			continue
		}
		hosts := []string{""}
		if s.addrs != nil {
			hosts = hosts[:0]
			for _, a := range s.addrs {
				hosts = append(hosts, a.String())
			}
		}
		var listeners []net.Listener
		var failed []error
		for _, h := range hosts {
			l, err := s.listen(net.JoinHostPort(h, strconv.Itoa(int(port))))
			if err != nil {
				failed = append(failed, err)
				continue
			}
			listeners = append(listeners, l)
		}
		if len(failed) > 0 {
			err := errors.Join(failed...)
			errs = append(errs, fmt.Errorf("health check node port %d of %s: %w", port, nn, err))
			if s.onListenFailure != nil {
				s.onListenFailure(nn, port, err)
			}
		}
		if len(listeners) == 0 {
			continue
		}
		svc := &hcService{port: port, endpoints: localEndpoints[nn]}
		server, limit := ServiceHealthLimits().NewServer(s.handler(nn))
		svc.server = server
		s.services[nn] = svc
		for _, l := range listeners {
			go func() {
				if err := svc.server.Serve(limit(l)); err != nil && !errors.Is(err, http.ErrServerClosed) {
					klog.ErrorS(err, "Health check server stopped", "service", nn, "port", port)
				}
			}()
		}
	}
	return errors.Join(errs...)
}

// response is kube-proxy's health check body.
type response struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (s *ServiceServer) handler(nn types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		count := 0
		if svc := s.services[nn]; svc != nil {
			count = svc.endpoints
		}
		proxyHealthy := s.healthy
		s.mu.Unlock()
		healthy := proxyHealthy()
		var body response
		body.Service.Namespace, body.Service.Name = nn.Namespace, nn.Name
		body.LocalEndpoints, body.ServiceProxyHealthy = count, healthy
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(body)
	})
}

// Close stops every listener.
func (s *ServiceServer) Close(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nn, svc := range s.services {
		_ = svc.server.Shutdown(ctx)
		delete(s.services, nn)
	}
}
