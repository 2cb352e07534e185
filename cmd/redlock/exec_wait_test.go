//go:build unix

package main

// Tests of exec's and elect's --wait on embedded nodes, in-process: what it counts.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/quorumlock/redlock/internal/faultproxy"
)

// slowNodes starts n embedded nodes, each behind a fault proxy that delays every chunk by
// delay in each direction, and returns the proxies' URLs for --nodes and the nodes'
// own addresses. Everything is stopped when the test ends.
func slowNodes(t *testing.T, n int, delay time.Duration) (nodes string, direct []string) {
	t.Helper()
	en, err := embedded.Start(n, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(en.Close)
	var urls []string
	for _, a := range en.Addrs() {
		p, err := faultproxy.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		p.SetDelay(delay, delay)
		urls = append(urls, "redis://"+p.Addr())
	}
	return strings.Join(urls, ","), en.Addrs()
}

// TestExecWaitCountsFromFirstAttempt: --wait counts neither the preflight nor the first
// attempt. Behind proxies that delay each direction by 25 ms, the PING preflight and the
// first attempt take at least 50 ms each, far longer than --wait 1ms: exec and elect still
// take the free lock (before, the wait ran out during the preflight and exec failed with
// status 1). On a lock held elsewhere (and nodes without delays), --wait 50ms gives up with
// status 75 once 50 ms have passed, not before, and soon after.
func TestExecWaitCountsFromFirstAttempt(t *testing.T) {
	const delay = 25 * time.Millisecond
	nodes, direct := slowNodes(t, 3, delay)

	start := time.Now()
	code, out, errOut := cli(t, nil, "exec", "--nodes", nodes, "--wait", "1ms", "free", "--", "sh", "-c", "echo ran")
	took := time.Since(start)
	if code != 0 || out != "ran\n" {
		t.Errorf("exec --wait 1ms on a free lock: exit %d, stdout %q, stderr %q; want 0 and the command's output", code, out, errOut)
	}
	if took < 4*delay { // a PING and an attempt, each a round trip through the proxies
		t.Errorf("exec took %v, less than the preflight and the attempt can take (%v): the proxies did not delay", took, 4*delay)
	}
	code, out, errOut = cli(t, nil, "elect", "--nodes", nodes, "--wait", "1ms", "--value", "host-a", "sched", "--", "sh", "-c", `echo "$REDLOCK_VALUE"`)
	if code != 0 || out != "host-a\n" {
		t.Errorf("elect --wait 1ms in a free election: exit %d, stdout %q, stderr %q; want 0 and the command's output", code, out, errOut)
	}

	c := directClient(t, direct)
	l, err := c.TryAcquire(t.Context(), "held", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	// Without the proxies' delays, so that the time exec takes is mostly the wait.
	fast := "redis://" + strings.Join(direct, ",redis://")
	const wait = 50 * time.Millisecond
	start = time.Now()
	code, out, errOut = cli(t, nil, "exec", "--nodes", fast, "--wait", wait.String(), "held", "--", "sh", "-c", "echo ran")
	took = time.Since(start)
	requireOneLineError(t, code, errOut, defaultConflictExitCode, `lock "held" not acquired (waited 50ms): held by `+l.ID()[:8])
	if out != "" {
		t.Errorf("the command ran while the lock was held elsewhere: stdout %q", out)
	}
	if took < wait || took > wait+time.Second {
		t.Errorf("exec --wait %v on a held lock returned after %v; want at least %v, and well within 1 s more", wait, took, wait)
	}

	// elect names the election, and who leads it, not the election's lock key.
	ld, err := c.Election("led").Campaign(t.Context(), "host-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(t.Context())
	code, out, errOut = cli(t, nil, "elect", "--nodes", fast, "--wait", wait.String(), "led", "--", "sh", "-c", "echo ran")
	requireOneLineError(t, code, errOut, defaultConflictExitCode,
		fmt.Sprintf(`election "led" not won (waited 50ms): led by "host-b" (term %v); held by %s`, ld.Term(), ld.ID()[:8]))
	if out != "" {
		t.Errorf("elect ran the command while another candidate led: stdout %q", out)
	}
}
