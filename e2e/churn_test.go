//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/e2e/tools/benchreport"
)

// churnConfig is NFTPROXY_CHURN ("services,minutes,changes per second",
// and optionally ",min sync period" for both daemons, 1s unless given):
// 1,000 Services for a quarter of a minute at 20 changes a second unless
// set (make bench: 30,000 for 10 minutes). NFTPROXY_CHURN_DAEMONS=nftproxy
// runs nftproxy alone.
func churnConfig(t *testing.T) (services int, d time.Duration, rate float64, minSync string) {
	services, minutes, rate := 1000, 0.25, 20.0
	if v := os.Getenv("NFTPROXY_CHURN"); v != "" {
		f := strings.Split(v, ",")
		var err1, err2, err3, err4 error
		if len(f) == 3 || len(f) == 4 {
			services, err1 = strconv.Atoi(f[0])
			minutes, err2 = strconv.ParseFloat(f[1], 64)
			rate, err3 = strconv.ParseFloat(f[2], 64)
		}
		if len(f) == 4 {
			minSync = f[3]
			_, err4 = time.ParseDuration(minSync)
		}
		if (len(f) != 3 && len(f) != 4) || err1 != nil || err2 != nil || err3 != nil || err4 != nil || services < 1 || minutes <= 0 || rate <= 0 {
			t.Fatalf("NFTPROXY_CHURN=%q: want services,minutes,rate[,min sync period]", v)
		}
	}
	return services, time.Duration(minutes * float64(time.Minute)), rate, minSync
}

// churnRun is what one daemon showed under churn.
type churnRun struct {
	// probe are the probe Service's moves' times to correct programming
	// (ms); missed counts the moves not followed within 10 s.
	probe  []float64
	missed int
	// changes counts the EndpointSlice updates the writer made.
	changes int
	// ownP50 and ownP99 estimate the daemon's own
	// kubeproxy_network_programming_duration_seconds over the churn (s).
	ownP50, ownP99 float64
	series         benchreport.ChurnSeries
	// cpu is the daemon's CPU seconds per minute of churn.
	cpu float64
}

var bucketRE = regexp.MustCompile(`kubeproxy_network_programming_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} ([0-9.e+-]+)`)

// programmingBuckets reads the daemon's network programming histogram.
func programmingBuckets(c *daemonCluster) map[float64]float64 {
	out := map[float64]float64{}
	_, body, err := httpGetStatus(c.Node, "http://127.0.0.1:10249/metrics")
	if err != nil {
		return out
	}
	for _, m := range bucketRE.FindAllStringSubmatch(body, -1) {
		le, err1 := strconv.ParseFloat(m[1], 64)
		v, err2 := strconv.ParseFloat(m[2], 64)
		if m[1] == "+Inf" {
			le, err1 = math.Inf(1), nil
		}
		if err1 == nil && err2 == nil {
			out[le] += v
		}
	}
	return out
}

// rssAndCPU returns a process's resident set (MiB) and its CPU seconds.
func rssAndCPU(pid int) (rss, cpu float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseFloat(string(m[1]), 64)
			rss = kb / 1024
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// utime and stime are fields 14 and 15, after the command's ")".
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 13 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			cpu = (u + s) / 100 // USER_HZ
		}
	}
	return rss, cpu
}

// churn runs d against c while a writer updates scale EndpointSlices at
// rate per second for d, and the probe Service's endpoint moves about once a
// second; then it stops d and removes its tables.
func churn(t *testing.T, c *daemonCluster, d proxyDaemon, client *harness.Pod, services int, dur time.Duration, rate float64) churnRun {
	request := func() (harness.Reply, error) {
		return harness.TCPRequest(client.NS, probeIP+":80", 300*time.Millisecond)
	}
	run := churnRun{series: benchreport.ChurnSeries{Daemon: d.name}}
	cmd := d.start(t)
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cleanupProxies(c.Node)
	}()
	limit := 2*time.Minute + time.Duration(services)*20*time.Millisecond
	if _, err := poll(limit, servedBy(request, "ep1")); err != nil {
		t.Fatalf("%s: the probe Service did not answer within %v: %v", d.name, limit, err)
	}
	time.Sleep(2 * time.Second) // past the first sync's throttle
	saveProfiles(t, c, d.name, "first-sync")
	defer saveProfiles(t, c, d.name, "end")
	before := programmingBuckets(c)
	_, cpu0 := rssAndCPU(cmd.Process.Pid)
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var changes atomic.Int64
	var firstErr atomic.Value
	// The writer: one update of a random scale slice every 1/rate s,
	// from four clients so that a slow reply does not lower the rate.
	work := make(chan int, 64)
	for range 4 {
		wg.Go(func() {
			for k := range work {
				i := 2 + rand.IntN(services)
				_, sl := harness.ScaleObjects(i, 10)
				sl.Endpoints = sl.Endpoints[:10-k%2]
				sl.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.admin.DiscoveryV1().EndpointSlices(sl.Namespace).Update(ctx, sl, metav1.UpdateOptions{})
				cancel()
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				changes.Add(1)
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		defer close(work)
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				select {
				case work <- k:
				default: // the clients are behind: the rate is what they did
				}
			}
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			rss, _ := rssAndCPU(cmd.Process.Pid)
			run.series.RSS = append(run.series.RSS, benchreport.Point{X: time.Since(start).Minutes(), Y: rss})
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	// The probe moves about once a second, on this goroutine.
	for k := 1; time.Since(start) < dur; k++ {
		target := []string{"ep1", "ep2"}[k%2]
		moved := time.Now()
		setProbeSlice(t, c, harness.PodIP(1+k%2))
		if _, err := pollEvery(10*time.Second, 5*time.Millisecond, firstServedBy(request, target)); err != nil {
			run.missed++
			t.Logf("%s: probe move %d (%.1f s into the churn) not followed within 10 s: %v", d.name, k, moved.Sub(start).Seconds(), err)
			sockets, _ := client.NS.Run("ss", "-s")
			tracked, _ := c.Node.Run("cat", "/proc/sys/net/netfilter/nf_conntrack_count")
			t.Logf("%s: the client's sockets: %s; connections the node tracks: %s", d.name, sockets, tracked)
			if d.name == "nftproxy" {
				_, how, _ := httpGetStatus(c.Node, "http://127.0.0.1:10249/explain?dst="+probeIP+":80&from=pod&src="+harness.PodIP(100))
				t.Logf("%s: the daemon's explain of the probe now:\n%s", d.name, how)
			}
		} else {
			ms := float64(time.Since(moved).Microseconds()) / 1000
			run.probe = append(run.probe, ms)
			run.series.Latency = append(run.series.Latency, benchreport.Point{X: time.Since(start).Minutes(), Y: ms})
		}
		// About once a second, with jitter, so that the moves do not
		// keep one phase against a daemon's once-a-second syncs.
		time.Sleep(time.Until(moved.Add(700*time.Millisecond + rand.N(600*time.Millisecond))))
	}
	close(stop)
	wg.Wait()
	setProbeSlice(t, c, harness.PodIP(1)) // where the next daemon expects it
	_, cpu1 := rssAndCPU(cmd.Process.Pid)
	run.cpu = (cpu1 - cpu0) / time.Since(start).Minutes()
	run.changes = int(changes.Load())
	if e := firstErr.Load(); e != nil {
		t.Logf("%s: an EndpointSlice update failed: %v", d.name, e)
	}
	var delta []benchreport.Bucket
	for le, v := range programmingBuckets(c) {
		delta = append(delta, benchreport.Bucket{UpperBound: le, Count: v - before[le]})
	}
	run.ownP50, run.ownP99 = benchreport.HistogramQuantile(0.5, delta), benchreport.HistogramQuantile(0.99, delta)
	return run
}

// firstServedBy is servedBy(request, target) that makes one request while
// another endpoint answers: a probe polled every 5 ms for a second would
// otherwise open 10,000 connections a move and run the client out of
// source ports (their TIME_WAIT), which showed as dial timeouts with
// either daemon.
func firstServedBy(request func() (harness.Reply, error), target string) func() error {
	all := servedBy(request, target)
	return func() error {
		r, err := request()
		if err != nil {
			return err
		}
		if r.Server != target {
			return errorf("answered by %s, want %s", r.Server, target)
		}
		return all()
	}
}

// TestChurnSideBySide runs nftproxy's daemon, then kube-proxy v1.37.2 in
// nftables mode, each in turn in the same node namespace against the same
// real API server holding N Services x 10 endpoints, while EndpointSlices
// change at a steady rate and a probe Service's endpoint moves about
// once a second (NFTPROXY_CHURN). Per daemon: the probe's time to correct
// programming (p50/p99, moves missed), the daemon's own
// kubeproxy_network_programming_duration_seconds (p50/p99 estimated from
// its buckets over the churn), its CPU and its resident memory over time.
// nftproxy must follow every probe move. With NFTPROXY_BENCH_OUT set it
// writes churn.md and churn.csv there (make bench draws churn.png from it).
func TestChurnSideBySide(t *testing.T) {
	services, dur, rate, minSync := churnConfig(t)
	kubeProxy, err := harness.Tool(".", "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	c, client, admin := newScaleCluster(t, services)
	// The probe opens a connection every few ms for the whole run.
	client.NS.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000")
	c.minSyncPeriod = minSync
	daemons := []proxyDaemon{nftproxyDaemon(c, admin), kubeProxyDaemon(c, kubeProxy, admin, "nftables")}
	if os.Getenv("NFTPROXY_CHURN_DAEMONS") == "nftproxy" {
		daemons = daemons[:1]
	}
	var rows []string
	var series []benchreport.ChurnSeries
	for i, d := range daemons {
		r := churn(t, c, d, client, services, dur, rate)
		rssFirst, rssLast, rssMax := math.NaN(), math.NaN(), 0.0
		if n := len(r.series.RSS); n > 0 {
			rssFirst, rssLast = r.series.RSS[0].Y, r.series.RSS[n-1].Y
			for _, p := range r.series.RSS {
				rssMax = math.Max(rssMax, p.Y)
			}
		}
		t.Logf("%s: %d changes in %v; probe p50 %.0f ms p99 %.0f ms, %d missed; own p50 %.3f s p99 %.3f s; RSS %.0f -> %.0f MiB (max %.0f, %+.2f MiB/min); CPU %.1f s/min",
			d.name, r.changes, dur, benchreport.Quantile(r.probe, 0.5), benchreport.Quantile(r.probe, 0.99), r.missed, r.ownP50, r.ownP99,
			rssFirst, rssLast, rssMax, benchreport.Slope(r.series.RSS), r.cpu)
		rows = append(rows, fmt.Sprintf("| %d | %s | %.1f | %d (%d missed) | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f / %.0f | %+.2f | %.1f |",
			services, d.name, float64(r.changes)/dur.Seconds(), len(r.probe)+r.missed, r.missed,
			benchreport.Quantile(r.probe, 0.5), benchreport.Quantile(r.probe, 0.99), 1000*r.ownP50, 1000*r.ownP99,
			rssFirst, rssLast, rssMax, benchreport.Slope(r.series.RSS), r.cpu))
		series = append(series, r.series)
		if i == 0 && (r.missed > 0 || len(r.probe) == 0 || len(r.series.RSS) == 0) {
			t.Errorf("nftproxy under churn: %d probe moves followed, %d missed, %d RSS samples", len(r.probe), r.missed, len(r.series.RSS))
		}
	}
	if out := os.Getenv("NFTPROXY_BENCH_OUT"); out != "" {
		text := "# Churn side by side: nftproxy and kube-proxy's nftables mode\n\n" +
			"Written by `make bench` (e2e TestChurnSideBySide) on " + time.Now().UTC().Format(time.RFC3339) + ", " + machineSummary() + ". " +
			fmt.Sprintf("Each daemon in turn, in the same node namespace, against the same real kube-apiserver holding %d Services x 10 endpoints, with --iptables-min-sync-period %s, for %v: ", services, c.benchMinSync(), dur) +
			fmt.Sprintf("a writer updates a random EndpointSlice %.0f times a second (one endpoint dropped or restored, with the last-change-trigger-time annotation), ", rate) +
			"and a probe Service's endpoint moves about once a second (0.7 to 1.3 s apart, so as not to keep one phase against the daemons' once-a-second syncs). Probe: from its move to all of ten requests answered by the new endpoint (polled every 5 ms). " +
			"Own metric: the daemon's kubeproxy_network_programming_duration_seconds over the churn, p50 / p99 estimated from its buckets as histogram_quantile does (the smallest bucket is 0.25 s). " +
			"RSS: VmRSS sampled every 5 s (first / last / max) and its least-squares slope; CPU: the daemon's user + system seconds per minute of churn. Plot: churn.png, drawn from churn.csv.\n\n" +
			"| Services | daemon | updates/s | probe moves | probe p50 / p99 (ms) | own p50 / p99 (ms) | RSS first / last / max (MiB) | RSS slope (MiB/min) | CPU (s/min) |\n" +
			"|---:|---|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(out, "churn.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		var csv bytes.Buffer
		if err := benchreport.WriteChurnCSV(&csv, series); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "churn.csv"), csv.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
