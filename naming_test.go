package redlock

// The naming rule of the tests that need a real redis-server: their names begin with
// TestReal, so that `go test -run TestReal` selects them, `-skip TestReal` leaves the hermetic
// ones, and a reader tells them apart at a glance; a file named *_real_test.go holds only
// such tests. A test that runs its cases on miniredis and, when redis-server is there, on a
// real server too (forEachStore, forEachCluster: a "/redis-server" subtest) keeps its name.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealServerTestsNamedOneWay checks the rule in the packages whose tests start
// redis-server: the root, cmd/redlock and chaos. A function starts real servers when it refers
// to the redisproc package or calls (by name, within its package) a top-level function that
// does, and it can do without them when it also refers to miniredis; a Test
// function that starts real servers and cannot do without them must be named TestReal…, and
// every Test function of a *_real_test.go file must be. Calls of methods are not followed
// (a scenario's Run in chaos), so the check can miss a test; it does not flag a hermetic one.
func TestRealServerTestsNamedOneWay(t *testing.T) {
	checked := 0
	for _, dir := range []string{".", "cmd/redlock", "chaos"} {
		checked += checkRealNames(t, dir)
	}
	if checked < 150 {
		t.Fatalf("checked %d tests; the walk found too few", checked)
	}
}

// checkRealNames applies the rule to the package in dir and returns how many Test functions
// it checked.
func checkRealNames(t *testing.T, dir string) int {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	fset := token.NewFileSet()
	funcs := map[string][]*ast.FuncDecl{} // by name: top-level functions and methods
	var tests []*ast.FuncDecl
	fileOf := map[*ast.FuncDecl]string{}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
			fileOf[fd] = name
			if fd.Recv == nil && strings.HasSuffix(name, "_test.go") && strings.HasPrefix(fd.Name.Name, "Test") && fd.Name.Name != "TestMain" {
				tests = append(tests, fd)
			}
		}
	}
	real, mini := map[*ast.FuncDecl]bool{}, map[*ast.FuncDecl]bool{}
	for changed := true; changed; {
		changed = false
		for _, fds := range funcs {
			for _, fd := range fds {
				r, m := realUse(fd, funcs, real, mini)
				if r != real[fd] || m != mini[fd] {
					real[fd], mini[fd], changed = r, m, true
				}
			}
		}
	}
	for _, fd := range tests {
		name := fd.Name.Name
		switch {
		case strings.HasPrefix(name, "TestReal"):
		case strings.HasSuffix(fileOf[fd], "_real_test.go"):
			t.Errorf("%s: %s is in a *_real_test.go file but is not named TestReal…", fileOf[fd], name)
		case real[fd] && !mini[fd]:
			t.Errorf("%s: %s starts redis-server but is not named TestReal…", fileOf[fd], name)
		}
	}
	return len(tests)
}

// realUse reports whether fd refers to redisproc (real) and to miniredis (mini), itself or
// through the functions it calls, as known so far.
func realUse(fd *ast.FuncDecl, funcs map[string][]*ast.FuncDecl, real, mini map[*ast.FuncDecl]bool) (r, m bool) {
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		var callee string
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				r = r || id.Name == "redisproc"
				m = m || id.Name == "miniredis"
			}
		case *ast.Ident:
			callee = n.Name // a call of a top-level function, or one passed as a value
		}
		for _, g := range funcs[callee] {
			if g != fd && g.Recv == nil {
				r, m = r || real[g], m || mini[g]
			}
		}
		return true
	})
	return r, m
}
