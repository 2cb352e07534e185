package redisproc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redisproc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func set(t *testing.T, c redis.UniversalClient, key, val string) {
	t.Helper()
	if err := c.Set(ctxT(t), key, val, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

// get returns the value of key, or "" with ok false when it does not exist.
func get(t *testing.T, c redis.UniversalClient, key string) (val string, ok bool) {
	t.Helper()
	val, err := c.Get(ctxT(t), key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return val, true
}

func TestStartThreeNodes(t *testing.T) {
	c := redisproc.StartT(t, 3, redisproc.Config{})
	nodes := c.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes))
	}
	addrs, urls := c.Addrs(), c.URLs()
	seen := map[string]bool{}
	for i, n := range nodes {
		if n.Index() != i {
			t.Errorf("node %d: Index() = %d", i, n.Index())
		}
		if !strings.HasPrefix(addrs[i], "127.0.0.1:") || addrs[i] != n.Addr() {
			t.Errorf("node %d: Addrs()[i] = %q, Addr() = %q", i, addrs[i], n.Addr())
		}
		if urls[i] != "redis://"+addrs[i] {
			t.Errorf("node %d: URLs()[i] = %q", i, urls[i])
		}
		if seen[addrs[i]] {
			t.Errorf("address %s used twice", addrs[i])
		}
		seen[addrs[i]] = true
		if !n.Running() || n.PID() == 0 || n.Paused() {
			t.Errorf("node %d: Running=%v PID=%d Paused=%v", i, n.Running(), n.PID(), n.Paused())
		}
	}

	clients := c.ClientsT(t)
	for i, cl := range clients {
		set(t, cl, "k", fmt.Sprintf("v%d", i))
	}
	for i, cl := range clients {
		if got, _ := get(t, cl, "k"); got != fmt.Sprintf("v%d", i) {
			t.Errorf("node %d: GET k = %q, want v%d (nodes must be independent)", i, got, i)
		}
	}
}

func TestRestart(t *testing.T) {
	tests := []struct {
		name     string
		persist  bool
		empty    bool
		kill     bool
		wantKept bool
	}{
		{name: "persist/kill", persist: true, kill: true, wantKept: true},
		{name: "persist/running", persist: true, wantKept: true},
		{name: "memory/kill", persist: false, kill: true, wantKept: false},
		{name: "persist/empty", persist: true, empty: true, kill: true, wantKept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := redisproc.StartT(t, 1, redisproc.Config{Persist: tt.persist})
			n := c.Nodes()[0]
			cl := c.ClientsT(t)[0]
			addr, oldPID := n.Addr(), n.PID()
			set(t, cl, "survivor", "yes")

			if tt.kill {
				if err := n.Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
				if n.Running() || n.PID() != 0 {
					t.Fatalf("after Kill: Running=%v PID=%d", n.Running(), n.PID())
				}
				if err := syscall.Kill(oldPID, 0); !errors.Is(err, syscall.ESRCH) {
					t.Fatalf("after Kill: kill(%d, 0) = %v, want ESRCH", oldPID, err)
				}
			}
			restart := n.Restart
			if tt.empty {
				restart = n.RestartEmpty
			}
			if err := restart(ctxT(t)); err != nil {
				t.Fatalf("restart: %v", err)
			}
			if n.Addr() != addr {
				t.Fatalf("address changed from %s to %s", addr, n.Addr())
			}
			if pid := n.PID(); pid == 0 || pid == oldPID {
				t.Fatalf("PID after restart = %d (before %d)", pid, oldPID)
			}

			// The same client reconnects to the same port.
			got, ok := get(t, cl, "survivor")
			if ok != tt.wantKept || (ok && got != "yes") {
				t.Fatalf("after restart GET survivor = %q (exists %v), want exists %v", got, ok, tt.wantKept)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func TestPauseResume(t *testing.T) {
	c := redisproc.StartT(t, 1, redisproc.Config{})
	n := c.Nodes()[0]
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cl.Close() })
	if err := cl.Ping(ctxT(t)).Err(); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}

	if err := n.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if !n.Paused() || !n.Running() {
		t.Fatalf("after Pause: Paused=%v Running=%v", n.Paused(), n.Running())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	start := time.Now()
	err := cl.Get(ctx, "k").Err()
	elapsed := time.Since(start)
	cancel()
	if !isTimeout(err) {
		t.Fatalf("GET on paused node: err = %v, want a timeout", err)
	}
	if elapsed > 2*time.Second {
		t.Fatalf("GET on paused node took %v, want about 200ms", elapsed)
	}

	if err := n.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if n.Paused() {
		t.Fatal("Paused() after Resume")
	}
	if err := cl.Ping(ctxT(t)).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
}

func TestNotRunning(t *testing.T) {
	c := redisproc.StartT(t, 1, redisproc.Config{})
	n := c.Nodes()[0]
	if err := n.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := n.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := n.Pause(); err == nil {
		t.Fatal("Pause on a killed node succeeded")
	}
	if err := n.Resume(); err == nil {
		t.Fatal("Resume on a killed node succeeded")
	}
	if _, err := n.CPU(); err == nil {
		t.Fatal("CPU of a killed node gave no error")
	}
}

// TestNodeCPU: the CPU time read from /proc grows by about what the server spends.
func TestNodeCPU(t *testing.T) {
	c := redisproc.StartT(t, 1, redisproc.Config{})
	n := c.Nodes()[0]
	rc := c.ClientsT(t)[0]
	before, err := n.CPU()
	if err != nil {
		t.Fatal(err)
	}
	// A Lua loop of 3*10^7 steps keeps the server busy for a few hundred milliseconds.
	start := time.Now()
	if err := rc.Eval(context.Background(), "local i = 0 while i < 30000000 do i = i + 1 end return i", nil).Err(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	after, err := n.CPU()
	if err != nil {
		t.Fatal(err)
	}
	// The loop's CPU is at most its wall time (plus two ticks), and whatever else runs on
	// the machine it is at least a few ticks: the loop's own work does not shrink.
	if spent := after - before; spent > took+20*time.Millisecond || spent < 50*time.Millisecond {
		t.Fatalf("CPU grew by %v over a busy loop of %v", spent, took)
	}
}

func TestCloseIdempotent(t *testing.T) {
	bin := redisproc.Require(t)
	c, err := redisproc.Start(ctxT(t), 3, redisproc.Config{Binary: bin, Persist: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	nodes := c.Nodes()
	var pids []int
	for _, n := range nodes {
		pids = append(pids, n.PID())
	}
	// Close must also stop a paused node and a killed one.
	if err := nodes[1].Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := nodes[2].Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}

	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v; SIGTERM should have been enough", d)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("node %d: kill(%d, 0) = %v after Close, want ESRCH", i, pid, err)
		}
		if nodes[i].Running() || nodes[i].PID() != 0 {
			t.Errorf("node %d: Running=%v PID=%d after Close", i, nodes[i].Running(), nodes[i].PID())
		}
	}
	if err := nodes[0].Restart(ctxT(t)); err == nil {
		t.Error("Restart after Close succeeded")
	}
}

func TestStartError(t *testing.T) {
	bin := redisproc.Require(t)
	_, err := redisproc.Start(ctxT(t), 2, redisproc.Config{
		Binary:    bin,
		ExtraArgs: []string{"--no-such-directive", "x"},
	})
	if err == nil {
		t.Fatal("Start with a bad directive succeeded")
	}
	msg := err.Error()
	t.Logf("expected error: %v", err)
	if !strings.HasPrefix(msg, "redisproc: ") || !strings.Contains(msg, "no-such-directive") {
		t.Fatalf("error should start with redisproc: and quote the log, got:\n%s", msg)
	}

	if _, err := redisproc.Start(ctxT(t), 0, redisproc.Config{Binary: bin}); err == nil {
		t.Fatal("Start with 0 nodes succeeded")
	}
}

func TestRestartPortBusy(t *testing.T) {
	c := redisproc.StartT(t, 1, redisproc.Config{})
	n := c.Nodes()[0]
	if err := n.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// Someone else grabs the port while the node is down.
	l, err := net.Listen("tcp", n.Addr())
	if err != nil {
		t.Fatalf("listen on the freed port: %v", err)
	}
	// redis-server exits at once when it cannot bind, and Restart reports that with the log;
	// the deadline only bounds a machine too busy to start the process (300 ms was too short
	// under a full -race run on two cores).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = n.Restart(ctx)
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Restart on a busy port: err = %v, want the bind failure from the log", err)
	}
	t.Logf("expected error: %v", err)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(ctxT(t)); err != nil {
		t.Fatalf("Restart once the port is free: %v", err)
	}
}
