package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// These tests run the library through the go-redis clients people use as nodes: a
// *redis.ClusterClient of a real 3-shard Redis Cluster (one ClusterClient is one node of
// the quorum) beside plain *redis.Client nodes, and Sentinel failover clients. Like
// node_real_test.go they skip without redis-server unless REDLOCK_REQUIRE_REDIS=1.

// clusterSetup is a quorum of len(nodes) nodes: first one *redis.ClusterClient per Redis
// Cluster, then plain clients of independent servers.
type clusterSetup struct {
	clusters []*redisproc.Cluster
	nodes    []redis.UniversalClient
	// shards[i] has one plain client per shard of cluster node i, for asking a shard
	// what it holds.
	shards [][]redis.UniversalClient
}

// startClusterSetup starts the given number of 3-shard Redis Clusters (in parallel: a
// cluster takes about two seconds to turn cluster_state:ok) and plain independent nodes.
func startClusterSetup(t *testing.T, clusters, plain int) *clusterSetup {
	t.Helper()
	redisproc.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s := &clusterSetup{clusters: make([]*redisproc.Cluster, clusters)}
	errs := make([]error, clusters)
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Go(func() { s.clusters[i], errs[i] = redisproc.StartRedisCluster(ctx, 3, redisproc.Config{}) })
	}
	wg.Wait()
	for _, rc := range s.clusters {
		if rc != nil {
			t.Cleanup(func() { _ = rc.Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, rc := range s.clusters {
		s.nodes = append(s.nodes, rc.ClusterClientT(t))
		s.shards = append(s.shards, rc.ClientsT(t))
	}
	if plain > 0 {
		s.nodes = append(s.nodes, redisproc.StartT(t, plain, redisproc.Config{}).ClientsT(t)...)
	}
	return s
}

// keysOn returns every key that one server holds in its own key space (SCAN), sorted.
func keysOn(t *testing.T, ctx context.Context, rc redis.UniversalClient) []string {
	t.Helper()
	var keys []string
	var cursor uint64
	for {
		page, next, err := rc.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		keys = append(keys, page...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(keys)
	return keys
}

// shardsHolding returns, for cluster node i, the indexes of the shards whose key space holds
// key.
func (s *clusterSetup) shardsHolding(t *testing.T, ctx context.Context, i int, key string) []int {
	t.Helper()
	var out []int
	for j, rc := range s.shards[i] {
		if _, ok := slices.BinarySearch(keysOn(t, ctx, rc), key); ok {
			out = append(out, j)
		}
	}
	return out
}

// shardOf asks cluster node i's servers for key's slot (CLUSTER KEYSLOT) and returns the
// shard that owns it according to that shard's own CLUSTER SLOTS.
func (s *clusterSetup) shardOf(t *testing.T, ctx context.Context, i int, key string) int {
	t.Helper()
	slot, err := s.shards[i][0].ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
	}
	for j, rc := range s.shards[i] {
		slots, err := rc.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && r.Nodes[0].Addr == s.clusters[i].Nodes()[j].Addr() {
				return j
			}
		}
	}
	t.Fatalf("no shard of cluster %d owns slot %d of %q", i, slot, key)
	return -1
}

// checkOnOwnShard asserts checkOnShard for every cluster node.
func (s *clusterSetup) checkOnOwnShard(t *testing.T, ctx context.Context, key string, held bool, want Token) {
	t.Helper()
	for i := range s.clusters {
		s.checkOnShard(t, ctx, i, key, held, want)
	}
}

// checkOnShard asserts that, on cluster node i, key's fence counter (and key itself, when
// held) is held by exactly the shard that owns key's slot, and that the counter there
// equals want.
func (s *clusterSetup) checkOnShard(t *testing.T, ctx context.Context, i int, key string, held bool, want Token) {
	t.Helper()
	fence := slotCounter(key) // the default layout's counter, in key's slot
	owner := s.shardOf(t, ctx, i, key)
	check := []string{fence}
	if held {
		check = append(check, key)
	}
	for _, k := range check {
		if got := s.shardsHolding(t, ctx, i, k); !slices.Equal(got, []int{owner}) {
			t.Fatalf("cluster node %d: %q is held by shards %v, want only shard %d (the owner of %q's slot)", i, k, got, owner, key)
		}
	}
	v, err := s.shards[i][owner].Get(ctx, fence).Result()
	if err != nil {
		t.Fatalf("cluster node %d: GET %q on shard %d: %v", i, fence, owner, err)
	}
	// The slot counter is shared: keys of one slot minted after this one leave it above.
	if n, _ := strconv.ParseUint(v, 10, 64); Token(n) < want {
		t.Fatalf("cluster node %d: counter %q = %s, below the lock's token %d", i, fence, v, want)
	}
}

// TestRealClusterNodes runs the library on five nodes: three are *redis.ClusterClient
// nodes, each its own 3-shard Redis Cluster, and two are plain servers. The amnesia
// tolerance of 3 makes the quorum all five, so every acquire that succeeds has the acquire
// script (and raise.lua, where counters disagree) succeed on every cluster node, and the
// counter equals the token on each of them; with a majority quorum a node outside the
// deciding quorum may legitimately keep a lower counter. Each subtest also inspects the
// shards directly.
func TestRealClusterNodes(t *testing.T) {
	s := startClusterSetup(t, 3, 2)
	ctx := ctxT(t, 2*time.Minute)
	c := newTestClient(t, s.nodes, WithAmnesiaTolerance(3), WithNodeTimeout(2*time.Second), WithRetryDelay(5*time.Millisecond))
	if c.quorum != len(s.nodes) {
		t.Fatalf("quorum %d, want all %d nodes", c.quorum, len(s.nodes))
	}

	// One key of every layout slotKey knows. naive is the counter name a library without
	// the slot rule would use ("redlock:fence:" + the key, without its braces when the key
	// has a hash tag), and naiveShard the shard of a cluster started by StartRedisCluster
	// (slots 0-5460, 5461-10921, 10922-16383) that owns naive's slot: another shard than
	// the key's, so a script given the lock key and that counter would fail with CROSSSLOT.
	layouts := []struct {
		key, naive           string
		keyShard, naiveShard int
	}{
		{"payout:7", "redlock:fence:payout:7", 1, 2},       // slots 7230 and 14532
		{"job", "redlock:fence:job", 0, 1},                 // slots 2906 and 6750
		{"{user1}:lock", "redlock:fence:user1:lock", 1, 2}, // slots 8106 and 12595
		{"a}b", "redlock:fence:a}b", 1, 0},                 // a '}' but no tag: 7866 and 4030
		{"{x}", "redlock:fence:x", 2, 1},                   // all one tag: 16287 and 6159
	}

	t.Run("layouts", func(t *testing.T) {
		for _, tc := range layouts {
			t.Run(tc.key, func(t *testing.T) {
				for i := range s.clusters {
					if got := s.shardOf(t, ctx, i, tc.key); got != tc.keyShard {
						t.Fatalf("cluster %d: %q on shard %d, want %d", i, tc.key, got, tc.keyShard)
					}
					if got := s.shardOf(t, ctx, i, tc.naive); got != tc.naiveShard || got == tc.keyShard {
						t.Fatalf("cluster %d: naive counter %q on shard %d, want %d (not the key's %d)", i, tc.naive, got, tc.naiveShard, tc.keyShard)
					}
				}
				// What the slot rule prevents: the acquire script given the naive counter
				// name is refused by the cluster.
				err := acquireScript.Run(ctx, s.nodes[0], []string{tc.key, tc.naive, slotCounter(tc.key)}, "probe", 1000, 1, 0, "0").Err()
				if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
					t.Fatalf("acquire script with %q and %q: %v, want a CROSSSLOT error", tc.key, tc.naive, err)
				}

				var last Token
				for round := range 2 {
					l, err := c.Acquire(ctx, tc.key, 10*time.Second)
					if err != nil {
						t.Fatalf("round %d: Acquire: %v", round, err)
					}
					if l.Token() <= last {
						t.Fatalf("round %d: token %d after %d", round, l.Token(), last)
					}
					last = l.Token()
					settle(c) // the nodes beyond the quorum have answered too
					s.checkOnOwnShard(t, ctx, tc.key, true, l.Token())
					for i := range s.clusters {
						if got := s.nodes[i].Get(ctx, tc.key).Val(); got != l.ID() {
							t.Fatalf("cluster node %d holds %q, want the holder id %q", i, got, l.ID())
						}
					}
					if err := l.Extend(ctx, 20*time.Second); err != nil {
						t.Fatalf("round %d: Extend: %v", round, err)
					}
					settle(c)
					for i := range s.clusters {
						if ttl := s.nodes[i].PTTL(ctx, tc.key).Val(); ttl <= 10*time.Second {
							t.Fatalf("cluster node %d: TTL %v after Extend to 20s", i, ttl)
						}
					}
					if err := l.Release(ctx); err != nil {
						t.Fatalf("round %d: Release: %v", round, err)
					}
					settle(c)
					for i := range s.clusters {
						if n := s.nodes[i].Exists(ctx, tc.key).Val(); n != 0 {
							t.Fatalf("cluster node %d still has %q after Release", i, tc.key)
						}
					}
				}
				err = c.Do(ctx, tc.key, 3*time.Second, func(ctx context.Context, l *Lock) error {
					if l.Token() <= last {
						return fmt.Errorf("Do got token %d after %d", l.Token(), last)
					}
					last = l.Token()
					return nil
				})
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				settle(c)
				s.checkOnOwnShard(t, ctx, tc.key, false, last) // released by Do
			})
		}
	})

	t.Run("slow-path", func(t *testing.T) {
		// The counters disagree: the plain node's is an hour ahead of the clock. With two
		// nodes the quorum is both, so every acquire hears both counters, takes the slow
		// path, and succeeds only once raise.lua has lifted the cluster node's counter to
		// the token, through the ClusterClient on the key's shard.
		const key = "payout:slow"
		c2 := newTestClient(t, []redis.UniversalClient{s.nodes[0], s.nodes[3]}, WithNodeTimeout(2*time.Second))
		fence := slotCounter(key)
		ahead := time.Now().UnixMicro() + int64(time.Hour/time.Microsecond)
		if err := s.nodes[3].Set(ctx, fence, ahead, 0).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := c2.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() != Token(ahead+1) {
			t.Fatalf("token %d, want %d (the higher counter, incremented)", l.Token(), ahead+1)
		}
		settle(c2)
		s.checkOnShard(t, ctx, 0, key, true, l.Token()) // raised from the clock's value
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("multi", func(t *testing.T) {
		keys := []string{"{acct:9}:debit", "{acct:9}:credit", "{acct:9}"}
		m, err := c.AcquireMulti(ctx, keys, 10*time.Second)
		if err != nil {
			t.Fatalf("AcquireMulti over one hash tag: %v", err)
		}
		settle(c)
		for _, k := range keys {
			s.checkOnOwnShard(t, ctx, k, true, m.Token(k))
		}
		if err := m.Extend(ctx, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		settle(c)
		for i := range s.nodes {
			if n := s.nodes[i].Exists(ctx, keys...).Val(); n != 0 {
				t.Fatalf("node %d still holds %d of the keys after Release", i, n)
			}
		}

		// "payout:7" and "job" are on different shards, and "{acct:9}:x" in yet another
		// slot: with a Cluster node the set is refused before anything is sent.
		for _, bad := range [][]string{{"payout:7", "job"}, {"{acct:9}:x", "{acct:8}:x"}} {
			_, err := c.TryAcquireMulti(ctx, bad, 10*time.Second)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("TryAcquireMulti(%q): %v, want ErrInvalidArgument", bad, err)
			}
			for i := range s.nodes {
				if n := s.nodes[i].Exists(ctx, bad...).Val(); n != 0 {
					t.Fatalf("node %d holds %d keys of a refused set", i, n)
				}
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		const key = "{user1}:lock"
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		settle(c)
		st, err := c.Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Holder != l.ID() || st.NextTokenAtLeast <= l.Token() {
			t.Fatalf("Status: holder %q, next token ≥ %d; want %q and above %d", st.Holder, st.NextTokenAtLeast, l.ID(), l.Token())
		}
		for _, ns := range st.Nodes {
			if ns.Err != nil || ns.Holder != l.ID() || ns.Counter != l.Token() || ns.TTL <= 0 {
				t.Fatalf("node %d (%s): err %v, holder %q, counter %d, TTL %v", ns.Node, ns.Addr, ns.Err, ns.Holder, ns.Counter, ns.TTL)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("redisfence", func(t *testing.T) {
		// The store is a Redis Cluster too; its token key must sit on the data key's shard.
		// (The store here is the first cluster node, so the data key must not be the lock key.)
		const lockKey, key = "ledger:7", "balance:7"
		f := NewRedisFence(s.nodes[0])
		l, err := c.Acquire(ctx, lockKey, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Set(ctx, key, "100", l.Token()); err != nil {
			t.Fatalf("Set: %v", err)
		}
		if v, err := f.IncrBy(ctx, key, 5, l.Token()); err != nil || v != 105 {
			t.Fatalf("IncrBy: %d, %v; want 105", v, err)
		}
		if v, tok, err := f.Get(ctx, key); err != nil || v != "105" || tok != l.Token() {
			t.Fatalf("Get: %q, token %d, %v; want 105 and %d", v, tok, err, l.Token())
		}
		tokenKey, _ := highestKey(key)
		owner := s.shardOf(t, ctx, 0, key)
		for _, k := range []string{key, tokenKey} {
			if got := s.shardsHolding(t, ctx, 0, k); !slices.Equal(got, []int{owner}) {
				t.Fatalf("%q held by shards %v, want only %d", k, got, owner)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l2, err := c.Acquire(ctx, lockKey, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Release(ctx)
		if err := f.Set(ctx, key, "200", l2.Token()); err != nil {
			t.Fatal(err)
		}
		var stale *StaleTokenError
		if _, err := f.IncrBy(ctx, key, 1, l.Token()); !errors.As(err, &stale) || stale.Highest != l2.Token() {
			t.Fatalf("IncrBy with the old token: %v, want a StaleTokenError with Highest %d", err, l2.Token())
		}
		if v, _, _ := f.Get(ctx, key); v != "200" {
			t.Fatalf("value %q after a refused stale write, want 200", v)
		}
	})

	t.Run("resharded", func(t *testing.T) {
		// A held lock's slot moves to another shard (CLUSTER SETSLOT + MIGRATE, as
		// redis-cli --cluster reshard does). The ClusterClient follows the MOVED reply,
		// and the lock is released, and then acquired again with a larger token.
		const key = "job"
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		settle(c)
		fence := slotCounter(key)
		slot := int(keySlot(key))
		from := s.shardOf(t, ctx, 0, key)
		to := (from + 1) % 3
		moveSlot(t, ctx, s.clusters[0], slot, from, to, key, fence)
		if got := s.shardOf(t, ctx, 0, key); got != to {
			t.Fatalf("slot %d on shard %d after the move, want %d", slot, got, to)
		}
		if got := s.shardsHolding(t, ctx, 0, key); !slices.Equal(got, []int{to}) {
			t.Fatalf("lock key on shards %v after the move, want %d", got, to)
		}
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Fatalf("Extend after the move: %v", err)
		}
		settle(c)
		if ttl := s.shards[0][to].PTTL(ctx, key).Val(); ttl <= 10*time.Second {
			t.Fatalf("moved lock key's TTL on shard %d is %v after Extend to 20s", to, ttl)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release after the move: %v", err)
		}
		settle(c)
		if n := s.nodes[0].Exists(ctx, key).Val(); n != 0 {
			t.Fatal("the moved lock key is still there after Release")
		}
		l2, err := c.TryAcquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token %d after %d", l2.Token(), l.Token())
		}
		settle(c)
		s.checkOnOwnShard(t, ctx, key, true, l2.Token())
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// moveSlot moves slot, holding keys, from shard from to shard to of cluster, the way a
// resharding tool does: IMPORTING on the target, MIGRATING on the source, MIGRATE of the
// keys, then NODE on every shard, and waits until every shard's CLUSTER SLOTS agrees.
func moveSlot(t *testing.T, ctx context.Context, cluster *redisproc.Cluster, slot, from, to int, keys ...string) {
	t.Helper()
	shards := cluster.ClientsT(t)
	ids := make([]string, len(shards))
	for i, rc := range shards {
		id, err := rc.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	do := func(i int, args ...any) {
		t.Helper()
		if err := shards[i].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("shard %d: %v: %v", i, args, err)
		}
	}
	do(to, "cluster", "setslot", slot, "importing", ids[from])
	do(from, "cluster", "setslot", slot, "migrating", ids[to])
	host, port, _ := strings.Cut(cluster.Nodes()[to].Addr(), ":")
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	do(from, args...)
	for i := range shards {
		do(i, "cluster", "setslot", slot, "node", ids[to])
	}
	toAddr := cluster.Nodes()[to].Addr()
	testutil.WaitFor(t, 10*time.Second, "the moved slot on every shard's view", func() bool {
		for _, rc := range shards {
			slots, err := rc.ClusterSlots(ctx).Result()
			if err != nil {
				return false
			}
			found := false
			for _, r := range slots {
				if r.Start <= slot && slot <= r.End {
					found = r.Nodes[0].Addr == toAddr
				}
			}
			if !found {
				return false
			}
		}
		return true
	})
}

// TestRealSentinelNodes: Sentinel failover clients (redis.NewFailoverClient) as nodes. They
// have no address of their own, so New tells them apart by run_id: two failover clients of
// one master are refused, while clients of different masters, mixed with a plain client,
// acquire, extend and release, each master holding the key and its counter.
// (TestRealSentinelFailover covers a failover during a Do.)
func TestRealSentinelNodes(t *testing.T) {
	g := redisproc.StartSentinelGroupT(t, redisproc.SentinelConfig{Masters: 2, Sentinels: 1})
	ctx := ctxT(t, time.Minute)
	failover := func(name string) redis.UniversalClient {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: g.SentinelAddrs()})
		t.Cleanup(func() { fc.Close() })
		return fc
	}
	m1, m1again, m2 := failover("m1"), failover("m1"), failover("m2")
	plain := redisproc.StartT(t, 1, redisproc.Config{}).ClientsT(t)[0]
	var direct []redis.UniversalClient
	for _, name := range g.MasterNames() {
		rc := redis.NewClient(&redis.Options{Addr: g.Nodes(name)[0].Addr()})
		t.Cleanup(func() { rc.Close() })
		direct = append(direct, rc)
	}
	direct = append(direct, plain)

	_, err := New([]redis.UniversalClient{m1, m2, m1again})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "nodes 0 and 2") {
		t.Fatalf("New with two failover clients of one master: %v, want ErrInvalidArgument naming nodes 0 and 2", err)
	}

	c := newTestClient(t, []redis.UniversalClient{m1, m2, plain}, WithNodeTimeout(2*time.Second))
	var last Token
	for round := range 2 {
		l, err := c.Acquire(ctx, "sentinel:plain", 10*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if l.Token() <= last {
			t.Fatalf("token %d after %d", l.Token(), last)
		}
		last = l.Token()
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		settle(c)
		fence := slotCounter("sentinel:plain")
		for i, rc := range direct {
			if got := rc.Get(ctx, "sentinel:plain").Val(); got != l.ID() {
				t.Fatalf("master %d holds %q, want %q", i, got, l.ID())
			}
			if got := rc.Get(ctx, fence).Val(); got != strconv.FormatUint(uint64(l.Token()), 10) {
				t.Fatalf("master %d counter %s, want %d", i, got, l.Token())
			}
			if ttl := rc.PTTL(ctx, "sentinel:plain").Val(); ttl <= 10*time.Second {
				t.Fatalf("master %d TTL %v after Extend to 20s", i, ttl)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		settle(c)
		for i, rc := range direct {
			if rc.Exists(ctx, "sentinel:plain").Val() != 0 {
				t.Fatalf("master %d still holds the key after Release", i)
			}
		}
	}
}
