package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format json, as kube-proxy has it
	"k8s.io/klog/v2"

	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// addLoggingFlags adds kube-proxy's logging flags (component-base's: -v,
// --vmodule, --logging-format, --log-flush-frequency and the format
// options). klog's older flags (--logtostderr, --log-dir, ...) are gone, as
// from kube-proxy.
func (o *options) addLoggingFlags(fs *pflag.FlagSet) {
	logsapi.AddFlags(o.logging, fs)
}

// loggingFromConfig takes the config file's logging section, except for
// the logging flags given on the command line, which win (kube-proxy's
// rule, so that `--config ... -v=5` works).
func (o *options) loggingFromConfig(cfg *proxyv1alpha1.KubeProxyConfiguration, fs *pflag.FlagSet) {
	fromFile := cfg.Logging.DeepCopy()
	// kube-proxy's defaulting of the section (a flush frequency of 0
	// becomes 5 s, an empty format "text").
	logsapi.SetRecommendedLoggingConfiguration(fromFile)
	flags := pflag.NewFlagSet("", pflag.ContinueOnError)
	logsapi.AddFlags(fromFile, flags)
	fs.Visit(func(f *pflag.Flag) {
		if flags.Lookup(f.Name) != nil {
			_ = flags.Set(f.Name, f.Value.String())
		}
	})
	o.logging = fromFile
}

// applyLogging validates the logging configuration and applies it to klog,
// with the logging feature gates of --feature-gates. It can be applied once
// per process with different settings.
func (o *options) applyLogging() error {
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		return err
	}
	gates := map[string]bool{}
	known := fg.GetAll()
	for name, on := range o.kp.featureGates {
		if _, ok := known[featuregate.Feature(name)]; ok {
			gates[name] = on
		}
	}
	if err := fg.SetFromMap(gates); err != nil {
		return usageError{fmt.Errorf("--feature-gates: %w", err)}
	}
	if err := logsapi.ValidateAndApply(o.logging, fg); err != nil {
		return usageError{fmt.Errorf("logging: %w", err)}
	}
	return nil
}

// logStartup logs, at V(0), what kube-proxy logs when it starts: the
// version, and the settings that decide the rules.
func (o *options) logStartup(command string) {
	klog.InfoS("Version info", "version", version, "command", command)
	klog.InfoS("Using iptables mode semantics on nftables", "proxyMode", o.proxyMode, "clusterCIDR", o.clusterCIDR,
		"nodePortAddresses", o.nodePortAddresses, "masqueradeBit", o.masqueradeBit, "masqueradeAll", o.masqueradeAll,
		"syncPeriod", o.syncPeriod, "minSyncPeriod", o.minSyncPeriod, "localhostNodePorts", o.localhostNodePorts)
}
