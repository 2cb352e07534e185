package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/quorumlock/redlock/compare"
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

// TestUnknownFault: an unknown fault is bad arguments, like an unknown backend, refused
// before any server starts or any file is made.
func TestUnknownFault(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run([]string{"-faults", "meteor", "-json", dir + "/r.json", "-q"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown fault "meteor"`) {
		t.Errorf("status %d, stderr %q", code, errOut.String())
	}
	noFiles(t, dir)
}

func TestList(t *testing.T) {
	if got := list(" a, ,b ,"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("list: %q", got)
	}
	if list("  ") != nil || list(" , ") != nil {
		t.Error("a list that names nothing is not nil")
	}
}

// noFiles fails the test when dir holds anything but the names in keep.
func noFiles(t *testing.T, dir string, keep ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if !slices.Contains(keep, e.Name()) {
			t.Errorf("left %s in the output directory", e.Name())
		}
	}
}

// TestBadOutputs: output paths that cannot be written, that are not files, or that name one
// file twice are refused with status 2 before any run, and leave no file behind, not even
// the temporary file of the other output when only one of them is bad.
func TestBadOutputs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/adir", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-html", dir + "/no/such/dir/r.html"}, "no such file or directory"},
		{[]string{"-json", dir + "/adir"}, "not a regular file"},
		{[]string{"-html", dir + "/ok.html", "-json", dir + "/adir"}, "not a regular file"},
		{[]string{"-html", dir + "/ok.html", "-json", dir + "/no/r.json"}, "no such file or directory"},
		{[]string{"-html", dir + "/same.out", "-json", dir + "/./same.out"}, "the same file"},
		{[]string{"-backends", " , "}, "names no backend"},
		{[]string{"-faults", ""}, "names no fault"},
		{[]string{"-backends", "redlock,redlock"}, "selected twice"},
		{[]string{"-faults", "none,pause"}, "cannot be combined"},
		{[]string{"-faults", "pause,none"}, "cannot be combined"},
		{[]string{"-backends", "nosuch"}, "(known: redlock, sentinel, "},
		{[]string{"-faults", "meteor"}, "(known: pause, "},
	} {
		var out, errOut bytes.Buffer
		if code := run(append(c.args, "-q"), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: status %d, stderr %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
	noFiles(t, dir, "adir")
}

// stand puts f in place of compare.Run for one test.
func stand(t *testing.T, f func(context.Context, compare.Options) (*compare.Report, error)) {
	t.Helper()
	old := runCompare
	runCompare = f
	t.Cleanup(func() { runCompare = old })
}

// TestFailedRunKeepsFiles: a run that fails, or is interrupted, leaves the files at the
// -html and -json paths as they were (here, a report of an earlier run) and no temporary
// file beside them.
func TestFailedRunKeepsFiles(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
		want string
	}{
		{errors.New("compare: pg-advisory: postgres is not installed"), 1, "postgres is not installed"},
		{context.Canceled, 130, "interrupted"},
	} {
		dir := t.TempDir()
		h, j := dir+"/r.html", dir+"/r.json"
		for _, p := range []string{h, j} {
			if err := os.WriteFile(p, []byte("an earlier report"), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		stand(t, func(ctx context.Context, o compare.Options) (*compare.Report, error) {
			if errors.Is(c.err, context.Canceled) {
				_ = syscall.Kill(os.Getpid(), syscall.SIGINT) // what Ctrl-C does; run's handler takes it
				<-ctx.Done()
				return nil, fmt.Errorf("compare: run failed: %w", ctx.Err())
			}
			return nil, c.err
		})
		var out, errOut bytes.Buffer
		if code := run([]string{"-backends", "redlock", "-html", h, "-json", j, "-q"}, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", c.err, code, errOut.String(), c.code, c.want)
		}
		for _, p := range []string{h, j} {
			if b, err := os.ReadFile(p); err != nil || string(b) != "an earlier report" {
				t.Errorf("%v: %s now holds %q (%v)", c.err, p, b, err)
			}
		}
		noFiles(t, dir, "r.html", "r.json")
	}
}

// TestRunWritesFiles: a run that succeeds replaces the files with its report, keeping a
// replaced file's mode, and leaves no temporary file; the JSON names the faults that were run.
func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	h, j := dir+"/r.html", dir+"/r.json"
	if err := os.WriteFile(h, []byte("an earlier report"), 0o640); err != nil {
		t.Fatal(err)
	}
	var got compare.Options
	stand(t, func(_ context.Context, o compare.Options) (*compare.Report, error) {
		got = o
		p := o.Profile
		p.Faults = o.Faults
		return &compare.Report{Profile: p, Backends: o.Backends}, nil
	})
	var out, errOut bytes.Buffer
	if code := run([]string{"-backends", "redlock", "-faults", "none", "-html", h, "-json", j, "-q"}, &out, &errOut); code != 0 {
		t.Fatalf("status %d, stderr %q", code, errOut.String())
	}
	if got.Faults == nil || len(got.Faults) != 0 {
		t.Errorf("-faults none gave Faults %#v, want empty and not nil", got.Faults)
	}
	if !strings.Contains(out.String(), "no faults (the healthy runs only)") {
		t.Errorf("the Markdown does not say no faults were run:\n%s", out.String())
	}
	if b, _ := os.ReadFile(h); !strings.HasPrefix(string(b), "<!doctype html>") {
		t.Errorf("r.html: %.40q", b)
	}
	if st, err := os.Stat(h); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("r.html's mode became %v (%v), want 0640", st.Mode(), err)
	}
	var rep struct {
		Profile struct {
			Name   string   `json:"name"`
			TTL    int64    `json:"ttl_ns"`
			Faults []string `json:"faults"`
		} `json:"profile"`
	}
	b, err := os.ReadFile(j)
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("r.json: %v %q", err, b)
	}
	if rep.Profile.Name != "quick" || rep.Profile.TTL != int64(compare.Quick.TTL) || rep.Profile.Faults == nil || len(rep.Profile.Faults) != 0 {
		t.Errorf("r.json's profile: %+v", rep.Profile)
	}
	if !strings.Contains(string(b), "\"faults\": []") || strings.Contains(string(b), "null") {
		t.Errorf("r.json: a list with nothing in it is not []:\n%s", b)
	}
	noFiles(t, dir, "r.html", "r.json")
}
