package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/proxier/metrics"
)

// TestProfilingServesPprofOnlyWhenEnabled: --profiling (enableProfiling)
// serves Go's profiles on the metrics server, as kube-proxy does; without
// it there is nothing under /debug/pprof/.
func TestProfilingServesPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		mux := metricsMux(metrics.New(), nil, "", "iptables", nil, enabled)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		served := rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "heap")
		if served != enabled {
			t.Errorf("profiling=%v: GET /debug/pprof/ gave %d", enabled, rec.Code)
		}
		rec = httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
		if (rec.Code == http.StatusOK) != enabled {
			t.Errorf("profiling=%v: GET /debug/pprof/heap gave %d", enabled, rec.Code)
		}
	}
}

// TestExpensiveRequestsAreLimited: while the slots are taken, another
// expensive request is answered 429 with Retry-After at once; once one
// ends, the next is served.
func TestExpensiveRequestsAreLimited(t *testing.T) {
	limit := newConcurrencyLimit(1)
	release := make(chan struct{})
	started := make(chan struct{})
	h := limit.wrap(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") != "" {
			close(started)
			<-release
		}
		w.Write([]byte("ok"))
	})
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest("GET", "/explain?block=1", nil))
		done <- rec.Code
	}()
	<-started
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/explain", nil))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a request beyond the limit got %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Errorf("the first request got %d", code)
	}
	rec = httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/explain", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("after the slot was freed: %d", rec.Code)
	}
}
