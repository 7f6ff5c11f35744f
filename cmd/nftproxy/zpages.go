package main

import (
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"math/rand/v2"
	"mime"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nftproxy/nftproxy/proxier/metrics"
)

// zpageDelimiters are the separators kube-proxy's /flagz and /statusz pick
// from at random, per process, so that no one parses them.
var zpageDelimiters = []string{":", ": ", "=", " "}

// zpageHeader is the first lines of both pages, as component-base writes
// them.
func zpageHeader(page string) string {
	return "\nkube-proxy " + page + "\nWarning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.\n"
}

// installZPages adds /flagz (every flag of fs with its value) and /statusz
// (start time, uptime, Go and binary version, the mux's paths) to mux, in
// the text form kube-proxy serves them (ComponentFlagz and
// ComponentStatusz, on by default in v1.37), and the structured forms
// (see zpage).
func installZPages(mux *http.ServeMux, fs *pflag.FlagSet, started time.Time, paths []string) {
	delim := zpageDelimiters[rand.IntN(len(zpageDelimiters))]
	var flagz strings.Builder
	flagz.WriteString(zpageHeader("flagz"))
	flags := flagValues(fs)
	for _, n := range slices.Sorted(maps.Keys(flags)) {
		fmt.Fprintf(&flagz, "%s%s%s\n", n, delim, flags[n])
	}
	flagzText := flagz.String()
	mux.HandleFunc("/flagz", zpage("Flagz", func() string { return flagzText }, func() map[string]any {
		return map[string]any{"flags": flags}
	}))
	paths = slices.Sorted(slices.Values(append(slices.Clone(paths), "/flagz", "/statusz")))
	mux.HandleFunc("/statusz", zpage("Statusz", func() string {
		up := int64(time.Since(started).Seconds())
		d := html.EscapeString(delim)
		return zpageHeader("statusz") + fmt.Sprintf("\nStarted%[1]s %[2]s\nUp%[1]s %[3]s\nGo version%[1]s %[4]s\nBinary version%[1]s %[5]s\n\nPaths%[1]s %[6]s\n",
			d, started.Format(time.UnixDate), fmt.Sprintf("%d hr %02d min %02d sec", up/3600, (up/60)%60, up%60),
			runtime.Version(), html.EscapeString(metrics.BuildInfoVersion(version)), strings.Join(paths, " "))
	}, func() map[string]any {
		return map[string]any{"startTime": started.UTC().Format(time.RFC3339), "uptimeSeconds": int64(time.Since(started).Seconds()),
			"goVersion": runtime.Version(), "binaryVersion": metrics.BuildInfoVersion(version), "paths": paths}
	}))
}

// flagValues returns every flag of fs (nil: none) with its value.
func flagValues(fs *pflag.FlagSet) map[string]string {
	out := map[string]string{}
	if fs != nil {
		fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = f.Value.String() })
	}
	return out
}

// zpage serves the text form to a request that accepts text/plain (or
// says nothing), the structured form (kind, in config.k8s.io v1beta1 or
// v1alpha1) to one that asks for it as kube-proxy's clients do
// ("application/json;as=Flagz;g=config.k8s.io;v=v1beta1"), and 406 to
// any other.
func zpage(kind string, text func() string, fields func() map[string]any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		accept := r.Header.Get("Accept")
		if strings.TrimSpace(accept) == "" {
			accept = "text/plain"
		}
		for _, part := range strings.Split(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch {
			case (mt == "text/plain" || mt == "text/*" || mt == "*/*") && params["as"] == "":
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				fmt.Fprint(w, text())
				return
			case mt == "application/json" && params["as"] == kind && params["g"] == "config.k8s.io" && (params["v"] == "v1beta1" || params["v"] == "v1alpha1"):
				obj := fields()
				obj["kind"], obj["apiVersion"] = kind, "config.k8s.io/"+params["v"]
				obj["metadata"] = map[string]string{"name": "kube-proxy"}
				w.Header().Set("Content-Type", fmt.Sprintf("application/json;as=%s;g=config.k8s.io;v=%s", kind, params["v"]))
				_ = json.NewEncoder(w).Encode(obj)
				return
			}
		}
		http.Error(w, "only text/plain and application/json;as="+kind+";g=config.k8s.io;v=v1beta1 are served", http.StatusNotAcceptable)
	}
}
