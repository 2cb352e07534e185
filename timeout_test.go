package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRealSlowNodesDoNotTimeOut: three of five real nodes start answering 150 ms late each
// way, after two clients have seen them answer fast (a node timeout of 100 ms would give up
// on all three). An acquire with an 8 s TTL waits for them (its patience is 400 ms) and
// succeeds at once; one with a 1 s TTL (50 ms of patience) fails at first, and the round
// trips its late replies show raise the nodes' timeouts, so that a later attempt succeeds.
func TestRealSlowNodesDoNotTimeOut(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	var clients []redis.UniversalClient
	var proxies []*faultproxy.Proxy
	for i, a := range cluster.Addrs() {
		if i >= 3 {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
			continue
		}
		p, err := faultproxy.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		clients = append(clients, redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1}))
	}
	for _, rc := range clients {
		t.Cleanup(func() { rc.Close() })
	}
	ctx := ctxT(t, 60*time.Second)
	c8 := newTestClient(t, clients, WithNodeTimeout(100*time.Millisecond))
	c1 := newTestClient(t, clients, WithNodeTimeout(100*time.Millisecond))
	for _, c := range []*Client{c8, c1} { // fast round trips first
		for range 20 {
			l, err := c.TryAcquire(ctx, "slow:warm", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		settle(c)
	}
	for _, p := range proxies {
		p.SetDelay(150*time.Millisecond, 150*time.Millisecond)
	}
	l, err := c8.TryAcquire(ctx, "slow:8s", 8*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire with an 8 s TTL on three nodes 300 ms away: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c1.TryAcquire(ctx, "slow:1s", time.Second)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("first TryAcquire with a 1 s TTL: %v, want ErrNotAcquired (the nodes answer after its 100 ms)", err)
	}
	for range 20 {
		settle(c1) // the late replies come in: their round trips are sampled
		if l, err = c1.TryAcquire(ctx, "slow:1s", time.Second); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("TryAcquire with a 1 s TTL after the nodes' slow round trips were seen: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
