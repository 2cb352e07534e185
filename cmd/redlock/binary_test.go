//go:build unix

package main

// Helpers for the tests that run the built redlock binary as a user would.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

// The CLI tests run the command as a built binary, as a user would: real processes, real
// signals, real exit codes. The binary is built once per test run, with -race when the
// tests themselves run with -race.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// redlockBin returns the path of the built redlock binary, building it on first use.
func redlockBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "redlock-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "redlock")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running redlock binary.
type proc struct {
	cmd    *exec.Cmd
	stdout testutil.SyncBuffer
	stderr testutil.SyncBuffer
	done   chan struct{} // closed when the process has exited and been reaped
	exitAt time.Time     // set before done is closed
}

// startBin starts the binary with args, the test's environment minus REDLOCK_NODES plus
// extraEnv. The process is killed (if still running) and reaped in t.Cleanup.
func startBin(t *testing.T, extraEnv []string, args ...string) *proc {
	t.Helper()
	return startProc(t, extraEnv, redlockBin(t), args...)
}

// startProc is startBin for any program.
func startProc(t *testing.T, extraEnv []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(path, args...), done: make(chan struct{})}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(credentialEnv, name) && !slices.Contains(lockEnv, name) {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", path, args, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitAt = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to timeout for the process to exit and returns its exit code, 128+N for
// a signal. It fails the test on timeout, and when stderr shows a data race or a panic.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%v did not exit within %v; stdout %q, stderr %q", p.cmd.Args, timeout, p.stdout.String(), p.stderr.String())
	}
	errOut := p.stderr.String()
	if strings.Contains(errOut, "DATA RACE") || strings.Contains(errOut, "panic:") || strings.Contains(errOut, "goroutine ") {
		t.Fatalf("%v: race report or stack trace on stderr:\n%s", p.cmd.Args, errOut)
	}
	st := p.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// runBin runs the binary to completion and returns its exit code, stdout and stderr.
func runBin(t *testing.T, extraEnv []string, args ...string) (int, string, string) {
	t.Helper()
	return runProc(t, extraEnv, redlockBin(t), args...)
}

// runProc is runBin for any program.
func runProc(t *testing.T, extraEnv []string, path string, args ...string) (int, string, string) {
	t.Helper()
	p := startProc(t, extraEnv, path, args...)
	code := p.wait(t, 30*time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readTrim returns the trimmed contents of a file, "" if it cannot be read.
func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// childScript wraps a shell script run by the child of exec: it records its process
// group in $1/pgid (for cleanup), then runs body with the test directory as $D.
func childScript(body string) string {
	return `D="$1"; echo $$ > "$D/pgid.$$"; ` + body
}

// killLeftovers kills the process groups that the children under dir recorded, for tests
// that fail half-way: a child whose redlock was killed must not outlive the test.
func killLeftovers(t *testing.T, dir string) {
	t.Cleanup(func() {
		files, _ := filepath.Glob(filepath.Join(dir, "pgid.*"))
		for _, f := range files {
			if pgid, err := strconv.Atoi(readTrim(f)); err == nil && pgid > 1 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
	})
}

// startCluster starts n real redis-server nodes and returns them with the --nodes value.
func startCluster(t *testing.T, n int) (*redisproc.Cluster, string) {
	t.Helper()
	c := redisproc.StartT(t, n, redisproc.Config{})
	return c, strings.Join(c.URLs(), ",")
}

// requireOneLine checks that stderr is exactly one "redlock: " line that mentions each of
// wants.
func requireOneLine(t *testing.T, stderr string, wants ...string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "redlock: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line starting with \"redlock: \": %q", stderr)
	}
	for _, w := range wants {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not mention %q", stderr, w)
		}
	}
}

// redlockLines returns the lines of stderr that redlock wrote (they start with "redlock: "),
// without those of the command it ran, which shares its stderr.
func redlockLines(stderr string) string {
	var b strings.Builder
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "redlock: ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// ctxT returns a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
