package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// forEachCluster runs f on three miniredis nodes and on three real redis-servers (that
// subtest skips, or fails with REDLOCK_REQUIRE_REDIS=1, without redis-server).
func forEachCluster(t *testing.T, f func(t *testing.T, clients []redis.UniversalClient)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		_, clients := miniNodes(t, 3)
		f(t, clients)
	})
	t.Run("redis-server", func(t *testing.T) {
		cluster := redisproc.StartT(t, 3, redisproc.Config{})
		f(t, cluster.ClientsT(t))
	})
}

// setAll sets key to v on every node.
func setAll(t *testing.T, clients []redis.UniversalClient, key string, v any) {
	t.Helper()
	for _, rc := range clients {
		if err := rc.Set(ctxT(t, 5*time.Second), key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// noKeyLeft fails if a node still holds one of keys.
func noKeyLeft(t *testing.T, clients []redis.UniversalClient, keys ...string) {
	t.Helper()
	for i, rc := range clients {
		if n := rc.Exists(ctxT(t, 5*time.Second), keys...).Val(); n != 0 {
			t.Fatalf("node %d still holds %d of the lock keys %q", i, n, keys)
		}
	}
}

// TestTokensExactAbove2to53: counters far beyond 2^53 (as one client whose clock ran 290
// years ahead left them), and a healthy client: every acquisition of every key of the slot
// gets a larger token than the one before, and the counters hold exact integers. Before
// counters were exact, tokens were Lua doubles, and one more than an even value above 2^53
// rounded back to it: the healthy client got the same token again and again, which the
// stores' ≥ rule would admit for a stale holder. (Tokens need not be consecutive: a node may
// still hold the previous key when the next acquire reaches it, and skip that mint.)
func TestTokensExactAbove2to53(t *testing.T) {
	forEachCluster(t, func(t *testing.T, clients []redis.UniversalClient) {
		ctx := ctxT(t, 20*time.Second)
		const poisoned = 10_921_572_000_000_000 // about the clock in µs in the year 2316
		setAll(t, clients, slotCounter("{s}:a"), poisoned)
		c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
		last := Token(poisoned)
		for round := range 6 {
			for _, key := range []string{"{s}:a", "{s}:b"} {
				l, err := c.TryAcquire(ctx, key, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() <= last || l.Token() > last+12 {
					t.Fatalf("round %d, %s: token %d after %d; want a little more", round, key, l.Token(), last)
				}
				last = l.Token()
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		settle(c)
		for i, rc := range clients {
			got, err := rc.Get(ctx, slotCounter("{s}:a")).Int64()
			if err != nil || got <= poisoned || got > int64(last)+12 {
				t.Fatalf("node %d: slot counter %d, %v; want an integer near %d", i, got, err, last)
			}
		}
	})
}

// TestAcquireAtCounterMax: counters at the int64 maximum mint no more tokens. The acquire
// fails with an error that says so, and leaves no lock key on any node, whether it is a
// TryAcquire, a queued Acquire or a multi-key lock, of either layout; one below the maximum
// mints the maximum itself. Before, acquire.lua set the key, then returned -2^63 (a double's
// overflow), which the client read as "held by another" and did not undo: the keys blocked
// everyone until their TTL.
func TestAcquireAtCounterMax(t *testing.T) {
	forEachCluster(t, func(t *testing.T, clients []redis.UniversalClient) {
		ctx := ctxT(t, 30*time.Second)
		wantMax := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "mints no more tokens") {
				t.Fatalf("%s: %v; want ErrNotAcquired saying the counter mints no more tokens", what, err)
			}
		}
		for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
			c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithCounterLayout(l), WithRetryDelay(5*time.Millisecond))
			set, err := newLockKeys("{max}:a", "{max}:b")
			if err != nil {
				t.Fatal(err)
			}
			own, _ := set.counters(0, l)
			setAll(t, clients, own, strconv.FormatInt(math.MaxInt64, 10))
			_, err = c.TryAcquire(ctx, "{max}:a", 10*time.Second)
			wantMax(l.String()+" TryAcquire", err)
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err = c.Acquire(short, "{max}:a", 10*time.Second)
			cancel()
			if !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("%v Acquire: %v", l, err)
			}
			// One below the maximum: the first key of a multi-key lock mints the maximum, the
			// second cannot (with the slot layout it shares the slot counter; with the
			// per-key layout its own is at the maximum), and neither key is left set.
			setAll(t, clients, own, strconv.FormatInt(math.MaxInt64-1, 10))
			if l == KeyCounters {
				own2, _ := set.counters(1, l)
				setAll(t, clients, own2, strconv.FormatInt(math.MaxInt64, 10))
			}
			_, err = c.TryAcquireMulti(ctx, []string{"{max}:a", "{max}:b"}, 10*time.Second)
			wantMax(l.String()+" TryAcquireMulti", err)
			settle(c)
			noKeyLeft(t, clients, set.keys...)
			lk, err := c.TryAcquire(ctx, "{max}:a", 10*time.Second)
			if err != nil || lk.Token() != math.MaxInt64 {
				t.Fatalf("%v one below the maximum: %v, %v; want token MaxInt64", l, lk, err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			_, err = c.TryAcquire(ctx, "{max}:a", 10*time.Second)
			wantMax(l.String()+" TryAcquire after the maximum", err)
			settle(c)
			noKeyLeft(t, clients, set.keys...)
			for i, rc := range clients {
				if got := rc.Get(ctx, own).Val(); got != strconv.FormatInt(math.MaxInt64, 10) {
					t.Fatalf("%v node %d: counter %s after the refusals, want the maximum", l, i, got)
				}
			}
			for _, rc := range clients {
				rc.FlushAll(ctx)
			}
		}
	})
}

// aheadClock is the system clock moved ahead by d (keeping its monotonic reading, so
// validity times are unaffected): a client whose wall clock is wrong.
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

// TestSeedFarAheadRefused is the poisoned slot: a client whose clock runs 290 years
// ahead acquires a key, and from then on every key of that slot gets tokens from its seed,
// far above every other client's clock, with the clock floor and remedy 2 of design.md §5.6
// gone for good. Now a node refuses a seed more than 10 s ahead of its own clock where it
// would become a counter's value: the acquire fails (TryAcquire and a queued Acquire) with an
// error that says so, no key or counter is written, and a healthy client's tokens stay at its
// clock. A client 5 s ahead is within the bound. Before, the far-ahead client got its lock and
// the healthy client's tokens followed its seed.
func TestSeedFarAheadRefused(t *testing.T) {
	forEachCluster(t, func(t *testing.T, clients []redis.UniversalClient) {
		ctx := ctxT(t, 20*time.Second)
		const years290 = 290 * 365 * 24 * time.Hour
		rogue := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(aheadClock{years290}), WithRetryDelay(5*time.Millisecond))
		_, err := rogue.TryAcquire(ctx, "{p}:a", 10*time.Second)
		if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "ahead of this node's clock") {
			t.Fatalf("acquire with a clock 290 years ahead: %v; want ErrNotAcquired naming the clocks", err)
		}
		// Two attempts, not a short context: under load a 200 ms context could end before
		// any node had answered, and the error would not be the nodes' refusal.
		limited := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(aheadClock{years290}), WithRetryDelay(5*time.Millisecond), WithRetryLimit(2))
		_, err = limited.Acquire(ctx, "{p}:a", 10*time.Second)
		settle(limited)
		if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "ahead of this node's clock") {
			t.Fatalf("queued acquire with a clock 290 years ahead: %v", err)
		}
		settle(rogue)
		noKeyLeft(t, clients, "{p}:a", slotCounter("{p}:a"), "redlock:fence:{p}:a")

		near := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(aheadClock{5 * time.Second}))
		before := counterSeed(time.Now().Add(5 * time.Second))
		l, err := near.TryAcquire(ctx, "{p}:a", 10*time.Second)
		if err != nil || int64(l.Token()) < before {
			t.Fatalf("acquire 5 s ahead: %v, %v; want a token at its clock, %d or more", l, err, before)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		healthy := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
		last := l.Token()
		for range 6 {
			l, err := healthy.TryAcquire(ctx, "{p}:b", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last || int64(l.Token()) > counterSeed(time.Now().Add(20*time.Second)) {
				t.Fatalf("healthy token %d after %d: want more, and near the clock", l.Token(), last)
			}
			last = l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestRealSeedBoundNeedsTime: the bound asks the node for TIME. A node user whose ACL lacks
// it (the command list before the bound) still acquires, without the bound, as earlier
// versions did; with the documented list (+time) the far-ahead seed is refused.
func TestRealSeedBoundNeedsTime(t *testing.T) {
	const pw = "t1meSecret"
	without := strings.ReplaceAll(aclCommands, " +time", "")
	if without == aclCommands {
		t.Fatal("the documented ACL list has no +time")
	}
	for _, tc := range []struct {
		commands string
		refused  bool
	}{{aclCommands, true}, {without, false}} {
		acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "resetchannels", "-@all"}, strings.Fields(tc.commands)...)
		cluster := redisproc.StartT(t, 3, redisproc.Config{ExtraArgs: acl})
		clients := aclUserClients(t, cluster.Addrs(), pw)
		rogue := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(aheadClock{24 * time.Hour}))
		l, err := rogue.TryAcquire(ctxT(t, 10*time.Second), "bound:k", 10*time.Second)
		if refused := err != nil; refused != tc.refused || (refused && !strings.Contains(err.Error(), "ahead of this node's clock")) {
			t.Fatalf("ACL %q: acquire a day ahead: %v, %v; want refused %v", tc.commands, l, err, tc.refused)
		}
	}
}

// TestCountersOutOfSync forces the slow path: the counters disagree so no value is shared by
// a quorum, and the acquire must raise the lagging nodes before it returns a token.
func TestCountersOutOfSync(t *testing.T) {
	for _, counters := range [][]int64{
		{10, 10, 5, 3, 12},
		{100, 7, 7, 1, 50},
		{1, 2, 3, 4, 5},
	} {
		t.Run(fmt.Sprint(counters), func(t *testing.T) {
			servers, clients := miniNodes(t, 5)
			base := aheadOfSeeds() // above the clock, where the slot layout's floor does not reach
			for i, s := range servers {
				counters[i] += base
				s.Set(testFence, strconv.FormatInt(counters[i], 10))
			}
			c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
			ctx := ctxT(t, 5*time.Second)
			l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			settle(c)
			at := 0
			for i, s := range servers {
				got, _ := s.Get(testFence)
				if got == l.Token().String() {
					at++
				}
				if v, _ := strconv.ParseInt(got, 10, 64); v <= counters[i] {
					t.Fatalf("node %d counter %d did not grow from %d", i, v, counters[i])
				}
			}
			if at < c.Quorum() {
				t.Fatalf("token %d held by %d counters, want at least %d", l.Token(), at, c.Quorum())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l2, err := c.TryAcquire(ctx, testKey, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l2.Token() <= l.Token() {
				t.Fatalf("next token %d not above %d", l2.Token(), l.Token())
			}
		})
	}
}

// TestCounterSeedAndIdleTTL checks that a new counter starts from the client's clock in
// microseconds on every node (one round trip), carries the idle TTL, and that a counter that
// expired comes back above the tokens issued before.
func TestCounterSeedAndIdleTTL(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	fixed := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := &stepClock{now: fixed}
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(clk), WithCounterIdleTTL(time.Hour))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := Token(fixed.UnixMicro()); l.Token() != want {
		t.Fatalf("first token %d, want the clock seed %d", l.Token(), want)
	}
	settle(c)
	for i, s := range servers {
		if ttl := s.TTL(testFence); ttl != time.Hour {
			t.Fatalf("node %d counter TTL %v, want 1h", i, ttl)
		}
	}
	c = newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(clk), WithCounterIdleTTL(time.Hour))
	l.c = c
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Two hours idle: the counters expire on the nodes, and the clock moved on.
	for _, s := range servers {
		s.FastForward(2 * time.Hour)
	}
	clk.now = clk.now.Add(2 * time.Hour)
	l2, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() || l2.Token() != Token(clk.now.UnixMicro()) {
		t.Fatalf("token after counter expiry %d, want the new seed %d above %d", l2.Token(), clk.now.UnixMicro(), l.Token())
	}
	// A lock longer than the idle TTL stretches its counter's TTL to its own.
	l3, err := c.TryAcquire(ctx, "long", 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for i, s := range servers {
		fk := slotCounter("long")
		if ttl := s.TTL(fk); ttl != 3*time.Hour {
			t.Fatalf("node %d: counter TTL %v under a 3h lock with a 1h idle TTL", i, ttl)
		}
	}
	_ = l3.Release(ctx)
	// With an idle TTL of 0 the counter never expires.
	c0 := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithCounterIdleTTL(0))
	if _, err := c0.TryAcquire(ctx, "other", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c0.Close()
	for i, s := range servers {
		fk := slotCounter("other")
		if ttl := s.TTL(fk); ttl != 0 {
			t.Fatalf("node %d: counter TTL %v with idle TTL 0", i, ttl)
		}
	}
}
