package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	binary := flag.String("binary", "", "the static nftproxy binary to put in the image")
	arch := flag.String("arch", "amd64", "the binary's architecture (GOARCH)")
	tag := flag.String("tag", "nftproxy:dev", "the image's name and tag")
	version := flag.String("version", "dev", "nftproxy's version, recorded in the image's labels")
	out := flag.String("o", "nftproxy-image.tar", "the OCI archive to write")
	rootfs := flag.String("rootfs", "", "instead of -binary: a folder whose tree is the image (for test images)")
	entrypoint := flag.String("entrypoint", "", "with -rootfs: the image's entrypoint (one path)")
	title := flag.String("title", "", "with -rootfs: the image's title label")
	cmd := flag.String("cmd", "", "with -rootfs: the image's default argument to the entrypoint (one word, as a Dockerfile's CMD)")
	others := map[string]string{}
	flag.Func("other", "ARCH=PATH: another architecture's binary; the archive then holds one multi-platform image (repeatable)", func(v string) error {
		arch, path, ok := strings.Cut(v, "=")
		if !ok || arch == "" || path == "" {
			return fmt.Errorf("want ARCH=PATH, got %q", v)
		}
		others[arch] = path
		return nil
	})
	flag.Parse()
	if (*binary == "") == (*rootfs == "") {
		fmt.Fprintln(os.Stderr, "image: give one of -binary and -rootfs")
		os.Exit(2)
	}
	spec := Spec{Arch: *arch, Tag: *tag, Version: *version, Rootfs: *rootfs, Title: *title}
	if *entrypoint != "" {
		spec.Entrypoint = []string{*entrypoint}
	}
	if *cmd != "" {
		spec.Cmd = []string{*cmd}
	}
	var err error
	if *binary != "" {
		spec.Binary, err = os.ReadFile(*binary)
	}
	for arch, path := range others {
		if err != nil {
			break
		}
		if spec.Others == nil {
			spec.Others = map[string][]byte{}
		}
		spec.Others[arch], err = os.ReadFile(path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	f, err := os.Create(*out)
	if err == nil {
		err = Write(f, spec)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
