//go:build unix

package main

// Tests of redlock dev, and of the command lines of dev and status.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// freeRun returns a port p such that p..p+n-1 are free on 127.0.0.1 right now.
func freeRun(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if base+n-1 > 65535 {
			continue
		}
		ok := true
		for p := base + 1; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				continue
			}
			_ = l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("found no %d consecutive free ports", n)
	return 0
}

// TestDev runs "redlock dev" as a newcomer would: it prints the export line, the nodes
// answer, exec and status work against them, a second dev on the same ports fails with one
// line, and SIGINT stops it with exit code 0.
func TestDev(t *testing.T) {
	t.Parallel()
	const n = 3
	base := freeRun(t, n)
	dev := startBin(t, nil, "dev", "-n", strconv.Itoa(n), "--port", strconv.Itoa(base))
	testutil.WaitFor(t, 15*time.Second, "the export line", func() bool { return strings.HasSuffix(dev.stdout.String(), "\n") || dev.exited() })
	if dev.exited() {
		t.Fatalf("dev exited: code %d, stderr %q", dev.wait(t, 0), dev.stderr.String())
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("redis://127.0.0.1:%d", base+i))
	}
	line := dev.stdout.String()
	if wantLine := "export REDLOCK_NODES=" + strings.Join(want, ",") + "\n"; line != wantLine {
		t.Fatalf("dev printed %q, want %q", line, wantLine)
	}
	for _, u := range want {
		o, _ := redis.ParseURL(u)
		c := redis.NewClient(o)
		err := c.Ping(ctxT(t, 5*time.Second)).Err()
		_ = c.Close()
		if err != nil {
			t.Fatalf("PING %s: %v", u, err)
		}
	}
	env := []string{strings.TrimSpace(strings.TrimPrefix(line, "export "))}
	code, out, errOut := runBin(t, env, "exec", "demo", "--", "sh", "-c", `echo "token $REDLOCK_TOKEN"`)
	if code != 0 || !strings.HasPrefix(out, "token ") || errOut != "" {
		t.Errorf("exec on dev nodes: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runBin(t, env, "status", "demo")
	if code != 0 || !strings.Contains(out, "free: no holder on any of the 3 nodes") || errOut != "" {
		t.Errorf("status on dev nodes: exit code %d, stderr %q, stdout:\n%s", code, errOut, out)
	}

	code, out, errOut = runBin(t, nil, "dev", "-n", strconv.Itoa(n), "--port", strconv.Itoa(base))
	if code != exitFail || out != "" {
		t.Errorf("second dev on the same ports: exit code %d, stdout %q", code, out)
	}
	requireOneLine(t, errOut, fmt.Sprintf("port %d on 127.0.0.1 is already in use", base), "--port")

	if err := dev.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := dev.wait(t, 10*time.Second); code != 0 {
		t.Errorf("dev after SIGINT: exit code %d, stderr %q", code, dev.stderr.String())
	}
	if !strings.HasSuffix(dev.stderr.String(), "redlock dev: stopped\n") {
		t.Errorf("dev's stderr does not end with the stop line: %q", dev.stderr.String())
	}
	var d net.Dialer
	if c, err := d.DialContext(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", base)); err == nil {
		_ = c.Close()
		t.Error("a dev node still accepts connections after dev exited")
	}
}

func TestDevCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "-n", "0"}, "-n 0 is outside [1, 99]"},
		{[]string{"dev", "--port", "65535", "-n", "2"}, "ports 65535..65536 are outside 1..65535"},
		{[]string{"dev", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := cli(t, nil, tc.args...)
		requireOneLineError(t, code, errOut, exitUsage, tc.want)
	}
}

func TestStatusCommandLine(t *testing.T) {
	closed := closedAddr(t)
	for _, tc := range []struct {
		vars map[string]string
		args []string
		code int
		want string
	}{
		{nil, []string{"status"}, exitUsage, "want exactly one KEY, got 0"},
		{nil, []string{"status", "a", "b", "--nodes", "redis://" + closed}, exitUsage, "want exactly one KEY, got 2"},
		{nil, []string{"status", "k"}, exitUsage, "status: no nodes: pass --nodes"},
		{nil, []string{"status", "--nodes", "redis://" + closed, "redlock:fence:x"}, exitUsage, "status: bad KEY: invalid argument: key"},
		{map[string]string{nodesEnv: "nope://x"}, []string{"status", "k"}, exitFail, "REDLOCK_NODES: bad node URL"},
		{nil, []string{"status", "k", "--json", "--nodes", "redis://" + closed, "--node-timeout", "0s"}, exitUsage, "--node-timeout 0s must be positive"},
		{nil, []string{"status", "--election", "--rwlock", "--nodes", "redis://" + closed, "k"}, exitUsage, "--election, --rwlock and --permits are mutually exclusive"},
		{nil, []string{"status", "--permits", "2", "--rwlock", "--nodes", "redis://" + closed, "k"}, exitUsage, "--election, --rwlock and --permits are mutually exclusive"},
		{nil, []string{"status", "k", "--election", "--permits", "3", "--nodes", "redis://" + closed}, exitUsage, "--election, --rwlock and --permits are mutually exclusive"},
		{nil, []string{"status", "--election", "--nodes", "redis://" + closed, "redlock:fence:x"}, exitUsage, "status: bad election: invalid argument: election name \"redlock:fence:x\" starts with the reserved prefix"},
		{nil, []string{"status", "--rwlock", "--nodes", "redis://" + closed, ""}, exitUsage, "status: bad read/write lock: invalid argument: read/write lock name is empty"},
		{nil, []string{"status", "--election=maybe", "--nodes", "redis://" + closed, "k"}, exitUsage, "invalid boolean value"},
	} {
		code, out, errOut := cli(t, tc.vars, tc.args...)
		requireOneLineError(t, code, errOut, tc.code, tc.want)
		if out != "" {
			t.Errorf("%v: stdout %q", tc.args, out)
		}
	}
	// A node that is down: the table still comes, then one line and exit code 1.
	code, out, errOut := cli(t, nil, "status", "k", "--nodes", "redis://"+closed)
	requireOneLineError(t, code, errOut, exitFail, "only 0 of 1 nodes answered, quorum is 1")
	if !strings.Contains(out, "connection refused") || !strings.Contains(out, "unknown: only 0 of 1 nodes answered") {
		t.Errorf("table for a node that is down:\n%s", out)
	}
}
