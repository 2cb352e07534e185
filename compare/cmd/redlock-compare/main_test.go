package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestUsage: bad flags and values are refused with status 2 and a message naming them,
// before any server starts; -h lists the backends and the faults.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "pg-advisory"},
		{[]string{"-profile", "medium"}, 2, `-profile "medium"`},
		{[]string{"-backends", "redlock,zookeeper"}, 2, `unknown backend "zookeeper"`},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: status %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%q wrote a report: %q", c.args, out.String())
		}
	}
}

// TestUnknownFault: an unknown fault is refused before any server starts.
func TestUnknownFault(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-faults", "meteor", "-q"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `unknown fault "meteor"`) {
		t.Errorf("status %d, stderr %q", code, errOut.String())
	}
}

func TestList(t *testing.T) {
	if got := list(" a, ,b ,"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("list: %q", got)
	}
	if list("  ") != nil {
		t.Error("an empty flag is not the default")
	}
}

// TestUnwritableOutput: an -html path that cannot be created is refused before any run.
func TestUnwritableOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-html", t.TempDir() + "/no/such/dir/r.html", "-q"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "no such file or directory") {
		t.Errorf("status %d, stderr %q", code, errOut.String())
	}
}

// TestFailedRunLeavesNoFiles: a run that fails (here at once: an unknown fault) removes the
// output files it had created.
func TestFailedRunLeavesNoFiles(t *testing.T) {
	p := t.TempDir() + "/r.json"
	var out, errOut bytes.Buffer
	if code := run([]string{"-faults", "meteor", "-json", p, "-q"}, &out, &errOut); code != 1 {
		t.Fatalf("status %d", code)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the failed run left %s (%v)", p, err)
	}
}
