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
	"time"
)

// Spec is what goes into the image.
type Spec struct {
	// Binary is the static nftproxy executable.
	Binary []byte
	// Arch is its GOARCH; the image is for linux/Arch.
	Arch string
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
)

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

// Write writes the OCI archive of s to w.
func Write(w io.Writer, s Spec) error {
	raw, gz, err := layer(s)
	if err != nil {
		return fmt.Errorf("layer: %w", err)
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
	config, err := json.Marshal(map[string]any{
		"architecture": s.Arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": entrypoint,
			"Env":        []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Labels":     labels,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{digest(raw)}},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "nftproxy deploy/image"}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: digest(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: mediaLayerGzip, Digest: digest(gz), Size: int64(len(gz))}},
		"annotations":   labels,
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{"org.opencontainers.image.ref.name": s.Tag, "io.containerd.image.name": s.Tag},
			Platform:    &platform{Architecture: s.Arch, OS: "linux"}}},
	})
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
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(manifest), manifest},
		{blob(config), config},
		{blob(gz), gz},
	} {
		if err := add(f.name, f.data); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return tw.Close()
}
