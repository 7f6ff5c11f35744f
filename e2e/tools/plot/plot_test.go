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
	if err := run(inputs{results: in}, out, ""); err != nil {
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
	if err := run(inputs{churn: in}, out, "1000 Services, 20 updates/s"); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, out)
}

func TestPlotSoak(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "soak.csv")
	text := "proxy,series,minutes,value\n" +
		"kube-proxy,rss_mib,0,60\nkube-proxy,rss_mib,0.25,61\nnftproxy,rss_mib,0,40\nnftproxy,cpu_cores,0,0.02\n" +
		"kube-proxy,cpu_cores,0,0.05\nkube-proxy,programming_p99_s,0.25,1.2\nnftproxy,programming_p99_s,0.25,0.4\n" +
		"nftproxy,sync_p99_ms,0.25,30\nkube-proxy,sync_p99_ms,0.25,90\n"
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := readSoak(in)
	if err != nil || len(runs) != 2 || runs[0].proxy != "kube-proxy" || len(runs[0].points["rss_mib"]) != 2 ||
		runs[1].points["sync_p99_ms"][0] != [2]float64{0.25, 30} {
		t.Fatalf("readSoak: %+v, %v", runs, err)
	}
	out := filepath.Join(dir, "soak.png")
	if err := run(inputs{soak: in}, out, "500 Services"); err != nil {
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
	badSoak := filepath.Join(dir, "badsoak.csv")
	if err := os.WriteFile(badSoak, []byte("proxy,series,minutes,value\nnftproxy,heap,0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in        inputs
		out, want string
	}{
		{inputs{}, "x.png", "one of"},
		{inputs{results: bad, churn: bad}, "x.png", "one of"},
		{inputs{churn: bad, soak: badSoak}, "x.png", "one of"},
		{inputs{churn: bad}, "x.png", "row 2"},
		{inputs{results: bad}, "x.png", "header"},
		{inputs{soak: badSoak}, "x.png", "row 2"},
		{inputs{soak: bad}, "x.png", "header"},
	} {
		if err := run(c.in, filepath.Join(dir, c.out), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%+v): %v, want an error with %q", c.in, err, c.want)
		}
	}
}
