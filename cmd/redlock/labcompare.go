package main

// redlock lab --compare: the comparison lab of module compare/ (Redlock beside one Redis
// with Sentinel failover, PostgreSQL and etcd, under the same faults). The comparison lives
// in its own module so that neither the library nor this command depends on an etcd
// client: this command finds the module's program, redlock-compare, and runs it with the
// arguments that follow --compare.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// compareEnv names the redlock-compare binary to run, before any other place is tried.
const compareEnv = "REDLOCK_COMPARE"

// compareModule is the module path of the comparison.
const compareModule = "github.com/quorumlock/redlock/compare"

// isCompare reports whether lab's arguments ask for the comparison.
func isCompare(args []string) bool {
	return len(args) > 0 && (args[0] == "--compare" || args[0] == "-compare")
}

// runCompare runs redlock-compare with args, its output on ours. It looks for the program
// in $REDLOCK_COMPARE, beside this executable, on PATH, and in the compare/ directory of a
// checkout of this repository that holds the working directory (built there with go build).
func runCompare(ctx context.Context, e *env, args []string) error {
	bin, cleanup, err := findCompare(ctx, e)
	if err != nil {
		return err
	}
	defer cleanup()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // it stops its servers first
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("lab --compare: interrupted: %w", ctx.Err())
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		return usageErrorf("lab --compare: bad arguments (redlock-compare said why above)")
	default:
		return fmt.Errorf("lab --compare: redlock-compare failed (%w; it said why above)", err)
	}
}

// findCompare returns the redlock-compare to run and what to do once it has run.
func findCompare(ctx context.Context, e *env) (string, func(), error) {
	none := func() {}
	if p := e.getenv(compareEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", none, fmt.Errorf("lab --compare: $%s: %w", compareEnv, err)
		}
		return p, none, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "redlock-compare")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, none, nil
		}
	}
	if p, err := exec.LookPath("redlock-compare"); err == nil {
		return p, none, nil
	}
	dir, ok := compareCheckout()
	if !ok {
		return "", none, fmt.Errorf("lab --compare: redlock-compare not found (not in $%s, beside this program, nor on PATH, "+
			"and the working directory is not in a checkout of the repository); install it with "+
			"go install %s/cmd/redlock-compare@latest, or run it from the repository's compare/ directory: go run ./cmd/redlock-compare", compareEnv, compareModule)
	}
	tmp, err := os.MkdirTemp("", "redlock-compare-")
	if err != nil {
		return "", none, fmt.Errorf("lab --compare: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	bin := filepath.Join(tmp, "redlock-compare")
	fmt.Fprintf(e.stderr, "lab --compare: building redlock-compare in %s\n", dir)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/redlock-compare")
	build.Dir, build.Stdout, build.Stderr = dir, e.stderr, e.stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", none, fmt.Errorf("lab --compare: go build in %s: %w", dir, err)
	}
	return bin, cleanup, nil
}

// compareCheckout looks from the working directory up for a compare/ directory whose
// go.mod declares compareModule.
func compareCheckout() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		for _, c := range []string{filepath.Join(dir, "compare"), dir} {
			if moduleOf(filepath.Join(c, "go.mod")) == compareModule {
				return c, true
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// moduleOf returns the module path a go.mod declares, or "".
func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}
