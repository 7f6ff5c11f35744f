//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// notProvided are kube-proxy iptables-mode metrics nftproxy does not
// serve, with the reason (docs/operating.md: Health, metrics and config).
var notProvided = map[string]string{}

// kubeProxyIPTablesMetrics returns the names of the metrics kube-proxy
// v1.37.2 registers in iptables mode, read from its source in the module
// the oracle requires (pkg/proxy/metrics: the collectors' names and the
// ones RegisterMetrics registers for every mode and for iptables mode).
func kubeProxyIPTablesMetrics(t *testing.T) []string {
	t.Helper()
	const path = "pkg/proxy/metrics/metrics.go"
	f, err := parser.ParseFile(token.NewFileSet(), path, k8sSource(t, path), 0)
	if err != nil {
		t.Fatal(err)
	}
	str := func(e ast.Expr) string {
		if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
			s, _ := strconv.Unquote(l.Value)
			return s
		}
		return ""
	}
	// Collector variable -> metric name.
	byVar := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		call, ok := vs.Values[0].(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" {
			byVar[vs.Names[0].Name] = str(call.Args[0])
			return true
		}
		opts, ok := call.Args[0].(*ast.UnaryExpr)
		if !ok {
			return true
		}
		lit, ok := opts.X.(*ast.CompositeLit)
		if !ok {
			return true
		}
		var sub, name string
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch kv.Key.(*ast.Ident).Name {
			case "Name":
				name = str(kv.Value)
			case "Subsystem":
				if id, ok := kv.Value.(*ast.Ident); ok && id.Name == "kubeProxySubsystem" {
					sub = "kubeproxy"
				}
			}
		}
		if name != "" {
			if sub != "" {
				name = sub + "_" + name
			}
			byVar[vs.Names[0].Name] = name
		}
		return true
	})
	var names []string
	register := func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "MustRegister" && sel.Sel.Name != "CustomMustRegister") {
			return true
		}
		if id, ok := call.Args[0].(*ast.Ident); ok {
			name := byVar[id.Name]
			if name == "" && strings.HasSuffix(id.Name, "Collector") {
				// An nfacct collector built in place from a description.
				name = "nfacct:" + id.Name
			}
			names = append(names, name)
		}
		return true
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "RegisterMetrics" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				iptables := false
				for _, e := range n.List {
					if sel, ok := e.(*ast.SelectorExpr); ok && sel.Sel.Name == "ProxyModeIPTables" {
						iptables = true
					}
				}
				if iptables {
					for _, st := range n.Body {
						ast.Inspect(st, register)
					}
				}
				return false
			case *ast.CallExpr:
				return register(n)
			}
			return true
		})
	}
	// The nfacct collectors are built from these descriptions.
	for i, n := range names {
		switch n {
		case "nfacct:iptablesCTStateInvalidDroppedMetricCollector":
			names[i] = byVar["iptablesCTStateInvalidDroppedPacketsDescription"]
		case "nfacct:localhostNodePortsAcceptedMetricsCollector":
			names[i] = byVar["localhostNodePortsAcceptedPacketsDescription"]
		}
	}
	if len(names) < 15 || slices.Contains(names, "") {
		t.Fatalf("could not read kube-proxy's metrics from %s: %q", path, names)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestMetricNamesMatchKubeProxy: every metric kube-proxy registers in
// iptables mode is on nftproxy's /metrics from the start, or listed in
// notProvided with the reason; so are the metrics every Kubernetes
// component serves (build info, client-go, Go runtime, process).
func TestMetricNamesMatchKubeProxy(t *testing.T) {
	want := kubeProxyIPTablesMetrics(t)
	ns := nodeNamespace(t, "nfp-met")
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), harness.ClusterIPService("ns", "web", "10.96.0.96", httpPort))
	startNftproxy(t, filepath.Join(dir, "nftproxy.log"), "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0")
	var body string
	eventually(t, "metrics served", 10*time.Second, func() error {
		code, b, err := httpGetStatus(ns, "http://127.0.0.1:10249/metrics")
		// The series exists from the start with 0; a value says the first
		// sync is done, and with it the packet counters kube-proxy also
		// creates in its first sync.
		if err == nil && (code != 200 || !synced(b)) {
			err = errorf("status %d, no sync done yet", code)
		}
		body = b
		return err
	})
	for _, path := range []string{"/healthz", "/healthz/ping"} {
		if code, b, err := httpGetStatus(ns, "http://127.0.0.1:10249"+path); err != nil || code != 200 || b != "ok" {
			t.Errorf("metrics port %s = %d %q %v, want 200 \"ok\" as kube-proxy's", path, code, b, err)
		}
	}
	if code, _, err := httpGetStatus(ns, "http://127.0.0.1:10249/metrics/slis"); err != nil || code != 200 {
		t.Errorf("metrics port /metrics/slis = %d %v, want 200 as kube-proxy's", code, err)
	}
	served := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && f[1] == "HELP" {
			served[f[2]] = true
		}
	}
	for _, name := range append(want, "kubernetes_build_info", "go_goroutines", "process_resident_memory_bytes") {
		if served[name] {
			if _, ok := notProvided[name]; ok {
				t.Errorf("%s is served now: remove it from notProvided", name)
			}
			continue
		}
		if why, ok := notProvided[name]; ok {
			t.Logf("not provided: %s (%s)", name, why)
			continue
		}
		t.Errorf("kube-proxy's metric %s is not on nftproxy's /metrics", name)
	}
	// Each is in docs/operating.md's drop-in table.
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "Metric by metric")
	table, _, _ = strings.Cut(table, "\n### ")
	for _, name := range want {
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("kube-proxy's metric %s is not in docs/operating.md's metric table", name)
		}
	}
	t.Logf("%d kube-proxy iptables-mode metrics checked", len(want))
}

// synced reports whether a /metrics body has a nonzero last sync timestamp.
func synced(body string) bool {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{") && !strings.HasSuffix(l, " 0") {
			return true
		}
	}
	return false
}
