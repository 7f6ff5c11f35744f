package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// TestLoggingFlagsWinOverTheConfigFile: the config file's logging section
// is used, with kube-proxy's defaults, except for logging flags given on
// the command line (`--config ... -v=3`).
func TestLoggingFlagsWinOverTheConfigFile(t *testing.T) {
	o := newOptions()
	fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"-v=3"}); err != nil {
		t.Fatal(err)
	}
	cfg := &proxyv1alpha1.KubeProxyConfiguration{}
	cfg.Logging.Format = "json"
	cfg.Logging.Verbosity = 1
	o.loggingFromConfig(cfg, fs)
	if o.logging.Format != "json" || o.logging.Verbosity != 3 || o.logging.FlushFrequency.Duration.Duration <= 0 {
		t.Errorf("logging = %+v, want format json from the file, verbosity 3 from the flag, a default flush frequency", o.logging)
	}
}

// TestLoggingFlagsAreKubeProxys: component-base's logging flags exist and
// klog's older ones, which kube-proxy removed, do not.
func TestLoggingFlagsAreKubeProxys(t *testing.T) {
	fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	newOptions().addFlags(fs)
	for _, name := range []string{"v", "vmodule", "logging-format", "log-flush-frequency", "log-json-split-stream", "log-text-info-buffer-size"} {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s missing", name)
		}
	}
	for _, name := range []string{"logtostderr", "alsologtostderr", "log-dir", "log-file", "add_dir_header", "skip_headers", "stderrthreshold", "one_output"} {
		if fs.Lookup(name) != nil {
			t.Errorf("--%s is offered; kube-proxy removed it", name)
		}
	}
	code, _, stderr := captureRun(t, "render", "--objects", "../../deploy/examples/services.yaml", "--logging-format", "yaml")
	if code != 2 || !strings.Contains(stderr, "Unsupported log format") {
		t.Errorf("--logging-format yaml: exit %d, %q; want exit 2 and the format refused", code, stderr)
	}
	_ = logsapi.ResetForTest(nil)
}
