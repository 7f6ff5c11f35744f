package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/netns"
)

// metricsMux serves kube-proxy's metrics endpoints plus the compat view.
// configz is the effective configuration for /configz.
func metricsMux(m *metrics.Metrics, dp *nftgen.Netlink, proxyMode string, configz any) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kubeproxy.config.k8s.io": configz})
	})
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, proxyMode)
	})
	// /compat/iptables-save[?family=ip6][&table=nat][&counters=1] prints
	// the compat view of the live kernel, like iptables-save.
	mux.HandleFunc("/compat/iptables-save", func(w http.ResponseWriter, r *http.Request) {
		fam := nftgen.FamilyIPv4
		if f := r.URL.Query().Get("family"); f == "ip6" || f == "IPv6" {
			fam = nftgen.FamilyIPv6
		}
		st, err := dp.Read(r.Context(), fam)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		opts := compat.Options{Counters: r.URL.Query().Get("counters") != ""}
		if t := r.URL.Query().Get("table"); t != "" {
			opts.Tables = []string{t}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, compat.Render(compat.Build(st), opts))
	})
	return mux
}

// serve listens on addr (inside the namespace at nsPath, if set) and serves
// handler until ctx ends. A listener that cannot be opened is logged, not
// fatal: rules matter more than metrics.
func serve(ctx context.Context, nsPath, addr string, handler http.Handler) {
	if addr == "" || addr == "0" {
		return
	}
	var l net.Listener
	err := netns.Do(nsPath, func() (err error) { l, err = net.Listen("tcp", addr); return err })
	if err != nil {
		klog.ErrorS(err, "Cannot serve", "address", addr)
		return
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Server stopped", "address", addr)
		}
	}()
}
