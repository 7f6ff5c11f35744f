package main

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// addBinary writes nftproxy's layer: the binary and its links (LinkPaths).
func addBinary(tw *tar.Writer, bin []byte) error {
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: BinaryPath[1:], Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	for _, link := range LinkPaths {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: link[1:], Linkname: "nftproxy", Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return nil
}

// addTree writes every folder, regular file and symlink under root, in
// lexical order, owned by root and stamped with epoch, so that the same
// tree gives the same layer.
func addTree(tw *tar.Writer, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			return tw.WriteHeader(h)
		case info.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(path); err != nil {
				return err
			}
			return tw.WriteHeader(h)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return fmt.Errorf("%s: neither a file, a folder nor a symlink", path)
	})
}
