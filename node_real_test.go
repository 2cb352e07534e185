package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// These tests run against real redis-server processes started by internal/redisproc on
// free loopback ports. They skip when redis-server is missing, unless REDLOCK_REQUIRE_REDIS=1
// (set by .ci/run), which turns the skip into a failure.

// TestRealContention: 8 goroutines × 200 acquisitions of one key on 5 real nodes. A shared
// counter is incremented under the lock with a separate load and store, so any overlap of
// two holders would lose an update; the holding order must see strictly increasing tokens.
func TestRealContention(t *testing.T) {
	t.Run("fencing", func(t *testing.T) { realContention(t, 200, true) })
	t.Run("without-fencing", func(t *testing.T) { realContention(t, 100, false, WithoutFencing()) })
}

// realContention runs 8 workers that each acquire, update a shared counter and release,
// rounds times. No two may hold the lock at once, and no update may be lost. With fencing,
// tokens must increase in the order of the holdings; without, every token must be 0.
func realContention(t *testing.T, rounds int, fenced bool, opts ...Option) {
	const workers = 8
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	c := newTestClient(t, cluster.ClientsT(t), append([]Option{WithNodeTimeout(time.Second), WithRetryDelay(time.Millisecond)}, opts...)...)
	ctx := ctxT(t, 3*time.Minute)

	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		counter  atomic.Int64
		mu       sync.Mutex
		order    []Token
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := c.Acquire(ctx, "real:contention", 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if !inside.CompareAndSwap(0, 1) {
					overlaps.Add(1)
				}
				mu.Lock()
				order = append(order, l.Token())
				mu.Unlock()
				v := counter.Load()
				counter.Store(v + 1)
				inside.Store(0)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping holders", n)
	}
	if got := counter.Load(); got != int64(workers*rounds) {
		t.Fatalf("counter %d, want %d: an update was lost", got, workers*rounds)
	}
	if !fenced {
		for i, tok := range order {
			if tok != 0 {
				t.Fatalf("holding %d got token %d without fencing, want 0", i, tok)
			}
		}
		for i, rc := range cluster.ClientsT(t) {
			if n, err := rc.Exists(ctx, FencePrefix+"{real:contention}").Result(); err != nil || n != 0 {
				t.Fatalf("node %d: fence counter present without fencing (exists %d, err %v)", i, n, err)
			}
		}
		return
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("holding %d got token %d after %d", i, order[i], order[i-1])
		}
	}
}

// latencies runs rounds of TryAcquire+Release and returns the acquire and release latencies.
func latencies(tb testing.TB, c *Client, key string, rounds int) (acq, rel []time.Duration) {
	tb.Helper()
	ctx := ctxT(tb, time.Minute)
	for i := range rounds {
		start := time.Now()
		l, err := c.TryAcquire(ctx, fmt.Sprintf("%s:%d", key, i), 10*time.Second)
		if err != nil {
			tb.Fatal(err)
		}
		mid := time.Now()
		if err := l.Release(ctx); err != nil {
			tb.Fatal(err)
		}
		acq = append(acq, mid.Sub(start))
		rel = append(rel, time.Since(mid))
	}
	return acq, rel
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// TestRealHungNode stops one of five real nodes with SIGSTOP. The go-redis clients use
// default options, so a call to that node blocks for the 3 s read timeout whatever its
// context says. Acquire and release must still finish at quorum speed: the node timeout is
// set to 2 s, so any wait for the hung node would show as seconds.
func TestRealHungNode(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	healthyAcq, healthyRel := latencies(t, c, "real:healthy", 50)
	if err := cluster.Nodes()[2].Pause(); err != nil {
		t.Fatal(err)
	}
	hungAcq, hungRel := latencies(t, c, "real:hung", 50)
	t.Logf("acquire p50 healthy %v, one node hung %v; release p50 %v, %v; p99 acquire %v, %v",
		percentile(healthyAcq, 0.5), percentile(hungAcq, 0.5), percentile(healthyRel, 0.5),
		percentile(hungRel, 0.5), percentile(healthyAcq, 0.99), percentile(hungAcq, 0.99))
	for name, d := range map[string][]time.Duration{"acquire": hungAcq, "release": hungRel} {
		if p := percentile(d, 1); p > 500*time.Millisecond {
			t.Errorf("%s with one hung node took up to %v: it waited for the hung node", name, p)
		}
	}
	if err := cluster.Nodes()[2].Resume(); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestRealKilledNode: with one node killed, locks are still granted; after a restart the
// node takes part again, its script cache empty (NOSCRIPT, then the EVAL fallback).
func TestRealKilledNode(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{Persist: true})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	latencies(t, c, "real:warm", 3)
	victim := cluster.Nodes()[1]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	var last Token
	for i := range 20 {
		l, err := c.TryAcquire(ctx, "real:killed", 10*time.Second)
		if err != nil {
			t.Fatalf("round %d with a node killed: %v", i, err)
		}
		if l.Token() <= last {
			t.Fatalf("token %d after %d", l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The acquires sent to the dead node are still being retried by go-redis; let them and
	// the releases queued behind them finish before the node comes back.
	settle(c)
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// go-redis keeps answering with its last dial error for a moment after a node died.
	testutil.WaitFor(t, 10*time.Second, "node 1 to answer PING", func() bool { return clients[1].Ping(ctx).Err() == nil })
	l, err := c.TryAcquire(ctx, "real:killed", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	if got := clients[1].Get(ctx, "real:killed").Val(); got != l.id {
		t.Fatalf("restarted node holds %q, want our id: the EVAL fallback did not run", got)
	}
	if l.Token() <= last {
		t.Fatalf("token %d after restart, not above %d", l.Token(), last)
	}
}

// TestRealScripts pins each script's SHA: what a real server computes when loading it must
// equal the constant the library sends with EVALSHA (scripts_sha.go), for every script,
// RedisFence's included.
func TestRealScripts(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	rc := cluster.ClientsT(t)[0]
	ctx := ctxT(t, 10*time.Second)
	if len(luaScripts) < 13 {
		t.Fatalf("%d scripts registered", len(luaScripts))
	}
	for name, s := range luaScripts {
		sha, err := s.Load(ctx, rc).Result()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sha != s.Hash() {
			t.Fatalf("%s: server SHA %s, constant %s", name, sha, s.Hash())
		}
	}
}

// TestRealFenceKeySlot asks a cluster-enabled redis-server for the hash slot of lock keys
// and of their fence counters: they must be equal, or the scripts would fail on a node that
// is itself a Redis Cluster (CROSSSLOT).
func TestRealFenceKeySlot(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--cluster-enabled", "yes"}})
	rc := cluster.ClientsT(t)[0]
	ctx := ctxT(t, 10*time.Second)
	keys := []string{"orders:42", "{user1}:lock", "a{b", "a{b}c{d}", "}a{b}", "{{x}}", "payout:é:日本", "",
		"a}b", "{}x", "}{", "}", "{}", "x}{}y", "{}{a}", "{x}", "{a{b}", "{}}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("k%d:%x", i, i*7919), fmt.Sprintf("k}%d{", i))
	}
	for _, key := range keys {
		if key == "" {
			continue
		}
		fence, err := fenceKey(key)
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		token, err := highestKey(key)
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		a, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		q := newQueueKeys(key)
		for _, derived := range []string{fence, token, slotCounter(key), q.queue, q.waiters} {
			b, err := rc.ClusterKeySlot(ctx, derived).Result()
			if err != nil {
				t.Fatal(err)
			}
			if a != b || int64(keySlot(key)) != a {
				t.Fatalf("key %q in slot %d (ours %d), its key %q in slot %d", key, a, keySlot(key), derived, b)
			}
		}
	}
}

// TestRealExpiry: keys expire on real nodes with their TTL. A holder that does not release
// loses the lock; the next holder gets a larger token; the stale Release and Extend return
// ErrNotHeld and leave the new holder's key alone.
func TestRealExpiry(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryDelay(10*time.Millisecond))
	ctx := ctxT(t, time.Minute)
	a, err := c.TryAcquire(ctx, "real:expiry", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "real:expiry", time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("second acquire while held: %v", err)
	}
	b, err := c.Acquire(ctx, "real:expiry", 10*time.Second) // succeeds once a's keys expired
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(a.Until()) {
		t.Fatal("a second holder got in before the first one's validity ended")
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d not above %d", b.Token(), a.Token())
	}
	settle(c)
	var holding []int // b holds at least a quorum; its acquire may have lost a node to a leftover
	for i, rc := range clients {
		if rc.Get(ctx, "real:expiry").Val() == b.id {
			holding = append(holding, i)
		}
	}
	if len(holding) < c.Quorum() {
		t.Fatalf("b holds %v, fewer than a quorum", holding)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale release: %v", err)
	}
	if err := a.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale extend: %v", err)
	}
	settle(c)
	for _, i := range holding {
		if got := clients[i].Get(ctx, "real:expiry").Val(); got != b.id {
			t.Fatalf("node %d: new holder's key became %q", i, got)
		}
		if ttl := clients[i].PTTL(ctx, "real:expiry").Val(); ttl < 9*time.Second || ttl > 10*time.Second {
			t.Fatalf("node %d: new holder's TTL changed to %v", i, ttl)
		}
	}
}

// TestRealAmnesiaTokensStillIncrease restarts every node without persistence, so every
// counter is lost. The clock-seeded counters still issue a token above all earlier ones.
func TestRealAmnesiaTokensStillIncrease(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	c := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	var last Token
	for round := range 3 {
		for range 5 {
			l, err := c.TryAcquire(ctx, "real:amnesia", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("round %d: token %d not above %d", round, l.Token(), last)
			}
			last = l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		settle(c)
		for _, n := range cluster.Nodes() {
			if err := n.RestartEmpty(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// aclCommands is the command list docs/operations.md gives for an ACL user of the library
// (cmd/redlock's TestRealExecNodesFileAuthACL uses the same list for the CLI): what go-redis
// sends on connect, the scripts, and the commands the scripts call, RedisFence's included.
const aclCommands = "+ping +hello +client|setname +eval +evalsha +get +set +pttl +incr +pexpire +del +time +hset +incrby +exists +decrby"

// TestRealACLUser runs every library call, the slow path (raise) and RedisFence's writes as
// a Redis ACL user that may run only the documented commands.
func TestRealACLUser(t *testing.T) {
	const pw = "ac1Secret"
	acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "resetchannels", "-@all"}, strings.Fields(aclCommands)...)
	cluster := redisproc.StartT(t, 5, redisproc.Config{ExtraArgs: acl})
	admin := cluster.ClientsT(t) // the default user, to set the counters out of step
	clients := aclUserClients(t, cluster.Addrs(), pw)
	ctx := ctxT(t, 30*time.Second)
	fence := slotCounter("acl:k")
	initial := []int64{10, 10, 5, 3, 12} // no three equal after an increment: the slow path
	base := aheadOfSeeds()               // above the clock, where the slot layout's floor does not reach
	for i := range initial {
		initial[i] += base
		admin[i].Set(ctx, fence, initial[i], 0)
	}
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	l, err := c.TryAcquire(ctx, "acl:k", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire as the ACL user: %v", err)
	}
	settle(c)
	at, raised := 0, 0
	for i, rc := range admin {
		got, _ := rc.Get(ctx, fence).Int64()
		if got == int64(l.Token()) {
			at++
			if got > initial[i]+1 { // INCR adds 1: more means raise.lua set it
				raised++
			}
		}
	}
	if at < c.Quorum() || raised == 0 {
		t.Fatalf("token %d on %d nodes, %d of them raised; want a quorum and a raise", l.Token(), at, raised)
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("extend as the ACL user: %v", err)
	}
	if st, err := c.Status(ctx, "acl:k"); err != nil || !st.HeldByQuorum() {
		t.Fatalf("status as the ACL user: %+v, %v", st, err)
	}
	// Without the read/write lock's commands (ZRANGE), its status still reads the writer and
	// the intent, and says the readers are unknown.
	if st, err := c.RWLock("acl:rw").Status(ctx); err != nil || st.ReadersAnswered != 0 || st.Nodes[0].Err != nil || st.Nodes[0].Readers != -1 {
		t.Fatalf("read/write lock status as the ACL user: %+v, %v; want readers -1 on every node and no error", st, err)
	}
	f := NewRedisFence(clients[0])
	if err := f.Set(ctx, "acl:data", "v", l.Token()); err != nil {
		t.Fatalf("fenced set: %v", err)
	}
	if err := f.HSet(ctx, "acl:h", map[string]string{"a": "1"}, l.Token()); err != nil {
		t.Fatalf("fenced hset: %v", err)
	}
	if _, err := f.IncrBy(ctx, "acl:n", 5, l.Token()); err != nil {
		t.Fatalf("fenced incrby: %v", err)
	}
	// IncrByAll, including the undo of a leg when a later one cannot be applied.
	if _, err := f.IncrByAll(ctx, FencedIncr{"{acl}:a", -5, l.Token()}, FencedIncr{"{acl}:b", 5, l.Token()}); err != nil {
		t.Fatalf("fenced incrby all: %v", err)
	}
	admin[0].Set(ctx, "{acl}:c", "not a number", 0)
	if _, err := f.IncrByAll(ctx, FencedIncr{"{acl}:a", 1, l.Token()}, FencedIncr{"{acl}:new", 1, l.Token()}, FencedIncr{"{acl}:c", 1, l.Token()}); err == nil || strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("fenced incrby all with a bad leg: %v, want the leg's error, not NOPERM", err)
	}
	if v, _ := admin[0].Get(ctx, "{acl}:a").Int64(); v != -5 || admin[0].Exists(ctx, "{acl}:new").Val() != 0 {
		t.Fatalf("the bad leg's transfer was not undone: a = %d", v)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release as the ACL user: %v", err)
	}
	// The list is not wider than it must be: a command outside it is refused.
	if err := clients[0].Keys(ctx, "*").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("KEYS as the ACL user: %v, want NOPERM", err)
	}
}

// TestRealSameServerTwice: one redis-server given under two addresses is refused by New (its
// run_id answers twice), and two Sentinel-managed clients, which go-redis gives no address
// of their own, are no longer mistaken for one node.
func TestRealSameServerTwice(t *testing.T) {
	cluster := redisproc.StartT(t, 2, redisproc.Config{})
	a := cluster.Addrs()[0]
	_, port, _ := strings.Cut(a, ":")
	twin := redis.NewClient(&redis.Options{Addr: "localhost:" + port})
	t.Cleanup(func() { twin.Close() })
	clients := append(cluster.ClientsT(t), twin)
	want := fmt.Sprintf("nodes 0 (%s) and 2 (localhost:%s) are the same Redis server", a, port)
	if _, err := New(clients); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Fatalf("New with %s and localhost:%s: %v, want ErrInvalidArgument saying %q", a, port, err, want)
	}
	if c, err := New(cluster.ClientsT(t)); err != nil {
		t.Fatalf("New with distinct servers: %v", err)
	} else {
		c.Close()
	}
	var failover []redis.UniversalClient
	for _, m := range []string{"m1", "m2", "m3"} {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: m, SentinelAddrs: []string{"127.0.0.1:1"}, MaxRetries: -1})
		t.Cleanup(func() { fc.Close() })
		failover = append(failover, fc)
	}
	c, err := New(failover, WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatalf("New with three Sentinel-managed clients: %v", err)
	}
	c.Close()
}

// TestRealReplicaRefused: a node that is a replica of another (REPLICAOF) is refused by New
// with ErrInvalidArgument, unless WithReplicasAllowed; Status through such a client reads
// what the replica holds, which is why it is refused for locking.
func TestRealReplicaRefused(t *testing.T) {
	cluster := redisproc.StartT(t, 4, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 30*time.Second)
	host, port, _ := strings.Cut(cluster.Addrs()[0], ":")
	if err := admin[3].SlaveOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "node 3 to replicate node 0", func() bool {
		info, err := admin[3].Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	_, err := New(cluster.ClientsT(t))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "node 3") || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("New with node 3 a replica of node 0: %v, want ErrInvalidArgument naming node 3", err)
	}
	c, err := New(cluster.ClientsT(t), WithReplicasAllowed())
	if err != nil {
		t.Fatalf("New with WithReplicasAllowed: %v", err)
	}
	c.Close()
}

// TestRealRefusingNodeBacksOff: a node that refuses this client's authentication gets a dial
// per pause (50 ms doubling to 1 s), not one per attempt, while the lock keeps working on the
// other nodes. Two ways to be refused: a wrong password (WRONGPASS in go-redis's handshake),
// and no password at all, where Redis answers the handshake with NOAUTH, keeps the
// connection, then closes it at the first command of more than ten arguments (every acquire
// script: "Protocol error: unauthenticated multibulk length"). Before, every attempt dialled
// again: about 150 connections in 1.5 s with a wrong password, 340 in 2 s without one.
func TestRealRefusingNodeBacksOff(t *testing.T) {
	const pw = "rightSecret"
	cluster := redisproc.StartT(t, 5, redisproc.Config{ExtraArgs: []string{"--user", "lock", "on", ">" + pw, "~*", "&*", "+@all"}})
	admin := cluster.ClientsT(t)
	clients := func(user, password string) []redis.UniversalClient {
		var cs []redis.UniversalClient
		for i, a := range cluster.Addrs() {
			o := &redis.Options{Addr: a, Username: "lock", Password: pw, MaxRetries: -1, DialerRetries: 1}
			if i == 0 {
				o.Username, o.Password = user, password
			}
			rc := redis.NewClient(o)
			t.Cleanup(func() { rc.Close() })
			cs = append(cs, rc)
		}
		return cs
	}
	// The default user needs a password too, or a client without one is let in.
	if err := admin[0].ConfigSet(context.Background(), "requirepass", "adminSecret").Err(); err != nil {
		t.Fatal(err)
	}
	admin[0] = redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0], Password: "adminSecret"})
	t.Cleanup(func() { admin[0].Close() })
	ctx := ctxT(t, time.Minute)
	holder := newTestClient(t, clients("lock", pw))
	held, err := holder.TryAcquire(ctx, "refusing", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, password string
		opts                 []Option
	}{
		{"wrong password", "lock", "wrongSecret", []Option{WithoutWakeups()}},
		{"no password", "", "", nil}, // wake-ups on: queued acquires, the longest scripts
	} {
		t.Run(tc.name, func(t *testing.T) {
			waiter := newTestClient(t, clients(tc.user, tc.password), append(tc.opts, WithRetryDelay(10*time.Millisecond))...)
			before := connectionsReceived(t, admin[0])
			wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			_, err := waiter.Acquire(wctx, "refusing", 20*time.Second)
			if !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("Acquire of a held key: %v", err)
			}
			dials := connectionsReceived(t, admin[0]) - before
			t.Logf("node 0 received %d connections in 1.5 s of attempts every 10 ms", dials)
			if dials > 25 {
				t.Fatalf("node 0, which refuses the waiter, received %d connections in 1.5 s: one per attempt", dials)
			}
			if strings.Contains(err.Error(), pw) || (tc.password != "" && strings.Contains(err.Error(), tc.password)) {
				t.Fatalf("the error quotes a password: %v", err)
			}
		})
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The lock works on the other four.
	waiter := newTestClient(t, clients("", ""))
	l, err := waiter.TryAcquire(ctx, "refusing", 20*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire with node 0 refusing: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
