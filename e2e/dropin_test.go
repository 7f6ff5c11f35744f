//go:build linux

package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// kubeProxyFlags lists kube-proxy's flags from its sources: the options
// it registers (cmd/kube-proxy/app/options.go), component-base's logging
// flags it adds, and --version.
func kubeProxyFlags(t *testing.T) []string {
	t.Helper()
	src := k8sSource(t, "cmd/kube-proxy/app/options.go")
	var flags []string
	for _, m := range regexp.MustCompile(`fs\.[A-Za-z0-9]+\((?:&[^,]+|[^,]*), *"([a-z0-9-]+)"`).FindAllStringSubmatch(src, -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 40 || !strings.Contains(src, "logsapi.AddFlags(") {
		t.Fatalf("found %d flags in kube-proxy's options.go; has it changed shape?", len(flags))
	}
	fs := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), fs)
	fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	if strings.Contains(k8sSource(t, "cmd/kube-proxy/app/server.go"), "verflag.AddFlags(") {
		flags = append(flags, "version")
	}
	return flags
}

// kubeProxyConfigFields lists the field paths of KubeProxyConfiguration
// v1alpha1 ("iptables.masqueradeBit"), expanding the structs of its own
// package and of component-base's ClientConnectionConfiguration; logging
// stays one field.
func kubeProxyConfigFields(t *testing.T) []string {
	t.Helper()
	structs := map[string]*ast.StructType{}
	for _, f := range []struct{ mod, path string }{
		{"k8s.io/kube-proxy", "config/v1alpha1/types.go"},
		{"k8s.io/component-base", "config/v1alpha1/types.go"},
	} {
		file, err := parser.ParseFile(token.NewFileSet(), f.path, moduleSource(t, f.mod, f.path), 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	var out []string
	var walk func(prefix string, st *ast.StructType)
	walk = func(prefix string, st *ast.StructType) {
		for _, fld := range st.Fields.List {
			if fld.Tag == nil {
				continue
			}
			tag := reflect.StructTag(strings.Trim(fld.Tag.Value, "`")).Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "" || name == "-" {
				continue
			}
			typ := fld.Type
			if sel, ok := typ.(*ast.SelectorExpr); ok {
				typ = sel.Sel
			}
			if id, ok := typ.(*ast.Ident); ok && structs[id.Name] != nil && name != "logging" {
				walk(prefix+name+".", structs[id.Name])
				continue
			}
			out = append(out, prefix+name)
		}
	}
	root := structs["KubeProxyConfiguration"]
	if root == nil {
		t.Fatal("no KubeProxyConfiguration in k8s.io/kube-proxy/config/v1alpha1")
	}
	walk("", root)
	return out
}

// TestEveryKubeProxyFlagAndFieldIsInTheTable: every flag and config
// field of kube-proxy is in docs/operating.md's drop-in table, and every flag
// nftproxy does not accept is marked "not applicable" there.
func TestEveryKubeProxyFlagAndFieldIsInTheTable(t *testing.T) {
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Flag by flag, config field by config field")
	if !ok {
		t.Fatal("docs/operating.md has no drop-in table")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	rows := strings.Split(section, "\n")
	rowOf := func(code string) string {
		for _, r := range rows {
			if strings.HasPrefix(r, "| ") && strings.Contains(r, "`"+code+"`") {
				return r
			}
		}
		return ""
	}
	help, _ := exec.Command(nftproxyBinary, "--help").CombinedOutput()
	flags := kubeProxyFlags(t)
	for _, f := range flags {
		name := "--" + f
		if len(f) == 1 {
			name = "-" + f
		}
		row := rowOf(name)
		if row == "" {
			t.Errorf("kube-proxy flag %s is not in docs/operating.md's drop-in table", name)
			continue
		}
		accepted := regexp.MustCompile(`(^|\s)(-` + regexp.QuoteMeta(f) + `, |--` + regexp.QuoteMeta(f) + `[ \[=])`).Match(help)
		if !accepted && !strings.Contains(row, "not applicable") {
			t.Errorf("nftproxy does not accept kube-proxy flag %s, and the table does not say it is not applicable: %s", name, row)
		}
	}
	fields := kubeProxyConfigFields(t)
	for _, f := range fields {
		if rowOf(f) == "" {
			t.Errorf("kube-proxy config field %s is not in docs/operating.md's drop-in table", f)
		}
	}
	for _, must := range []string{"iptables.masqueradeBit", "conntrack.tcpBeLiberal", "clientConnection.qps", "logging", "winkernel.enableDSR"} {
		if !slices.Contains(fields, must) {
			t.Errorf("field list from kube-proxy's sources lacks %s: %v", must, fields)
		}
	}
	t.Logf("%d kube-proxy flags and %d config fields checked", len(flags), len(fields))
}
