package redlock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// startSentinel starts a redis-server in Sentinel mode on a free loopback port, monitoring
// the given masters (name → address) with a quorum of 2, and stops it by PID when the test
// ends.
func startSentinel(t *testing.T, bin string, masters map[string]string) string {
	t.Helper()
	port := testutil.FreePortT(t)
	dir := t.TempDir()
	var conf strings.Builder
	fmt.Fprintf(&conf, "port %d\nbind 127.0.0.1\ndir %s\nprotected-mode no\n", port, dir)
	for name, addr := range masters {
		host, p, _ := strings.Cut(addr, ":")
		fmt.Fprintf(&conf, "sentinel monitor %s %s %s 2\n", name, host, p)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n", name, name)
	}
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path, "--sentinel")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	testutil.WaitFor(t, 10*time.Second, "the sentinel to answer PING", func() bool { return rc.Ping(context.Background()).Err() == nil })
	return addr
}

// TestRealSentinelFailover: three nodes, each a Sentinel-managed master with one replica,
// watched by three sentinels. During a Do, one master is failed over to its replica; the
// Do keeps its lock (the other two nodes are a quorum), and the next acquisition gets a
// larger token, as docs/design.md §5.6 says for a node that may have lost its state.
func TestRealSentinelFailover(t *testing.T) {
	bin := redisproc.Require(t)
	masters := redisproc.StartT(t, 3, redisproc.Config{})
	names := map[string]string{}
	for i, a := range masters.Addrs() {
		_, port, _ := strings.Cut(a, ":")
		redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--replicaof", "127.0.0.1", port}})
		names[fmt.Sprintf("m%d", i+1)] = a
	}
	var sentinels []string
	for range 3 {
		sentinels = append(sentinels, startSentinel(t, bin, names))
	}
	ctx := ctxT(t, 2*time.Minute)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	t.Cleanup(func() { sc.Close() })
	// Wait until the sentinels know each master's replica, or a failover has nowhere to go.
	testutil.WaitFor(t, 10*time.Second, "the sentinels to know every master's replica", func() bool {
		for name := range names {
			r, err := sc.Replicas(ctx, name).Result()
			if err != nil || len(r) == 0 {
				return false
			}
		}
		return true
	})
	var clients []redis.UniversalClient
	for i := range 3 {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: fmt.Sprintf("m%d", i+1),
			SentinelAddrs: sentinels, MaxRetries: -1})
		t.Cleanup(func() { fc.Close() })
		clients = append(clients, fc)
	}
	c := newTestClient(t, clients, WithNodeTimeout(time.Second))
	var first Token
	err := c.Do(ctx, "sentinel:job", 3*time.Second, func(fctx context.Context, l *Lock) error {
		first = l.Token()
		before := names["m1"]
		if err := sc.Failover(ctx, "m1").Err(); err != nil {
			return fmt.Errorf("SENTINEL FAILOVER: %w", err)
		}
		testutil.WaitFor(t, 10*time.Second, "the sentinels to report a new master of m1", func() bool {
			addr, err := sc.GetMasterAddrByName(ctx, "m1").Result()
			return err == nil && strings.Join(addr, ":") != before
		})
		// Hold on through two more TTLs, so that renewals reach the promoted replica.
		select {
		case <-time.After(6 * time.Second):
		case <-fctx.Done():
			return context.Cause(fctx)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do across a failover: %v", err)
	}
	l, err := c.Acquire(ctx, "sentinel:job", 3*time.Second)
	if err != nil {
		t.Fatalf("acquire after the failover: %v", err)
	}
	if l.Token() <= first {
		t.Fatalf("token %d after %d", l.Token(), first)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
