package testns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	pnetns "github.com/nftproxy/nftproxy/proxier/host/netns"
)

// T is the part of testing.TB that the helpers need, so that programs
// such as the demo can use them too.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// RequireRoot skips t when the test does not run as root. Tests that need
// the kernel call it first; CI runs as root, so they run there.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create network namespaces (CI runs it as root)")
	}
}

// NS is a named network namespace, as made by `ip netns add`.
type NS struct {
	Name string
}

// New creates a namespace whose name starts with prefix, brings its
// loopback up and registers its removal with t.Cleanup.
func New(t T, prefix string) *NS {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := &NS{Name: prefix + "-" + hex.EncodeToString(b[:])}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns.Name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.Name, err, out)
		}
	})
	ns.MustRun(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Path returns the namespace's bind-mount path.
func (ns *NS) Path() string { return "/run/netns/" + ns.Name }

// Command returns a command that runs inside the namespace.
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return ns.CommandContext(context.Background(), name, args...)
}

// CommandContext is Command, killed when ctx ends.
func (ns *NS) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output.
func (ns *NS) Run(name string, args ...string) (string, error) {
	out, err := ns.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), ns.Name, err, out)
	}
	return string(out), nil
}

// MustRun is Run that fails the test on error.
func (ns *NS) MustRun(t T, name string, args ...string) string {
	t.Helper()
	out, err := ns.Run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Do runs fn on an OS thread that has entered the namespace. Sockets that
// fn creates belong to the namespace and stay usable after Do returns.
func (ns *NS) Do(fn func() error) error { return pnetns.Do(ns.Path(), fn) }
