package redlock

// The naming rule of the tests that need a real redis-server: their names begin with
// TestReal, so that `go test -run 'Test[^R]'` runs the hermetic ones and a reader tells them
// apart at a glance; a file named *_real_test.go holds only such tests.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealServerTestsNamedOneWay: in this package, every Test function that starts
// redis-server itself (it refers to the redisproc package) is named TestReal…, and every Test
// function in a *_real_test.go file is too. Tests that reach real servers only through a
// shared helper are not seen by this check.
func TestRealServerTestsNamedOneWay(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		realFile := strings.HasSuffix(name, "_real_test.go")
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Test") || fd.Name.Name == "TestMain" {
				continue
			}
			checked++
			if strings.HasPrefix(fd.Name.Name, "TestReal") {
				continue
			}
			if realFile {
				t.Errorf("%s: %s is in a *_real_test.go file but is not named TestReal…", name, fd.Name.Name)
			} else if refersTo(fd, "redisproc") {
				t.Errorf("%s: %s starts redis-server (redisproc) but is not named TestReal…", name, fd.Name.Name)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d tests; the glob found too few files (%d)", checked, len(files))
	}
}

// refersTo reports whether fd's body names the package pkg (pkg.Something).
func refersTo(fd *ast.FuncDecl, pkg string) bool {
	found := false
	ast.Inspect(fd, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
				found = true
			}
		}
		return !found
	})
	return found
}
