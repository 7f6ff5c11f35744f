package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestZPagesAsKubeProxy: /flagz lists every flag with its value and
// /statusz the start, uptime, versions and paths, under component-base's
// header, in text, and as kube-proxy's structured kinds when asked so.
func TestZPagesAsKubeProxy(t *testing.T) {
	opts := newOptions()
	fs := pflag.NewFlagSet("nftproxy", pflag.ContinueOnError)
	opts.addFlags(fs)
	if err := fs.Parse([]string{"--hostname-override", "node-a", "--iptables-sync-period", "45s"}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	installZPages(mux, fs, time.Now().Add(-3723*time.Second), []string{"/metrics", "/healthz"})
	get := func(path, accept string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := get("/flagz", "")
	if code != 200 || !strings.HasPrefix(body, "\nkube-proxy flagz\nWarning: This endpoint is not meant to be machine parseable") {
		t.Fatalf("/flagz: %d %q", code, body)
	}
	for _, want := range []string{`(?m)^hostname-override(:|: |=| )node-a$`, `(?m)^iptables-sync-period(:|: |=| )45s$`, `(?m)^masquerade-all(:|: |=| )false$`} {
		if !regexp.MustCompile(want).MatchString(body) {
			t.Errorf("/flagz lacks %s:\n%s", want, body)
		}
	}
	code, body = get("/statusz", "text/plain")
	for _, want := range []string{`\nkube-proxy statusz\n`, `Up(:|: |=| ) 1 hr 02 min 03 sec`, `Go version(:|: |=| ) ` + regexp.QuoteMeta(runtime.Version()),
		`Binary version(:|: |=| ) v1\.37\.2\+nftproxy\.`, `Paths(:|: |=| ) /flagz /healthz /metrics /statusz`} {
		if code != 200 || !regexp.MustCompile(want).MatchString(body) {
			t.Errorf("/statusz (%d) lacks %s:\n%s", code, want, body)
		}
	}
	if code, _ := get("/statusz", "application/json"); code != http.StatusNotAcceptable {
		t.Errorf("/statusz for plain JSON: %d, want 406 (kube-proxy serves only its kinds)", code)
	}
	var flagz struct {
		Kind, APIVersion string
		Flags            map[string]string
	}
	code, body = get("/flagz", "application/json;as=Flagz;g=config.k8s.io;v=v1beta1")
	if err := json.Unmarshal([]byte(body), &flagz); code != 200 || err != nil || flagz.Kind != "Flagz" || flagz.APIVersion != "config.k8s.io/v1beta1" || flagz.Flags["hostname-override"] != "node-a" {
		t.Errorf("/flagz as JSON: %d %v %+v", code, err, flagz)
	}
	var statusz struct {
		Kind          string
		UptimeSeconds int64
		Paths         []string
	}
	code, body = get("/statusz", "application/json;as=Statusz;g=config.k8s.io;v=v1beta1")
	if err := json.Unmarshal([]byte(body), &statusz); code != 200 || err != nil || statusz.Kind != "Statusz" || statusz.UptimeSeconds < 3723 || len(statusz.Paths) != 4 {
		t.Errorf("/statusz as JSON: %d %v %+v", code, err, statusz)
	}
}

// TestUserAgentAsKubeProxys: started as kube-proxy (the DaemonSet's
// path), the API client's agent starts as kube-proxy's does.
func TestUserAgentAsKubeProxys(t *testing.T) {
	if got := userAgent("/usr/local/bin/kube-proxy"); !strings.HasPrefix(got, "kube-proxy/v1.37.2+nftproxy.") || !strings.HasSuffix(got, ") nftproxy") {
		t.Errorf("user agent %q", got)
	}
}
