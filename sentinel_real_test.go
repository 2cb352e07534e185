package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRealSentinelFailover: three nodes, each a Sentinel-managed master with one replica,
// watched by three sentinels. During a Do, one master is failed over to its replica; the
// Do keeps its lock (the other two nodes are a quorum), and the next acquisition gets a
// larger token, as docs/design.md §5.6 says for a node that may have lost its state.
func TestRealSentinelFailover(t *testing.T) {
	g := redisproc.StartSentinelGroupT(t, redisproc.SentinelConfig{Masters: 3, Replicas: 1, Sentinels: 3})
	ctx := ctxT(t, 2*time.Minute)
	var clients []redis.UniversalClient
	for _, name := range g.MasterNames() {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: g.SentinelAddrs(), MaxRetries: -1})
		t.Cleanup(func() { fc.Close() })
		clients = append(clients, fc)
	}
	c := newTestClient(t, clients, WithNodeTimeout(time.Second))
	var first Token
	err := c.Do(ctx, "sentinel:job", 3*time.Second, func(fctx context.Context, l *Lock) error {
		first = l.Token()
		if _, err := g.Failover(ctx, "m1"); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
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
