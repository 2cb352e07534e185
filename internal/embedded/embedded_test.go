package embedded

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startT starts n nodes on free ports and closes them when the test ends.
func startT(t *testing.T, n int) *Nodes {
	t.Helper()
	ns, err := Start(n, nil)
	if err != nil {
		t.Fatalf("Start(%d, nil): %v", n, err)
	}
	t.Cleanup(ns.Close)
	return ns
}

// clientT returns a go-redis client of addr, closed when the test ends.
func clientT(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := testutil.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func TestKeyExpiresInRealTime(t *testing.T) {
	ns := startT(t, 3)
	ctx := context.Background()
	const ttl = 100 * time.Millisecond
	for i, addr := range ns.Addrs() {
		c := clientT(t, addr)
		sent := time.Now()
		if err := c.Set(ctx, "k", "v", ttl).Err(); err != nil {
			t.Fatalf("node %d: SET: %v", i, err)
		}
		if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 1 {
			t.Fatalf("node %d: right after SET PX 100: EXISTS = %d, %v; want 1", i, n, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			n, err := c.Exists(ctx, "k").Result()
			if err != nil {
				t.Fatalf("node %d: EXISTS: %v", i, err)
			}
			if n == 0 {
				// The node saw the key gone before this reply arrived, and it was set after
				// sent: so if the key had lived less than its TTL, this would be < ttl.
				if lived := time.Since(sent); lived < ttl {
					t.Fatalf("node %d: key gone after %v, before its TTL of %v", i, lived, ttl)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: key with PX 100 still present after %v", i, time.Since(sent))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func TestPTTLCountsDown(t *testing.T) {
	ns := startT(t, 1)
	ctx := context.Background()
	c := clientT(t, ns.Addrs()[0])
	if err := c.Set(ctx, "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	left, err := c.PTTL(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if left <= 0 || left > 960*time.Millisecond {
		t.Fatalf("PTTL 50ms after SET PX 1000 = %v; want in (0, 960ms]", left)
	}
}

func TestNodesAreIndependent(t *testing.T) {
	ns := startT(t, 3)
	ctx := context.Background()
	if err := clientT(t, ns.Addrs()[0]).Set(ctx, "only-here", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i, addr := range ns.Addrs()[1:] {
		if n, err := clientT(t, addr).Exists(ctx, "only-here").Result(); err != nil || n != 0 {
			t.Fatalf("node %d sees a key set on node 0: EXISTS = %d, %v", i+1, n, err)
		}
	}
}

func TestFixedPorts(t *testing.T) {
	ports := freePorts(t, 3)
	ns, err := Start(3, ports)
	if err != nil {
		t.Fatalf("Start(3, %v): %v", ports, err)
	}
	defer ns.Close()
	ctx := context.Background()
	for i, p := range ports {
		want := fmt.Sprintf("127.0.0.1:%d", p)
		if got := ns.Addrs()[i]; got != want {
			t.Errorf("Addrs()[%d] = %q, want %q", i, got, want)
		}
		if got := ns.URLs()[i]; got != "redis://"+want {
			t.Errorf("URLs()[%d] = %q, want %q", i, got, "redis://"+want)
		}
		opts, err := redis.ParseURL(ns.URLs()[i])
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", ns.URLs()[i], err)
		}
		c := redis.NewClient(opts)
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING %s: %v", want, err)
		}
		_ = c.Close()
	}
	if got := len(ns.Servers()); got != 3 {
		t.Errorf("len(Servers()) = %d, want 3", got)
	}
}

func TestBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	free := freePorts(t, 1)[0]

	ns, err := Start(2, []int{free, busyPort})
	if err == nil {
		ns.Close()
		t.Fatalf("Start on busy port %d succeeded", busyPort)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(busyPort)) || !strings.Contains(msg, "in use") {
		t.Errorf("error %q does not name busy port %d as in use", msg, busyPort)
	}
	// The node started before the failure must have been stopped again.
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", free))
	if err != nil {
		t.Fatalf("port %d of the node started before the failure is still taken: %v", free, err)
	}
	_ = l.Close()
}

func TestStartRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		n     int
		ports []int
		want  string
	}{
		{0, nil, "at least 1"},
		{-1, nil, "at least 1"},
		{2, []int{7001}, "2 nodes"},
		{1, []int{0}, "outside"},
		{1, []int{65536}, "outside"},
		{2, []int{7001, 7001}, "twice"},
	} {
		ns, err := Start(tc.n, tc.ports)
		if err == nil {
			ns.Close()
			t.Errorf("Start(%d, %v) succeeded", tc.n, tc.ports)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%d, %v) = %q; want it to mention %q", tc.n, tc.ports, err, tc.want)
		}
	}
}

func TestCloseIsIdempotentAndStopsEverything(t *testing.T) {
	ns, err := Start(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// An open client connection, so that Close has a peer goroutine to end.
	c := redis.NewClient(&redis.Options{Addr: ns.Addrs()[0], MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(ns.Close)
	}
	wg.Wait()
	ns.Close()

	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("PING succeeded after Close")
	}
	_ = c.Close()
	goleak.VerifyNone(t)
}
