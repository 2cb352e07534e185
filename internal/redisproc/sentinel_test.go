package redisproc_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

// TestSentinelGroup starts one master with a replica and three Sentinels and checks what
// StartSentinelGroup and Failover promise: the Sentinels report the first data node as the
// master and know the replica and each other; a failover client writes to it; after
// Failover every Sentinel reports the replica as the master, which has the write and takes
// new ones through the same failover client; and Close stops every process by PID.
func TestSentinelGroup(t *testing.T) {
	start := time.Now()
	g := redisproc.StartSentinelGroupT(t, redisproc.SentinelConfig{Masters: 1, Replicas: 1, Sentinels: 3})
	t.Logf("Sentinel group ready in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got := g.MasterNames(); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("MasterNames() = %q", got)
	}
	nodes := g.Nodes("m1")
	if len(nodes) != 2 || len(g.Sentinels()) != 3 || len(g.SentinelAddrs()) != 3 {
		t.Fatalf("%d data nodes and %d sentinels, want 2 and 3", len(nodes), len(g.Sentinels()))
	}
	if g.Nodes("nope") != nil || g.NodeAt("m1", "127.0.0.1:1") != nil {
		t.Fatal("an unknown master or address has nodes")
	}
	addr, err := g.MasterAddr(ctx, "m1")
	if err != nil || addr != nodes[0].Addr() {
		t.Fatalf("MasterAddr = %q, %v; want %s", addr, err, nodes[0].Addr())
	}
	for _, s := range g.Sentinels() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		reps, err := sc.Replicas(ctx, "m1").Result()
		peers, perr := sc.Sentinels(ctx, "m1").Result()
		sc.Close()
		if err != nil || perr != nil || len(reps) != 1 || reps[0]["port"] != strings.Split(nodes[1].Addr(), ":")[1] || len(peers) != 2 {
			t.Fatalf("sentinel %s: replicas %v (%v), other sentinels %d (%v)", s.Addr(), reps, err, len(peers), perr)
		}
	}

	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m1", SentinelAddrs: g.SentinelAddrs(), MaxRetries: -1})
	defer fc.Close()
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The write reaches the replica before the failover: WAIT returns the replicas that
	// acknowledged it.
	if n, err := fc.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}

	after, err := g.Failover(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if after != nodes[1].Addr() {
		t.Fatalf("new master %s, want the replica %s", after, nodes[1].Addr())
	}
	promoted := redis.NewClient(&redis.Options{Addr: after})
	defer promoted.Close()
	if v, err := promoted.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("the promoted replica has k = %q, %v; want the write made before the failover", v, err)
	}
	// The failover client follows the switch (Sentinel's +switch-master): a write through it
	// lands on the new master.
	testutil.WaitFor(t, 20*time.Second, "a write through the failover client to reach the new master", func() bool {
		return fc.Set(ctx, "k", "after", 0).Err() == nil && promoted.Get(ctx, "k").Val() == "after"
	})

	pids := []int{nodes[0].PID(), nodes[1].PID()}
	for _, s := range g.Sentinels() {
		pids = append(pids, s.PID())
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(nodes, g.Sentinels()...) {
		if n.Running() {
			t.Errorf("%s still running after Close (pids %v)", n.Addr(), pids)
		}
	}
}

func TestSentinelGroupBadConfig(t *testing.T) {
	for _, cfg := range []redisproc.SentinelConfig{
		{Masters: 0, Sentinels: 1},
		{Masters: 1, Sentinels: 0},
		{Masters: 1, Replicas: -1, Sentinels: 1},
		{Masters: 1, Sentinels: 3, Quorum: 4},
	} {
		cfg.Binary = "/nonexistent/redis-server" // never started: the check comes first
		if g, err := redisproc.StartSentinelGroup(t.Context(), cfg); err == nil {
			g.Close()
			t.Errorf("%+v: no error", cfg)
		}
	}
}
