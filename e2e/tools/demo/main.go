//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/nftproxy/nftproxy/e2e/harness"
)

// runner implements netns.T for a program: failures print and unwind.
type runner struct{ cleanups []func() }

type failed struct{}

func (r *runner) Helper()          {}
func (r *runner) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *runner) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...)
}
func (r *runner) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"demo:"}, args...)...)
	panic(failed{})
}
func (r *runner) Fatalf(format string, args ...any) { r.Errorf(format, args...); panic(failed{}) }
func (r *runner) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

func main() {
	nftproxy := flag.String("nftproxy", "bin/nftproxy", "nftproxy binary")
	echo := flag.String("echo", "bin/echoserver", "echo server binary")
	objects := flag.String("objects", "deploy/examples/services.yaml", "objects to program")
	n := flag.Int("n", 300, "connections to send per protocol")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: needs root (it creates network namespaces)")
		os.Exit(2)
	}
	r := &runner{}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		r.cleanup()
		os.Exit(130)
	}()
	code := 0
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(failed); !ok {
					r.cleanup()
					panic(v)
				}
				code = 1
			}
			r.cleanup()
		}()
		demo(r, *nftproxy, *echo, *objects, *n)
	}()
	os.Exit(code)
}

func demo(r *runner, nftproxy, echo, objects string, n int) {
	tp := harness.NewTopology(r, echo)
	for i := 1; i <= 3; i++ {
		tp.AddPod(fmt.Sprintf("ep%d", i), harness.PodIP(i), []int{8080}, []int{5353})
	}
	client := tp.AddPod("client", harness.PodIP(100), nil, nil)
	fmt.Printf("topology: node %s, pods ep1-ep3 at %s-%s, client pod %s, external host %s\n\n",
		tp.Node.Name, harness.PodIP(1), harness.PodIP(3), harness.PodIP(100), harness.ExternalIP)

	start := time.Now()
	out, err := exec.Command(nftproxy, "sync", "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR).CombinedOutput()
	if err != nil {
		r.Fatalf("nftproxy sync: %v\n%s", err, out)
	}
	// The command as it really ran: pasted without --netns it would
	// program the host.
	fmt.Printf("$ nftproxy sync --objects %s --netns %s --cluster-cidr %s   (%v)\n\n", objects, tp.Node.Path(), harness.ClusterCIDR, time.Since(start).Round(time.Millisecond))

	for _, proto := range []string{"tcp", "udp"} {
		addr := "10.96.0.10:80"
		if proto == "udp" {
			addr = "10.96.0.10:53"
		}
		counts := map[string]int{}
		for i := 0; i < n; i++ {
			var rep harness.Reply
			var err error
			if proto == "tcp" {
				rep, err = harness.TCPRequest(client.NS, addr, 3*time.Second)
			} else {
				rep, err = harness.UDPRequest(client.NS, addr, 3*time.Second)
			}
			if err != nil {
				r.Fatalf("%s request to %s: %v", proto, addr, err)
			}
			counts[rep.Server]++
		}
		fmt.Printf("%d new %s connections from the client pod to %s (demo/echo):\n", n, proto, addr)
		var chi float64
		exp := float64(n) / 3
		for _, name := range []string{"ep1", "ep2", "ep3"} {
			c := counts[name]
			chi += (float64(c) - exp) * (float64(c) - exp) / exp
			fmt.Printf("  %-4s %4d  %5.1f%%  %s\n", name, c, 100*float64(c)/float64(n), bar(c, n))
		}
		fmt.Printf("  chi-square against uniform: %.2f (uniform at p > 0.001 while below 13.82)\n\n", chi)
	}

	_, err = harness.DialTCP(client.NS, "10.96.0.20:80", 3*time.Second)
	fmt.Printf("demo/empty (10.96.0.20:80, no endpoints): %v (refused: %v)\n\n", err, errors.Is(err, syscall.ECONNREFUSED))

	rep, err := harness.TCPRequest(tp.External, "10.96.0.10:80", 3*time.Second)
	if err == nil {
		fmt.Printf("from the external host %s: answered by %s, which saw source %s (masqueraded)\n\n", harness.ExternalIP, rep.Server, rep.Source.Addr())
	}

	fmt.Println("$ nft list table ip kube-proxy   (in the node namespace)")
	fmt.Print(tp.Node.MustRun(r, "nft", "list", "table", "ip", "kube-proxy"))
	fmt.Println("\ncleaning up the namespaces")
}

func bar(c, n int) string {
	return string(slices.Repeat([]byte("#"), c*60/n))
}
