package redlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// scriptCases runs every branch of every Lua script on one node and checks the replies
// and the node's state. It runs on miniredis and on a real redis-server.
func scriptCases(t *testing.T, rc redis.UniversalClient) {
	ctx := ctxT(t, 10*time.Second)
	k, f := "script:k", "redlock:fence:{script:k}"
	keys := []string{k, f, slotCounter(k)} // the per-key layout: own counter f, then the slot counter
	run := func(s *lua, keys []string, args ...any) int64 {
		t.Helper()
		v, err := newScriptCall(s, keys, args...).run(ctx, rc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	expect := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: got %d, want %d", what, got, want)
		}
	}
	get := func(key string) string { return rc.Get(ctx, key).Val() }
	rc.FlushAll(ctx)

	// acquire: a free key takes the seed as its first token, with the idle TTL.
	expect("acquire free", run(acquireScript, keys, "A", 10000, 5000, 60000, "0"), 5000)
	if ttl := rc.PTTL(ctx, f).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("counter idle TTL %v", ttl)
	}
	// A resend of the same acquire is idempotent: same counter, nothing moves.
	expect("acquire resend", run(acquireScript, keys, "A", 10000, 9999, 60000, "0"), 5000)
	expect("counter after resend", int64(len(get(f))), 4)
	// Another holder is refused with minus the remaining milliseconds.
	if v := run(acquireScript, keys, "B", 10000, 1, 60000, "0"); v > -9000 || v < -10000 {
		t.Fatalf("acquire held: got %d, want about -10000", v)
	}
	expect("counter unmoved by a refusal", int64(len(get(f))), 4)
	// Our key present but the counter evicted: minted again from the seed.
	rc.Del(ctx, f)
	expect("acquire resend, counter gone", run(acquireScript, keys, "A", 10000, 7000, 0, "0"), 7000)
	if ttl := rc.PTTL(ctx, f).Val(); ttl != -1 {
		t.Fatalf("counter TTL %v with idle TTL 0, want none", ttl)
	}

	// raise: only while our key is present, never lowers.
	expect("raise not ours", run(raiseScript, keys, "B", 9000, 0, "0"), 0)
	expect("counter after refused raise", int64(len(get(f))), 4)
	expect("raise below current", run(raiseScript, keys, "A", 6000, 0, "0"), 1) // covered: nothing to lift
	if get(f) != "7000" {
		t.Fatalf("raise lowered the counter to %s", get(f))
	}
	expect("raise", run(raiseScript, keys, "A", 9000, 60000, "0"), 1)
	if get(f) != "9000" || rc.PTTL(ctx, f).Val() <= 59*time.Second {
		t.Fatalf("after raise: counter %s TTL %v", get(f), rc.PTTL(ctx, f).Val())
	}
	expect("raise to equal", run(raiseScript, keys, "A", 9000, 0, "0"), 1)

	// extend: compare-and-pexpire, never re-creates.
	expect("extend not ours", run(extendScript, []string{k}, "B", 60000), 0)
	expect("extend", run(extendScript, []string{k}, "A", 60000), 1)
	if ttl := rc.PTTL(ctx, k).Val(); ttl <= 59*time.Second {
		t.Fatalf("TTL after extend %v", ttl)
	}

	// release: compare-and-delete, counter kept.
	expect("release not ours", run(releaseScript, []string{k}, "B"), 0)
	expect("release", run(releaseScript, []string{k}, "A"), 1)
	expect("release again", run(releaseScript, []string{k}, "A"), 0)
	expect("extend after release", run(extendScript, []string{k}, "A", 60000), 0)
	if rc.Exists(ctx, k).Val() != 0 || get(f) != "9000" {
		t.Fatalf("after release: key exists %d, counter %s", rc.Exists(ctx, k).Val(), get(f))
	}
	// The next acquire increments the surviving counter.
	expect("acquire after release", run(acquireScript, keys, "C", 10000, 1, 0, "0"), 9001)
	// An acquire on a live counter refreshes its idle TTL.
	expect("release C", run(releaseScript, []string{k}, "C"), 1)
	expect("acquire, idle TTL refreshed", run(acquireScript, keys, "D", 10000, 1, 60000, "0"), 9002)
	if ttl := rc.PTTL(ctx, f).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("counter idle TTL %v after an acquire on a live counter, want 1m", ttl)
	}

	// Without fencing: a plain SET NX PX, 1 when it set the key, 0 when a key was present.
	plain := newSetNXCall("script:plain", "P", 10000)
	for i, want := range []int64{1, 0} {
		v, err := plain.run(ctx, rc)
		if err != nil || v != want {
			t.Fatalf("plain SET NX, call %d: %d, %v; want %d", i, v, err, want)
		}
	}
	if get("script:plain") != "P" || rc.PTTL(ctx, "script:plain").Val() <= 9*time.Second {
		t.Fatalf("plain SET NX: key %q TTL %v", get("script:plain"), rc.PTTL(ctx, "script:plain").Val())
	}
}

func TestScriptsOnMiniredis(t *testing.T) {
	_, clients := miniNodes(t, 1)
	scriptCases(t, clients[0])
}

func TestRealScriptCases(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	scriptCases(t, cluster.ClientsT(t)[0])
}

// badCounters are values a fence counter may hold when something other than these scripts
// wrote it: not an integer from 0 to 2^63 - 1 in plain decimal. Lua's tonumber read most of
// them as numbers (or as a missing counter), so the scripts minted from them.
var badCounters = []string{"abc", "-1", "007", "1e3", "1.5", " 12", "0x10", "9223372036854775808", "99999999999999999999", ""}

// TestScriptsCheckBeforeWriting runs every script that writes counters against counters that
// hold something else, counters of another type (a hash), counters at the int64 maximum and
// bad arguments, on miniredis and on a
// real redis-server: each answers with an error reply that says what is wrong, and the node
// is as it was, no lock key set and no counter moved (Redis keeps a script's writes made
// before an error). Before, a counter at the maximum made acquire.lua set the lock key and
// then return -2^63, which the client read as "held" and did not undo.
func TestScriptsCheckBeforeWriting(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 20*time.Second)
		set, err := newLockKeys("{cw}:a", "{cw}:b")
		if err != nil {
			t.Fatal(err)
		}
		one, err := newLockKeys("{cw}:a")
		if err != nil {
			t.Fatal(err)
		}
		// The premise: Redis keeps what a script wrote before an error.
		if err := rc.Eval(ctx, "redis.call('SET', KEYS[1], 'x') return redis.call('INCR', KEYS[1])", []string{"cw:control"}).Err(); err == nil {
			t.Fatal("INCR of a string succeeded")
		}
		if rc.Get(ctx, "cw:control").Val() != "x" {
			t.Fatal("the write before the error was rolled back: the checks-first rule would be moot")
		}
		snapshot := func() map[string]string {
			out := map[string]string{}
			for _, k := range append(append(append([]string{}, set.keys...), set.fences...), set.slots...) {
				if v, err := rc.Get(ctx, k).Result(); err == nil {
					out[k] = v
				}
			}
			return out
		}
		// wantRefused wants an error reply of ours ("redlock: ") saying want, or, for want
		// WRONGTYPE, the node's own error for a key of another type, and the node unchanged.
		wantRefused := func(what, want string, s *lua, keys []string, args ...any) {
			t.Helper()
			before := snapshot()
			_, err := newScriptCall(s, keys, args...).run(ctx, rc)
			ours := want == "WRONGTYPE" || (err != nil && strings.Contains(err.Error(), "redlock: "))
			if err == nil || !ours || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v; want an error reply saying %q", what, err, want)
			}
			if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("%s changed the node: %v, was %v", what, after, before)
			}
		}
		for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
			slot := argFlag(l == SlotCounters)
			own, other := one.counters(0, l)
			for _, bad := range badCounters {
				for _, name := range []string{own, other} {
					rc.FlushAll(ctx)
					rc.Set(ctx, name, bad, 0)
					what := fmt.Sprintf("%v layout, counter %s holding %q", l, name, bad)
					wantRefused("acquire, "+what, "not an integer", acquireScript, one.triples(l), "A", 10000, 5000, 60000, slot)
					// The queued form with nobody queued takes the same path (SET NX, then the
					// checks, the key deleted again): no key, no queue left.
					q := newQueueKeys(one.keys[0])
					wantRefused("queued acquire, nobody queued, "+what, "not an integer", acquireQueuedScript,
						append(one.triples(l), q.queue, q.waiters), "A", 10000, 5000, 60000, slot, "member", 5000, 4000, 25, "1", turnChannelPrefix)
					if n := rc.Exists(ctx, one.keys[0], q.queue, q.waiters).Val(); n != 0 {
						t.Fatalf("queued acquire, %s: %d of the key and its queue's keys left", what, n)
					}
					// The second key's counter is bad (with the per-key layout): its first key is not set either.
					multiKeys := set.triples(l)
					if name == other || l == KeyCounters {
						own2, other2 := set.counters(1, l)
						rc.FlushAll(ctx)
						rc.Set(ctx, map[bool]string{true: own2, false: other2}[name == own], bad, 0)
					}
					wantRefused("acquire_multi, "+what, "not an integer", acquireMultiScript, multiKeys, "A", 10000, 5000, 60000, "1", slot)
					if name == other && l == KeyCounters {
						continue // raise and heal read the other counter only to mirror (slot layout)
					}
					rc.FlushAll(ctx)
					rc.Set(ctx, name, bad, 0)
					rc.Set(ctx, one.keys[0], "A", 0)
					wantRefused("raise, "+what, "not an integer", raiseScript, one.triples(l), "A", 9000, 60000, slot)
					rc.Del(ctx, one.keys[0])
					wantRefused("heal, "+what, "not an integer", healScript, one.triples(l), "A", 5000, 60000, "1", 8000, slot, 7000)
				}
			}
			// A counter of another type (a hash): its GET fails inside the script, which must
			// still change nothing (the acquire's fast path read it with redis.call and left
			// the lock key set behind the error until 2026-12-03).
			for _, name := range []string{own, other} {
				typed := func() {
					rc.FlushAll(ctx)
					rc.HSet(ctx, name, "f", "1")
				}
				what := fmt.Sprintf("%v layout, counter %s a hash", l, name)
				typed()
				wantRefused("acquire, "+what, "WRONGTYPE", acquireScript, one.triples(l), "A", 10000, 5000, 60000, slot)
				q := newQueueKeys(one.keys[0])
				wantRefused("queued acquire, "+what, "WRONGTYPE", acquireQueuedScript,
					append(one.triples(l), q.queue, q.waiters), "A", 10000, 5000, 60000, slot, "member", 5000, 4000, 25, "1", turnChannelPrefix)
				// The same with the waiter at the head of a queue (the handoff's fast path).
				rc.ZAdd(ctx, q.queue, redis.Z{Score: 1, Member: "member"})
				rc.HSet(ctx, q.waiters, "member", time.Now().UnixMilli()+60_000)
				wantRefused("queued acquire at the head, "+what, "WRONGTYPE", acquireQueuedScript,
					append(one.triples(l), q.queue, q.waiters), "A", 10000, 5000, 60000, slot, "member", 5000, 4000, 25, "1", turnChannelPrefix)
				if n := rc.Exists(ctx, one.keys[0]).Val(); n != 0 || rc.ZScore(ctx, q.queue, "member").Err() != nil {
					t.Fatalf("queued acquire at the head, %s: the key set (%d) or the place gone from the queue", what, n)
				}
				typed()
				wantRefused("acquire_multi, "+what, "WRONGTYPE", acquireMultiScript, set.triples(l), "A", 10000, 5000, 60000, "1", slot)
				if name == other && l == KeyCounters {
					continue // raise and heal read the other counter only to mirror (slot layout)
				}
				typed()
				rc.Set(ctx, one.keys[0], "A", 0)
				wantRefused("raise, "+what, "WRONGTYPE", raiseScript, one.triples(l), "A", 9000, 60000, slot)
				rc.Del(ctx, one.keys[0])
				wantRefused("heal, "+what, "WRONGTYPE", healScript, one.triples(l), "A", 5000, 60000, "1", 8000, slot, 7000)
			}
			// At the maximum: no token past it; one below it mints the maximum itself.
			rc.FlushAll(ctx)
			rc.Set(ctx, own, "9223372036854775807", 0)
			wantRefused(fmt.Sprintf("acquire at the maximum, %v layout", l), "mints no more tokens", acquireScript, one.triples(l), "A", 10000, 5000, 60000, slot)
			wantRefused(fmt.Sprintf("acquire_multi at the maximum, %v layout", l), "mints no more tokens", acquireMultiScript, set.triples(l), "A", 10000, 5000, 60000, "1", slot)
			rc.Set(ctx, own, "9223372036854775806", 0)
			if v, err := newScriptCall(acquireScript, one.triples(l), "A", 10000, 5000, 60000, slot).run(ctx, rc); err != nil || v != math.MaxInt64 {
				t.Fatalf("acquire one below the maximum, %v layout: %d, %v; want the maximum", l, v, err)
			}
		}
		// Bad arguments.
		rc.FlushAll(ctx)
		wantRefused("acquire with seed 0", "the seed", acquireScript, one.triples(SlotCounters), "A", 10000, 0, 60000, "1")
		wantRefused("acquire with seed abc", "the seed", acquireScript, one.triples(SlotCounters), "A", 10000, "abc", 60000, "1")
		wantRefused("acquire with PX 0", "PX", acquireScript, one.triples(SlotCounters), "A", 0, 5000, 60000, "1")
		wantRefused("acquire with idle TTL -1", "idle TTL", acquireScript, one.triples(SlotCounters), "A", 10000, 5000, -1, "1")
		wantRefused("acquire_multi with seed above int64", "the seed", acquireMultiScript, set.triples(SlotCounters), "A", 10000, "9223372036854775808", 60000, "1", "1")
		rc.Set(ctx, one.keys[0], "A", 0)
		wantRefused("raise to 0", "the target", raiseScript, one.triples(SlotCounters), "A", 0, 60000, "1")
		wantRefused("raise to 1.5", "the target", raiseScript, one.triples(SlotCounters), "A", "1.5", 60000, "1")
		wantRefused("heal with token 0", "the token", healScript, one.triples(SlotCounters), "A", 5000, 60000, "1", 8000, "1", 0)
		wantRefused("heal with token 2^64-1", "the token", healScript, one.triples(SlotCounters), "A", 5000, 60000, "1", 8000, "1", uint64(math.MaxUint64))
	})
}

// TestScriptsExactAbove2to53: with counters past 2^53, where Lua's doubles hold only every
// other integer, every acquire still mints exactly one more, on both layouts, and the counter
// holds what was returned. Before, one more than an even counter above 2^53 rounded back to
// the counter: a healthy client got the same token again and again.
func TestScriptsExactAbove2to53(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
			set, err := newLockKeys("{exact}:k")
			if err != nil {
				t.Fatal(err)
			}
			own, _ := set.counters(0, l)
			// Below 9·10^15 the scripts add as numbers, above it as strings: both sides of
			// that boundary, and of 2^53.
			for _, start := range []int64{8_999_999_999_999_997, 9_007_199_254_740_989, 1 << 53, 1<<53 + 1, 10_921_572_000_000_000, math.MaxInt64 - 5} {
				rc.FlushAll(ctx)
				rc.Set(ctx, own, start, 0)
				for i := int64(1); i <= 5; i++ {
					v, err := newScriptCall(acquireScript, set.triples(l), "A", 10000, 5000, 0, argFlag(l == SlotCounters)).run(ctx, rc)
					if err != nil || v != start+i {
						t.Fatalf("%v layout, counter %d, acquire %d: %d, %v; want %d", l, start, i, v, err, start+i)
					}
					if got := rc.Get(ctx, own).Val(); got != strconv.FormatInt(start+i, 10) {
						t.Fatalf("counter holds %s, want %d", got, start+i)
					}
					rc.Del(ctx, set.keys[0])
				}
			}
			// A raise to a target past 2^53 sets exactly the target.
			rc.FlushAll(ctx)
			rc.Set(ctx, set.keys[0], "A", 0)
			if v, err := newScriptCall(raiseScript, set.triples(l), "A", int64(1<<53+1), 0, argFlag(l == SlotCounters)).run(ctx, rc); err != nil || v != 1 {
				t.Fatalf("raise: %d, %v", v, err)
			}
			if got := rc.Get(ctx, own).Val(); got != "9007199254740993" {
				t.Fatalf("raise to 2^53+1 set %s", got)
			}
		}
	})
}

// TestScriptsSeedBound: a seed more than 10 s ahead of the node's clock is refused where it
// would become a counter's value, by acquire, acquire_multi and heal, with nothing changed; a
// seed 5 s ahead is taken; a far seed that would not be written (the counters are above it, or
// the heal's counter exists) changes nothing about the script's result.
func TestScriptsSeedBound(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		soon, far := now.UnixMicro()+5_000_000, now.UnixMicro()+3_600_000_000
		one, err := newLockKeys("{sb}:a")
		if err != nil {
			t.Fatal(err)
		}
		set, err := newLockKeys("{sb}:a", "{sb}:b")
		if err != nil {
			t.Fatal(err)
		}
		run := func(s *lua, keys []string, args ...any) (int64, error) {
			return newScriptCall(s, keys, args...).run(ctx, rc)
		}
		refused := func(what string, v int64, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "ahead of this node's clock") {
				t.Fatalf("%s: %d, %v; want the seed refused", what, v, err)
			}
			if n := rc.DBSize(ctx).Val(); n != 0 {
				t.Fatalf("%s: %d keys written", what, n)
			}
		}
		for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
			slot := argFlag(l == SlotCounters)
			rc.FlushAll(ctx)
			v, err := run(acquireScript, one.triples(l), "A", 10000, far, 60000, slot)
			refused(l.String()+" acquire an hour ahead", v, err)
			_, err = newScriptCall(acquireMultiScript, set.triples(l), "A", 10000, far, 60000, "1", slot).run(ctx, rc)
			refused(l.String()+" acquire_multi an hour ahead", 0, err)
			v, err = run(healScript, one.triples(l), "A", 5000, 60000, "1", far, slot, 7000)
			refused(l.String()+" heal of a lost counter an hour ahead", v, err)
			if v, err := run(acquireScript, one.triples(l), "A", 10000, soon, 60000, slot); err != nil || v != soon {
				t.Fatalf("%v acquire 5 s ahead: %d, %v; want the seed %d", l, v, err, soon)
			}
			// The counter is there now: a heal does not write its seed, so the bound is moot.
			rc.Del(ctx, one.keys[0])
			if v, err := run(healScript, one.triples(l), "A", 5000, 60000, "1", far, slot, soon); err != nil || v != 1 {
				t.Fatalf("%v heal with the counter present: %d, %v", l, v, err)
			}
			// Counters above the far seed: it is not written, and not refused.
			rc.FlushAll(ctx)
			own, _ := one.counters(0, l)
			rc.Set(ctx, own, far+100, 0)
			if v, err := run(acquireScript, one.triples(l), "A", 10000, far, 60000, slot); err != nil || v != far+101 {
				t.Fatalf("%v acquire with the counter above the far seed: %d, %v", l, v, err)
			}
		}
	})
}

// TestScriptCacheLost checks the EVALSHA fallback: after SCRIPT FLUSH every script still runs.
func TestScriptCacheLost(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 5*time.Second)
	flush := func() {
		for _, rc := range clients {
			if err := rc.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		flush()
		l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		flush()
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		flush()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealScriptCacheLostOnSlowNode: a node whose script cache was lost (a restart, SCRIPT
// FLUSH) and whose round trip is 800 ms, within the exec budget (1 s with the default 100 ms
// node timeout) but not twice, answers a release's EVALSHA with NOSCRIPT at 800 ms; the EVAL
// sent again then needs another 800 ms. A release is never dropped, so that EVAL must still
// reach the node and delete our key there. Before, the resend shared the first write's
// budget, ran out of it on the way, and the key stayed on the node until its TTL (a
// newcomer saw it about twice in eight runs).
func TestRealScriptCacheLostOnSlowNode(t *testing.T) {
	admin, nodes, slow := slowLastNode(t, 3, redis.Options{MaxRetries: -1, ContextTimeoutEnabled: true})
	c := newTestClient(t, nodes)
	ctx := ctxT(t, 30*time.Second)
	for round := range 3 {
		l, err := c.TryAcquire(ctx, testKey, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		settle(c) // the key is on node 2 too
		if v := admin[2].Get(ctx, testKey).Val(); v != l.ID() {
			t.Fatalf("round %d: node 2 holds %q, want our key", round, v)
		}
		if err := admin[2].ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		slow.SetDelay(400*time.Millisecond, 400*time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		settle(c) // the release's calls are final: answered, or given up
		slow.SetDelay(0, 0)
		if n := admin[2].Exists(ctx, testKey).Val(); n != 0 {
			t.Fatalf("round %d: the released key is still on the slow node (its TTL %v)", round, admin[2].PTTL(ctx, testKey).Val())
		}
	}
}
