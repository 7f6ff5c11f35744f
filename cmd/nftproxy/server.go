package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/compat/explain"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
	"github.com/nftproxy/nftproxy/proxier/metrics"
)

// metricsMux serves kube-proxy's metrics endpoints plus the compat view.
// configz is the effective configuration for /configz.
// nsPath is the network namespace the daemon programs (empty: its own).
// With profiling, it also serves Go's profiles under /debug/pprof/.
func metricsMux(m *metrics.Metrics, dp nftgen.Dataplane, nsPath, proxyMode string, configz any, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kubeproxy.config.k8s.io": configz})
	})
	mux.Handle("/metrics", m.Handler())
	// component-base's SLI metrics, as kube-proxy serves them.
	slis.SLIMetricsWithReset{}.Install(mux)
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, proxyMode)
	})
	// /compat/iptables-save[?family=ip6][&table=nat][&counters=1] prints
	// the compat view of the live kernel, like iptables-save.
	// Reading and rendering the whole table is the costliest answer the
	// daemon gives; a few at a time, the others are told to come back.
	expensive := newConcurrencyLimit(maxExpensiveRequests)
	mux.HandleFunc("/compat/iptables-save", expensive.wrap(func(w http.ResponseWriter, r *http.Request) {
		fam := nftgen.FamilyIPv4
		if f := r.URL.Query().Get("family"); f == "ip6" || f == "IPv6" {
			fam = nftgen.FamilyIPv6
		}
		// Each chain is rendered as it is written: the whole view of a
		// large table is gigabytes.
		st, rest, err := dp.ReadLeaving(r.Context(), fam)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		opts := compat.Options{Counters: r.URL.Query().Get("counters") != ""}
		if t := r.URL.Query().Get("table"); t != "" {
			opts.Tables = []string{t}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = compat.Stream(r.Context(), w, st, rest, opts)
	}))
	mux.HandleFunc("/explain", expensive.wrap(explainHandler(dp, nsPath)))
	return mux
}

// explainHandler answers
// /explain?dst=IP:PORT[&from=pod|node|external][&proto=tcp][&src=IP][&all=1][&output=json]
// as `nftproxy explain` does, from the live table.
func explainHandler(dp nftgen.Dataplane, nsPath string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		var local []netip.Addr
		if err := netns.Do(nsPath, func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		q, err := explain.ParseQuery(v.Get("from"), v.Get("proto"), v.Get("src"), v.Get("dst"), local)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q.All = v.Get("all") != "" && v.Get("all") != "0" && v.Get("all") != "false"
		st, err := dp.Read(r.Context(), q.Family())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		e, err := explain.ExplainContext(r.Context(), st, q, explain.LocalAddrs(local))
		if err != nil {
			return // the client went away
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if v.Get("output") == "json" {
			w.Header().Set("Content-Type", "application/json")
		}
		_ = writeExplanation(w, v.Get("output"), e)
	}
}

// serveRetry is how long serve waits before trying to bind again, as
// kube-proxy does.
const serveRetry = 5 * time.Second

// serve serves handler on addr (in the network namespace nsPath) until ctx
// ends. When the address cannot be bound (a port still held by the old
// pod), it logs and tries again every serveRetry, or, with hardFail
// (--bind-address-hard-fail), sends the error to failed and gives up.
func serve(ctx context.Context, nsPath, addr string, handler http.Handler, lim healthcheck.Limits, hardFail bool, failed chan<- error, reason string) {
	if addr == "" || addr == "0" {
		return
	}
	srv, limit := lim.NewServer(handler)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		for ctx.Err() == nil {
			var l net.Listener
			err := netns.Do(nsPath, func() (err error) { l, err = net.Listen("tcp", addr); return err })
			if err == nil {
				err = srv.Serve(limit(l))
				if errors.Is(err, http.ErrServerClosed) {
					return
				}
			}
			if hardFail {
				failed <- serveError{reason: reason, err: fmt.Errorf("serve on %s: %w", addr, err)}
				return
			}
			klog.ErrorS(err, "Cannot serve; retrying", "address", addr, "retry", serveRetry)
			select {
			case <-ctx.Done():
			case <-time.After(serveRetry):
			}
		}
	}()
}

// registerPacketCounters serves kube-proxy's packet metrics from the named
// counters of nftproxy's tables, summed over the families: one request per
// family and scrape.
func registerPacketCounters(m *metrics.Metrics, dp nftgen.Dataplane, families []nftgen.Family) {
	m.RegisterPacketCounters(func() map[string]uint64 {
		sum := map[string]uint64{}
		for _, f := range families {
			counts, err := dp.Counters(context.Background(), f)
			if err != nil {
				continue // no table yet in this family
			}
			for name, n := range counts {
				sum[name] += n
			}
		}
		return sum
	}, nftgen.CounterCTStateInvalid, nftgen.CounterLocalhostNodePorts)
}

// maxExpensiveRequests is how many /explain and /compat/iptables-save
// requests the metrics server answers at once.
const maxExpensiveRequests = 2

// concurrencyLimit answers 429 Too Many Requests to a request that finds
// its slots taken, instead of queueing work without bound.
type concurrencyLimit chan struct{}

func newConcurrencyLimit(n int) concurrencyLimit { return make(concurrencyLimit, n) }

func (l concurrencyLimit) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case l <- struct{}{}:
			defer func() { <-l }()
			h(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("%d requests that read the whole table are running; try again shortly", cap(l)), http.StatusTooManyRequests)
		}
	}
}

// serveError is a server that could not serve with --bind-address-hard-fail;
// reason is the reason of kube-proxy's Event for it.
type serveError struct {
	reason string
	err    error
}

func (e serveError) Error() string { return e.err.Error() }
func (e serveError) Unwrap() error { return e.err }
