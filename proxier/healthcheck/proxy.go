package healthcheck

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ToBeDeletedTaint is the cluster autoscaler's taint on a node it is about
// to remove; kube-proxy reports unhealthy on such nodes so that load
// balancers drain them.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxyHealthServer tracks whether the proxy keeps up with the updates it
// is given, as kube-proxy's does: it is unhealthy when an update has been
// queued for longer than the timeout without a sync applying it. /healthz
// is also unhealthy when the node is being deleted.
type ProxyHealthServer struct {
	clock   clock.Clock
	timeout time.Duration
	// count, if set, is called with the path and status code of each
	// answer (kube-proxy's proxy_healthz_total / proxy_livez_total).
	count func(path string, code int)

	mu            sync.Mutex
	lastUpdated   map[string]time.Time
	oldestPending map[string]time.Time
	node          *v1.Node
	nodeKnown     bool
	// contestedBy names another writer that keeps changing the proxy's
	// table, until contestedUntil (see SetContested).
	contestedBy    string
	contestedUntil time.Time
}

// NewProxyHealthServer returns a server whose updates go stale after
// timeout (kube-proxy uses twice the sync period).
func NewProxyHealthServer(c clock.Clock, timeout time.Duration, count func(string, int)) *ProxyHealthServer {
	if c == nil {
		c = clock.RealClock{}
	}
	return &ProxyHealthServer{clock: c, timeout: timeout, count: count, lastUpdated: map[string]time.Time{}, oldestPending: map[string]time.Time{}}
}

// QueuedUpdate records that family has an update waiting for a sync.
func (s *ProxyHealthServer) QueuedUpdate(family string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.oldestPending[family]; !ok {
		s.oldestPending[family] = s.clock.Now()
	}
}

// Updated records a successful sync of family.
func (s *ProxyHealthServer) Updated(family string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.oldestPending, family)
	s.lastUpdated[family] = s.clock.Now()
}

// SetNode records this node's Node object (nil when it is gone). Until the
// first call, the node counts as eligible (file mode has no Node object).
func (s *ProxyHealthServer) SetNode(n *v1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node, s.nodeKnown = n, true
}

// SetContested makes /healthz unhealthy until until: another writer (by)
// keeps changing the proxy's rules, so they cannot be trusted to stay in
// place. /livez is left alone: a restart does not help.
func (s *ProxyHealthServer) SetContested(by string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contestedBy, s.contestedUntil = by, until
}

// contested returns who contests the rules now, or "".
func (s *ProxyHealthServer) contested() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock.Now().Before(s.contestedUntil) {
		return s.contestedBy
	}
	return ""
}

// Health is kube-proxy's health JSON.
type Health struct {
	LastUpdated  time.Time                `json:"lastUpdated"`
	CurrentTime  time.Time                `json:"currentTime"`
	NodeEligible *bool                    `json:"nodeEligible,omitempty"`
	Healthy      bool                     `json:"healthy"`
	Status       map[string]ProxierHealth `json:"status,omitempty"`
	// ContestedBy names another writer that keeps changing the rules
	// (nftproxy's own; /healthz only).
	ContestedBy string `json:"contestedBy,omitempty"`
}

// ProxierHealth is the health of one family's proxier.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// Health computes the current health.
func (s *ProxyHealthServer) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	h := Health{Healthy: true, CurrentTime: now, Status: map[string]ProxierHealth{}}
	for fam, last := range s.lastUpdated {
		if last.After(h.LastUpdated) {
			h.LastUpdated = last
		}
		st := ProxierHealth{LastUpdated: last, Healthy: true}
		if pending, ok := s.oldestPending[fam]; ok && now.Sub(pending) >= s.timeout {
			st.Healthy, h.Healthy = false, false
		}
		h.Status[fam] = st
	}
	// A family that never synced is healthy while it starts up, however
	// long that takes (kube-proxy's rule: a first sync of a large cluster
	// must not make the node look broken).
	return h
}

// NodeEligible reports whether the node may receive load balancer traffic:
// it exists, is not being deleted and is not tainted for deletion.
func (s *ProxyHealthServer) NodeEligible() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.nodeKnown {
		return true
	}
	if s.node == nil || !s.node.DeletionTimestamp.IsZero() {
		return false
	}
	for _, t := range s.node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// HealthzHandler serves /healthz: 200 when healthy and the node is
// eligible, else 503, with kube-proxy's JSON body.
func (s *ProxyHealthServer) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := s.Health()
		eligible := s.NodeEligible()
		h.NodeEligible = &eligible
		if h.ContestedBy = s.contested(); h.ContestedBy != "" {
			h.Healthy = false
		}
		ok := h.Healthy && eligible
		if ok {
			// As kube-proxy: a healthy answer reports a recent lastUpdated.
			h.LastUpdated = s.clock.Now()
		}
		s.write(w, "/healthz", ok, h)
	})
}

// LivezHandler serves /livez: like /healthz without node eligibility.
func (s *ProxyHealthServer) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := s.Health()
		if h.Healthy {
			h.LastUpdated = s.clock.Now()
		}
		s.write(w, "/livez", h.Healthy, h)
	})
}

func (s *ProxyHealthServer) write(w http.ResponseWriter, path string, ok bool, h Health) {
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	if s.count != nil {
		s.count(path, code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}

// Mux returns a mux with /healthz and /livez.
func (s *ProxyHealthServer) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", s.HealthzHandler())
	mux.Handle("/livez", s.LivezHandler())
	return mux
}
