package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Spec is what goes into the image.
type Spec struct {
	// Binary is the static nftproxy executable.
	Binary []byte
	// Arch is its GOARCH; the image is for linux/Arch.
	Arch string
	// Others are more architectures' binaries (GOARCH to executable):
	// with any, the archive holds one multi-platform image, an index of
	// one manifest per architecture, under Tag.
	Others map[string][]byte
	// Tag is the image's reference name (name:tag).
	Tag string
	// Version is nftproxy's version, recorded as a label.
	Version string
	// Rootfs, when set, is a directory whose whole tree (files, folders,
	// symlinks) is the layer instead of Binary: the test images of the
	// real-cluster harness (kube-proxy with iptables, pause, agnhost).
	Rootfs string
	// Entrypoint replaces nftproxy's entrypoint when set.
	Entrypoint []string
	// Cmd is the image's default arguments to the entrypoint (none when
	// empty), as a Dockerfile's CMD.
	Cmd []string
	// Title replaces the title label when set.
	Title string
}

// Paths of the image.
const (
	BinaryPath     = "/usr/local/bin/nftproxy"
	KubeProxyPath  = "/usr/local/bin/kube-proxy"
	mediaManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig    = "application/vnd.oci.image.config.v1+json"
	mediaLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaIndex     = "application/vnd.oci.image.index.v1+json"
)

// LinkPaths are the symlinks to the binary: kube-proxy, the path kubeadm's
// DaemonSet runs, and iptables-save and ip6tables-save, which print the
// compat view (nftproxy save), so that `kubectl exec ... -- iptables-save`
// in a runbook keeps working.
var LinkPaths = []string{KubeProxyPath, "/usr/local/bin/iptables-save", "/usr/local/bin/ip6tables-save"}

// epoch is the time stamp of every file, so that the same binary always
// gives the same image.
var epoch = time.Unix(0, 0).UTC()

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layer returns the image's one layer, uncompressed and gzip-compressed.
func layer(s Spec) (raw, gz []byte, err error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if s.Rootfs != "" {
		err = addTree(tw, s.Rootfs)
	} else {
		err = addBinary(tw, s.Binary)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	raw = buf.Bytes()
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return nil, nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return raw, z.Bytes(), nil
}

// platformImage returns the manifest of s's image for arch with binary
// bin, and appends its config and layer to blobs.
func platformImage(s Spec, arch string, bin []byte, blobs *[][]byte) ([]byte, error) {
	s.Binary = bin
	raw, gz, err := layer(s)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "nftproxy",
		"org.opencontainers.image.description": "kube-proxy's iptables-mode semantics on nftables; a drop-in for kube-proxy's image",
		"org.opencontainers.image.version":     s.Version,
	}
	entrypoint := []string{BinaryPath}
	if len(s.Entrypoint) > 0 {
		entrypoint = s.Entrypoint
	}
	if s.Title != "" {
		labels["org.opencontainers.image.title"] = s.Title
		delete(labels, "org.opencontainers.image.description")
	}
	imageConfig := map[string]any{
		"Entrypoint": entrypoint,
		"Env":        []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"},
		"Labels":     labels,
	}
	if len(s.Cmd) > 0 {
		imageConfig["Cmd"] = s.Cmd
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       imageConfig,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest(raw)}},
		"history":      []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "nftproxy deploy/image"}},
	})
	if err != nil {
		return nil, err
	}
	*blobs = append(*blobs, config, gz)
	return json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: digest(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: mediaLayerGzip, Digest: digest(gz), Size: int64(len(gz))}},
		"annotations":   labels,
	})
}

// Write writes the OCI archive of s to w: index.json names Tag, for one
// platform's manifest or, with s.Others, for an image index of every
// platform's.
func Write(w io.Writer, s Spec) error {
	var blobs [][]byte
	archs := []string{s.Arch}
	bins := map[string][]byte{s.Arch: s.Binary}
	for _, a := range slices.Sorted(maps.Keys(s.Others)) {
		if a != s.Arch {
			archs = append(archs, a)
			bins[a] = s.Others[a]
		}
	}
	var manifests []descriptor
	for _, arch := range archs {
		m, err := platformImage(s, arch, bins[arch], &blobs)
		if err != nil {
			return err
		}
		blobs = append(blobs, m)
		manifests = append(manifests, descriptor{MediaType: mediaManifest, Digest: digest(m), Size: int64(len(m)), Platform: &platform{Architecture: arch, OS: "linux"}})
	}
	ref := map[string]string{"org.opencontainers.image.ref.name": s.Tag, "io.containerd.image.name": s.Tag}
	top := manifests[0]
	if len(manifests) > 1 {
		inner, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
		if err != nil {
			return err
		}
		blobs = append(blobs, inner)
		top = descriptor{MediaType: mediaIndex, Digest: digest(inner), Size: int64(len(inner))}
	}
	top.Annotations = ref
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{top}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	blob := func(b []byte) string { return "blobs/sha256/" + digest(b)[len("sha256:"):] }
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, b := range blobs {
		if name := blob(b); !written[name] {
			written[name] = true
			if err := add(name, b); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	return tw.Close()
}
