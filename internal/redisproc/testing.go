package redisproc

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// requireEnv is the environment variable that turns a missing redis-server
// from a skipped test into a failed one.
const requireEnv = "REDLOCK_REQUIRE_REDIS"

// startTimeout bounds the start-up of a cluster in StartT.
const startTimeout = 20 * time.Second

// Require returns the path of redis-server found on PATH. When it is missing
// the test is skipped, or fails if the environment variable
// REDLOCK_REQUIRE_REDIS is set to 1.
func Require(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	testutil.SkipOrFail(tb, requireEnv, "redis-server not found on PATH", "a real Redis", "install it with apt-get install -y redis-server")
	return ""
}

// StartT starts a cluster of n nodes for a test and stops it in tb.Cleanup.
// It skips or fails the test as Require does when redis-server is missing
// (unless cfg.Binary is set), bounds the start-up to 20 seconds, and fails
// the test if the cluster cannot be started.
func StartT(tb testing.TB, n int, cfg Config) *Cluster {
	tb.Helper()
	if cfg.Binary == "" {
		cfg.Binary = Require(tb)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), startTimeout)
	defer cancel()
	c, err := Start(ctx, n, cfg)
	if err != nil {
		tb.Fatalf("start redis cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("close redis cluster: %v", err)
		}
	})
	return c
}

// ClientsT returns one go-redis client per node, in node order, built with
// default options apart from Addr. The clients are closed in tb.Cleanup,
// which runs before the cluster's own cleanup when the cluster came from
// StartT.
func (c *Cluster) ClientsT(tb testing.TB) []redis.UniversalClient {
	tb.Helper()
	clients := make([]redis.UniversalClient, len(c.nodes))
	for i, n := range c.nodes {
		client := redis.NewClient(&redis.Options{Addr: n.Addr()})
		clients[i] = client
		tb.Cleanup(func() { _ = client.Close() })
	}
	return clients
}

// StartRedisClusterT starts one Redis Cluster of the given number of shards for a test,
// as StartRedisCluster does, and stops it in tb.Cleanup. It skips or fails the test as
// Require does when redis-server is missing (unless cfg.Binary is set), bounds the
// start-up to 20 seconds, and fails the test if the cluster cannot be formed.
func StartRedisClusterT(tb testing.TB, shards int, cfg Config) *Cluster {
	tb.Helper()
	if cfg.Binary == "" {
		cfg.Binary = Require(tb)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), startTimeout)
	defer cancel()
	c, err := StartRedisCluster(ctx, shards, cfg)
	if err != nil {
		tb.Fatalf("start Redis Cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("close Redis Cluster: %v", err)
		}
	})
	return c
}

// ClusterClientT returns a go-redis client of the whole Redis Cluster (see
// Cluster.ClusterClient) and closes it in tb.Cleanup. It fails the test for a Cluster of
// independent nodes.
func (c *Cluster) ClusterClientT(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc, err := c.ClusterClient()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// StartSentinelGroupT starts a Sentinel group for a test, as StartSentinelGroup does, and
// stops it in tb.Cleanup. It skips or fails the test as Require does when redis-server is
// missing (unless cfg.Binary is set), bounds the start-up to 30 seconds (Sentinels find
// each other through hello messages sent every 2 s), and fails the test if the group
// cannot be started.
func StartSentinelGroupT(tb testing.TB, cfg SentinelConfig) *SentinelGroup {
	tb.Helper()
	if cfg.Binary == "" {
		cfg.Binary = Require(tb)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	g, err := StartSentinelGroup(ctx, cfg)
	if err != nil {
		tb.Fatalf("start Sentinel group: %v", err)
	}
	tb.Cleanup(func() {
		if err := g.Close(); err != nil {
			tb.Errorf("close Sentinel group: %v", err)
		}
	})
	return g
}
