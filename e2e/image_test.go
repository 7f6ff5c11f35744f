//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageBuildsWithoutADaemon builds the image as `make image` does (a
// static, version-stamped binary in an OCI archive, no container daemon),
// and checks the archive: its entrypoint, that /usr/local/bin/kube-proxy
// leads to the binary, that the binary in it runs and reports the stamped
// version, and its size.
func TestImageBuildsWithoutADaemon(t *testing.T) {
	dir := t.TempDir()
	bin, archive := filepath.Join(dir, "nftproxy"), filepath.Join(dir, "image.tar")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v0.0.0-e2e", "-o", bin, "./cmd/nftproxy")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	mk := exec.Command("go", "run", "./deploy/image", "-binary", bin, "-arch", "amd64", "-tag", "nftproxy:e2e", "-version", "v0.0.0-e2e", "-o", archive)
	mk.Dir = ".."
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image: %v\n%s", err, out)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		files[h.Name], _ = io.ReadAll(tr)
	}
	var index struct {
		Manifests []struct{ Digest string }
	}
	json.Unmarshal(files["index.json"], &index)
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if len(index.Manifests) != 1 || json.Unmarshal(blob(index.Manifests[0].Digest), &manifest) != nil || len(manifest.Layers) != 1 {
		t.Fatalf("not an OCI archive with one image of one layer: %s", files["index.json"])
	}
	var config struct {
		Config struct{ Entrypoint []string }
	}
	json.Unmarshal(blob(manifest.Config.Digest), &config)
	if strings.Join(config.Config.Entrypoint, " ") != "/usr/local/bin/nftproxy" {
		t.Errorf("entrypoint %v", config.Config.Entrypoint)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	lt := tar.NewReader(zr)
	link := ""
	for h, err := lt.Next(); err == nil; h, err = lt.Next() {
		switch {
		case h.Typeflag == tar.TypeSymlink && h.Name == "usr/local/bin/kube-proxy":
			link = h.Linkname
		case h.Typeflag == tar.TypeReg && h.Name == "usr/local/bin/nftproxy":
			b, _ := io.ReadAll(lt)
			if err := os.WriteFile(filepath.Join(root, "nftproxy"), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if link != "nftproxy" {
		t.Errorf("usr/local/bin/kube-proxy -> %q, want nftproxy", link)
	}
	out, err := exec.Command(filepath.Join(root, "nftproxy"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v0.0.0-e2e") {
		t.Errorf("the image's binary --version: %v %s", err, out)
	}
	const maxSize = 40 << 20
	if len(data) > maxSize {
		t.Errorf("image archive is %d bytes, want at most %d", len(data), maxSize)
	}
	t.Logf("image archive %.1f MiB", float64(len(data))/(1<<20))
}
