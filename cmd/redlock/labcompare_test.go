package main

// Tests of redlock lab --compare: how it finds redlock-compare, what it passes on, and what
// it says when the program is missing or fails. The comparison itself is tested in module
// compare/.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCompare writes an executable script that prints its arguments and exits with status.
func fakeCompare(t *testing.T, status int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "redlock-compare")
	script := "#!/bin/sh\necho \"args: $*\"\necho progress >&2\nexit " + string(rune('0'+status)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func compareCLI(t *testing.T, vars map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	err := runLab(context.Background(), e, args)
	return out.String(), errOut.String(), err
}

func TestLabComparePassesArguments(t *testing.T) {
	bin := fakeCompare(t, 0)
	out, errOut, err := compareCLI(t, map[string]string{compareEnv: bin}, "--compare", "-profile", "full", "-backends", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	if want := "args: -profile full -backends etcd\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if errOut != "progress\n" {
		t.Errorf("stderr %q, want the program's own", errOut)
	}
}

func TestLabCompareExitStatus(t *testing.T) {
	_, _, err := compareCLI(t, map[string]string{compareEnv: fakeCompare(t, 1)}, "--compare")
	if err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("a failing redlock-compare gave %v, want its exit status", err)
	}
	_, _, err = compareCLI(t, map[string]string{compareEnv: fakeCompare(t, 2)}, "-compare", "-bogus")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("redlock-compare's usage error (status 2) gave %v (%T), want a usage error", err, err)
	}
}

func TestLabCompareMissing(t *testing.T) {
	_, _, err := compareCLI(t, map[string]string{compareEnv: filepath.Join(t.TempDir(), "nothing")}, "--compare")
	if err == nil || !strings.Contains(err.Error(), "REDLOCK_COMPARE") {
		t.Errorf("a missing $REDLOCK_COMPARE gave %v", err)
	}
}

// TestCompareCheckout: from inside this repository, the compare module is found by its
// go.mod; outside any checkout, it is not.
func TestCompareCheckout(t *testing.T) {
	dir, ok := compareCheckout()
	if !ok || moduleOf(filepath.Join(dir, "go.mod")) != compareModule {
		t.Fatalf("compareCheckout from %s: %q, %v", must(os.Getwd()), dir, ok)
	}
	t.Chdir(t.TempDir())
	if dir, ok := compareCheckout(); ok {
		t.Errorf("outside the repository compareCheckout found %s", dir)
	}
}

func must[T any](v T, _ error) T { return v }
