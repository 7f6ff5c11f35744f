package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readArchive returns the files of an OCI archive by name.
func readArchive(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
}

// TestImageArchiveIsAValidOCIImage: the index names the tag and platform,
// every descriptor's digest and size match its blob, the config runs
// /usr/local/bin/nftproxy, and the layer holds the binary (executable) and
// kube-proxy as a symlink to it; the same input gives the same bytes.
func TestImageArchiveIsAValidOCIImage(t *testing.T) {
	bin := []byte("\x7fELF fake nftproxy")
	var buf bytes.Buffer
	spec := Spec{Binary: bin, Arch: "arm64", Tag: "registry.example/nftproxy:v9", Version: "v9"}
	if err := Write(&buf, spec); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, buf.Bytes())
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	blob := func(d descriptor) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok || digest(b) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s missing or not matching its descriptor", d.Digest)
		}
		return b
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	m := index.Manifests[0]
	if m.Annotations["org.opencontainers.image.ref.name"] != spec.Tag || m.Platform == nil || m.Platform.Architecture != "arm64" {
		t.Errorf("index manifest %+v", m)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(m), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var config struct {
		Architecture string
		Config       struct {
			Entrypoint []string
			Labels     map[string]string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(manifest.Config), &config); err != nil {
		t.Fatal(err)
	}
	if config.Architecture != "arm64" || len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != BinaryPath || config.Config.Labels["org.opencontainers.image.version"] != "v9" {
		t.Errorf("config %+v", config)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != digest(raw) {
		t.Errorf("diff_ids %v do not match the layer", config.RootFS.DiffIDs)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		seen[h.Name] = true
		switch h.Name {
		case BinaryPath[1:]:
			data, _ := io.ReadAll(tr)
			if h.Mode != 0o755 || !bytes.Equal(data, bin) {
				t.Errorf("binary mode %o, %d bytes", h.Mode, len(data))
			}
		case KubeProxyPath[1:], "usr/local/bin/iptables-save", "usr/local/bin/ip6tables-save":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "nftproxy" {
				t.Errorf("%s is %c -> %q, want a symlink to nftproxy", h.Name, h.Typeflag, h.Linkname)
			}
		}
	}
	if !seen[BinaryPath[1:]] || !seen[KubeProxyPath[1:]] || !seen["usr/local/bin/iptables-save"] || !seen["usr/local/bin/ip6tables-save"] {
		t.Errorf("layer holds %v", seen)
	}
	var again bytes.Buffer
	Write(&again, spec)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("the same input gave a different archive")
	}
}

// TestRootfsImageHoldsTheTree: with Rootfs, the layer is the folder's tree
// (files with their modes, folders, symlinks as links) and the entrypoint
// is the one given; the same tree gives the same archive.
func TestRootfsImageHoldsTheTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "usr/sbin/tool"), []byte("#!tool"), 0o750)
	os.Symlink("tool", filepath.Join(dir, "usr/sbin/alias"))
	spec := Spec{Arch: "amd64", Tag: "example/tool:v1", Rootfs: dir, Entrypoint: []string{"/usr/sbin/tool"}, Cmd: []string{"pause"}, Title: "tool"}
	var buf bytes.Buffer
	if err := Write(&buf, spec); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, buf.Bytes())
	var layer, config []byte
	for name, b := range files {
		if !strings.HasPrefix(name, "blobs/") {
			continue
		}
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			layer, _ = io.ReadAll(zr)
		} else if bytes.Contains(b, []byte(`"Entrypoint"`)) {
			config = b
		}
	}
	if !bytes.Contains(config, []byte(`"Entrypoint":["/usr/sbin/tool"]`)) || !bytes.Contains(config, []byte(`"Cmd":["pause"]`)) ||
		!bytes.Contains(config, []byte(`"org.opencontainers.image.title":"tool"`)) {
		t.Errorf("config %s", config)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = fmt.Sprintf("%c %o %s%s", h.Typeflag, h.Mode, h.Linkname, data)
	}
	want := map[string]string{"usr/": "5 755 ", "usr/sbin/": "5 755 ", "usr/sbin/tool": "0 750 #!tool", "usr/sbin/alias": "2 777 tool"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q (layer %v)", name, got[name], w, got)
		}
	}
	var again bytes.Buffer
	Write(&again, spec)
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("the same tree gave a different archive")
	}
}

// TestMultiPlatformImage: with a second architecture, index.json names
// the tag for an image index, which lists one manifest per platform, each
// with its own binary and a config for its architecture.
func TestMultiPlatformImage(t *testing.T) {
	var buf bytes.Buffer
	spec := Spec{Binary: []byte("amd64 nftproxy"), Arch: "amd64", Others: map[string][]byte{"arm64": []byte("arm64 nftproxy")}, Tag: "nftproxy:v1", Version: "v1"}
	if err := Write(&buf, spec); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, buf.Bytes())
	blob := func(d descriptor) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: present %v, %d bytes, want %d", d.Digest, ok, len(b), d.Size)
		}
		return b
	}
	var top struct{ Manifests []descriptor }
	json.Unmarshal(files["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "nftproxy:v1" {
		t.Fatalf("index.json: %s", files["index.json"])
	}
	var inner struct{ Manifests []descriptor }
	json.Unmarshal(blob(top.Manifests[0]), &inner)
	if len(inner.Manifests) != 2 {
		t.Fatalf("the image index lists %d manifests", len(inner.Manifests))
	}
	for _, m := range inner.Manifests {
		var man struct {
			Config descriptor
			Layers []descriptor
		}
		json.Unmarshal(blob(m), &man)
		var cfg struct{ Architecture string }
		json.Unmarshal(blob(man.Config), &cfg)
		zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0])))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(zr)
		if m.Platform == nil || cfg.Architecture != m.Platform.Architecture || !bytes.Contains(raw, []byte(m.Platform.Architecture+" nftproxy")) {
			t.Errorf("manifest for %+v: config architecture %q, layer without its binary", m.Platform, cfg.Architecture)
		}
	}
}
