package nftgen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestStmtKindsListsEveryKind: every type of this package with the
// statement method (nft) is in StmtKinds, once, and nothing else is.
func TestStmtKindsListsEveryKind(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	declared := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "nft" || len(fn.Recv.List) != 1 {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				declared[id.Name] = true
			}
		}
	}
	listed := map[string]bool{}
	kinds := StmtKinds()
	for i, s := range kinds {
		name := reflect.TypeOf(s).Name()
		if slices.ContainsFunc(kinds[:i], func(o Stmt) bool { return reflect.DeepEqual(o, s) }) {
			t.Errorf("%s %+v is listed twice (a variant must differ)", name, s)
		}
		listed[name] = true
		if !declared[name] {
			t.Errorf("%s is listed but has no nft method here", name)
		}
	}
	for name := range declared {
		if !listed[name] {
			t.Errorf("statement kind %s is not in StmtKinds: add it, and the encoder, decoder, compat view and explain will be tested with it", name)
		}
	}
	if len(declared) < 20 {
		t.Errorf("found %d statement kinds; the parse missed some", len(declared))
	}
}
