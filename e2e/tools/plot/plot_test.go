package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkPNG fails unless path is a PNG of two panels' size.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width < 500 || cfg.Height < 200 {
		t.Errorf("%s: %+v, %v", path, cfg, err)
	}
}

func TestPlotResults(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.csv")
	text := "section,dataplane,services,metric,value\n" +
		"control-plane,nftproxy,100,full_load_s,0.1\ncontrol-plane,nftproxy,30000,full_load_s,9\n" +
		"control-plane,nft -f,30000,full_load_s,120\ncontrol-plane,nft -f,30000,timed_out,1\n" +
		"data-plane,nftproxy,100,added_cost_us,2\ndata-plane,nftproxy,30000,added_cost_us,3\n"
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	samples, err := readResults(in)
	if err != nil || len(samples) != 6 || samples[1].services != 30000 || samples[1].value != 9 {
		t.Fatalf("readResults: %+v, %v", samples, err)
	}
	out := filepath.Join(dir, "results.png")
	if err := run(in, "", out, ""); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, out)
}

func TestPlotChurn(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "churn.csv")
	text := "daemon,series,minutes,value\n" +
		"nftproxy,rss,0,80\nnftproxy,rss,0.5,82\nnftproxy,latency,0.1,500\n" +
		"kube-proxy nftables,rss,0,120\nkube-proxy nftables,latency,0.2,900\n"
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	series, err := readChurn(in)
	if err != nil || len(series) != 2 || len(series[0].rss) != 2 || series[1].latency[0] != [2]float64{0.2, 900} {
		t.Fatalf("readChurn: %+v, %v", series, err)
	}
	out := filepath.Join(dir, "churn.png")
	if err := run("", in, out, "1000 Services, 20 updates/s"); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, out)
}

func TestRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("daemon,series,minutes,value\nnftproxy,heap,0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ results, churn, out, want string }{
		{"", "", "x.png", "one of"},
		{bad, bad, "x.png", "one of"},
		{"", bad, "x.png", "row 2"},
		{bad, "", "x.png", "header"},
	} {
		if err := run(c.results, c.churn, filepath.Join(dir, c.out), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q, %q): %v, want an error with %q", c.results, c.churn, err, c.want)
		}
	}
}
