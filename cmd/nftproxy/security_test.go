package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoExternalBinaryIsExecuted checks that no non-test source of the
// binary's packages imports os/exec: nftproxy talks netlink and never runs
// nft, iptables, conntrack or anything else.
func TestNoExternalBinaryIsExecuted(t *testing.T) {
	for _, dir := range []string{".", "../../proxier", "../../nftgen", "../../compat"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if imp.Path.Value == `"os/exec"` {
					t.Errorf("%s imports os/exec", path)
				}
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, call := range []string{"ForkExec(", "syscall.Exec(", "unix.Exec(", "StartProcess("} {
				if strings.Contains(string(src), call) {
					t.Errorf("%s calls %s", path, call)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
