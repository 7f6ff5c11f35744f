package metrics

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// KubernetesVersion is the kube-proxy release whose behaviour, flags and
// metrics nftproxy matches.
const KubernetesVersion = "v1.37.2"

// BuildInfoVersion is the git_version label of kubernetes_build_info:
// the kube-proxy release nftproxy matches, with nftproxy's own version as
// semantic-version build metadata ("v1.37.2+nftproxy.0.9.1"), so that a
// dashboard of kube-proxy versions shows both and sorts it with v1.37.2.
func BuildInfoVersion(nftproxyVersion string) string {
	v := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.TrimPrefix(nftproxyVersion, "v"))
	return KubernetesVersion + "+nftproxy." + v
}

// RegisterBuildInfo adds kubernetes_build_info, with the labels and help
// of the gauge every Kubernetes component serves, to m's registry. The
// commit, tree state and date come from the Go toolchain's VCS stamp;
// component-base's own gauge would say v0.0.0 unless its version was set
// at link time.
func (m *Metrics) RegisterBuildInfo(nftproxyVersion string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubernetes_build_info",
		Help: "[BETA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running."},
		[]string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	commit, tree, date := "", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				tree = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			case "vcs.time":
				date = s.Value
			}
		}
	}
	m.Registry.MustRegister(g)
	g.WithLabelValues("1", "37", BuildInfoVersion(nftproxyVersion), commit, tree, date, runtime.Version(), runtime.Compiler, runtime.GOOS+"/"+runtime.GOARCH).Set(1)
}
