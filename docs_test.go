package redlock

// TestDocsCiteDeclaredTests keeps the evidence in the docs honest: every test, benchmark,
// fuzz target or example that a document names must exist.
//
// The rule. A cited name is any word in docs/*.md or README.md (in backticks or in plain
// text, in prose, tables or code blocks) that matches
//
//	Test[A-Z]\w*   Benchmark[A-Z_]\w*   Fuzz[A-Z_]\w*   Example[A-Z_]\w*
//
// and is not preceded by a letter, digit or underscore. A name ends at the first character
// that is not a letter, digit or underscore, so a subtest path (`TestRealContention/without-fencing`)
// or a benchmark's sub-benchmark (`BenchmarkParallelAcquireRelease/P=256`) cites its top-level
// function. A name followed at once by "…" or "*" is a prefix (`TestReal…`), not a citation. The capital (or underscore) after the prefix keeps ordinary words out: "Testing",
// "Benchmarks", "Fuzzing", "Example:" and a bare `Example` are not citations.
//
// A cited name is declared when some *_test.go file of the repository, in any module
// (the root, bench/, otel/) and any package (cmd/, chaos/, model/, sqlfence/, …), declares
// a function of that name (a top-level func, not a method). The walk starts at the module
// root and skips testdata/ directories and hidden ones (.git). The test reads local files
// only: no network, no build, no redis-server.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// citedTestName is the rule above, with the word boundary on the left checked by hand
// (RE2 has no lookbehind).
var citedTestName = regexp.MustCompile(`(^|[^A-Za-z0-9_])((?:Test[A-Z]|Benchmark[A-Z_]|Fuzz[A-Z_]|Example[A-Z_])[A-Za-z0-9_]*)`)

func TestDocsCiteDeclaredTests(t *testing.T) {
	root := moduleRoot(t)

	declared := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				declared[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !declared["TestDocsCiteDeclaredTests"] {
		t.Fatalf("the walk from %s found no test declarations (not even this test's)", root)
	}

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md under %s (err %v)", root, err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	cited := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		var missing []string
		for i, line := range strings.Split(string(b), "\n") {
			for _, name := range citedNames(line) {
				cited++
				if !declared[name] {
					missing = append(missing, name+" (line "+strconv.Itoa(i+1)+")")
				}
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			t.Errorf("%s cites tests that no *_test.go declares:\n\t%s", rel, strings.Join(missing, "\n\t"))
		}
	}
	if cited == 0 {
		t.Error("no test name cited in docs/*.md or README.md: the rule matches nothing")
	}
}

// TestDocsCitationRule pins the rule of TestDocsCiteDeclaredTests on examples.
func TestDocsCitationRule(t *testing.T) {
	for line, want := range map[string][]string{
		"Test: `TestRealContention/without-fencing` (8 workers)":                  {"TestRealContention"},
		"go test -run '^TestRealFIPSOnly$' . and FuzzSlotKey, then":               {"TestRealFIPSOnly", "FuzzSlotKey"},
		"-bench 'BenchmarkCounterLayouts/P=64' and ExampleClient_Do":              {"BenchmarkCounterLayouts", "ExampleClient_Do"},
		"Testing, Benchmarks, Fuzzing. Example: a bare `Example`":                 nil,
		"MyTestFoo, xTestBar and _FuzzBaz are not citations":                      nil,
		"tests named TestReal… or Benchmark* are prefixes, TestRealExpiry is not": {"TestRealExpiry"},
	} {
		if got := citedNames(line); !slices.Equal(got, want) {
			t.Errorf("%q: cited %q, want %q", line, got, want)
		}
	}
}

// citedNames returns the names that line cites, by the rule above.
func citedNames(line string) []string {
	var out []string
	for _, m := range citedTestName.FindAllStringSubmatchIndex(line, -1) {
		rest := line[m[5]:]
		if strings.HasPrefix(rest, "…") || strings.HasPrefix(rest, "*") {
			continue // a prefix
		}
		out = append(out, line[m[4]:m[5]])
	}
	return out
}

// moduleRoot is the directory of the root module's go.mod, found upwards from the working
// directory (the package's directory under go test).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/quorumlock/redlock\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of module github.com/quorumlock/redlock above the working directory")
		}
		dir = parent
	}
}
