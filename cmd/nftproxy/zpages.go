package main

import (
	"fmt"
	"html"
	"math/rand/v2"
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
// ComponentStatusz, on by default in v1.37). The structured (JSON) forms
// are not served: a request that accepts only those gets 406.
func installZPages(mux *http.ServeMux, fs *pflag.FlagSet, started time.Time, paths []string) {
	delim := zpageDelimiters[rand.IntN(len(zpageDelimiters))]
	var flagz strings.Builder
	flagz.WriteString(zpageHeader("flagz"))
	if fs != nil {
		var names []string
		values := map[string]string{}
		fs.VisitAll(func(f *pflag.Flag) {
			names = append(names, f.Name)
			values[f.Name] = f.Value.String()
		})
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(&flagz, "%s%s%s\n", n, delim, values[n])
		}
	}
	flagzText := flagz.String()
	mux.HandleFunc("/flagz", plainText(func() string { return flagzText }))
	paths = slices.Sorted(slices.Values(append(slices.Clone(paths), "/flagz", "/statusz")))
	mux.HandleFunc("/statusz", plainText(func() string {
		up := int64(time.Since(started).Seconds())
		d := html.EscapeString(delim)
		return zpageHeader("statusz") + fmt.Sprintf("\nStarted%[1]s %[2]s\nUp%[1]s %[3]s\nGo version%[1]s %[4]s\nBinary version%[1]s %[5]s\n\nPaths%[1]s %[6]s\n",
			d, started.Format(time.UnixDate), fmt.Sprintf("%d hr %02d min %02d sec", up/3600, (up/60)%60, up%60),
			runtime.Version(), html.EscapeString(metrics.BuildInfoVersion(version)), strings.Join(paths, " "))
	}))
}

// plainText serves body's text to a request that accepts text/plain (or
// says nothing), and 406 to one that accepts only other types.
func plainText(body func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Accept"); a != "" && !strings.Contains(a, "text/plain") && !strings.Contains(a, "*/*") && !strings.Contains(a, "text/*") {
			http.Error(w, "only text/plain is served", http.StatusNotAcceptable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, body())
	}
}
