package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestSlotCounterNames: every key's slot counter is in the key's slot, one name per slot,
// and no lock key's per-key counter or the key itself can be a slot counter's name.
func TestSlotCounterNames(t *testing.T) {
	names := map[string]uint16{}
	for i := range 20000 {
		key := fmt.Sprintf("order:%d", i)
		n := slotCounter(key)
		if redisSlot(n) != redisSlot(key) {
			t.Fatalf("%q: slot counter %q in slot %d, the key in %d", key, n, redisSlot(n), redisSlot(key))
		}
		if s, ok := names[n]; ok && s != keySlot(key) {
			t.Fatalf("%q shared by slots %d and %d", n, s, keySlot(key))
		}
		names[n] = keySlot(key)
		if !strings.HasPrefix(n, SlotCounterPrefix) {
			t.Fatalf("%q lacks the prefix", n)
		}
	}
	if len(names) > 16384 {
		t.Fatalf("%d slot counters", len(names))
	}
	for _, key := range []string{"redlock:slot:{x}", "redlock:slot:"} {
		if _, err := newLockKeys(key); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("lock key %q: %v, want ErrInvalidArgument", key, err)
		}
	}
	if SlotCounters.String() != "slot" || KeyCounters.String() != "key" || CounterLayout(9).String() != "CounterLayout(9)" {
		t.Fatal("CounterLayout.String")
	}
}

// TestSlotCountersBoundMemory: 3 000 distinct keys, each locked once with the default layout,
// leave only slot counters on the nodes (at most one per slot used), and no per-key counter;
// with KeyCounters the same keys leave one counter each.
func TestSlotCountersBoundMemory(t *testing.T) {
	for _, layout := range []CounterLayout{SlotCounters, KeyCounters} {
		t.Run(layout.String(), func(t *testing.T) {
			servers, clients := miniNodes(t, 3)
			// A node timeout of seconds: the nodes are in this process, and a full -race run
			// of every package once starved it past the default's 100 ms, so that a release
			// failed on two nodes of three (CI, 2026-12-05); the layouts are what is tested.
			c := newTestClient(t, clients, WithCounterLayout(layout), WithNodeTimeout(2*time.Second))
			ctx := t.Context() // no deadline: under load 3 000 rounds take what they take
			const n = 3000
			slots := map[uint16]bool{}
			for i := range n {
				key := fmt.Sprintf("order:%d", i)
				slots[keySlot(key)] = true
				l, err := c.TryAcquire(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			settle(c)
			// A node may miss a few acquisitions (a release that finds the acquire still
			// queued there cancels it, design.md §3.6), so each node holds at most the
			// counters, and together they hold all of them.
			union := map[string]bool{}
			for i, s := range servers {
				var slot, perKey int
				for _, k := range s.Keys() {
					union[k] = true
					switch {
					case strings.HasPrefix(k, SlotCounterPrefix):
						slot++
					case strings.HasPrefix(k, FencePrefix):
						perKey++
					default:
						t.Fatalf("node %d: key %q left behind", i, k)
					}
				}
				if layout == SlotCounters && (perKey != 0 || slot > len(slots)) ||
					layout == KeyCounters && (slot != 0 || perKey > n) {
					t.Fatalf("node %d: %d slot counters and %d per-key counters (%d keys in %d slots)", i, slot, perKey, n, len(slots))
				}
			}
			want := len(slots)
			if layout == KeyCounters {
				want = n
			}
			if len(union) != want {
				t.Fatalf("%d counters on the nodes together, want %d", len(union), want)
			}
		})
	}
}

// TestSlotCounterSharedByKeys: two keys of one hash slot mint from one counter, so the second
// key's first token is above the first key's, and each key's tokens still grow; every token
// is at least the acquiring client's clock.
func TestSlotCounterSharedByKeys(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	clk := &stepClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c := newTestClient(t, clients, WithClock(clk))
	ctx := ctxT(t, 10*time.Second)
	var last Token
	for round, key := range []string{"{acct}:a", "{acct}:b", "{acct}:a", "{acct}:b"} {
		l, err := c.TryAcquire(ctx, key, time.Minute) // the clock does not move: the counter decides
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last || l.Token() < Token(counterSeed(clk.now)) {
			t.Fatalf("round %d: %s token %d, after %d (seed %d)", round, key, l.Token(), last, counterSeed(clk.now))
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settle(c)
	// Every node's slot counter is at most the last token, and a quorum has exactly it (a node
	// may have missed the last acquisition: a release that finds the acquire still queued
	// there cancels it, design.md §3.6).
	at := 0
	for i, s := range servers {
		v, _ := s.Get(slotCounter("{acct}:a"))
		n, _ := strconv.ParseUint(v, 10, 64)
		if Token(n) > last {
			t.Fatalf("node %d: slot counter %s above the last token %d", i, v, last)
		}
		if Token(n) == last {
			at++
		}
	}
	if at < c.Quorum() {
		t.Fatalf("the last token %d is the slot counter on %d nodes, fewer than a quorum", last, at)
	}
	// The clock moves on: the next token is the clock's reading, not one more than the counter.
	clk.now = clk.now.Add(time.Second)
	l, err := c.TryAcquire(ctx, "{acct}:a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != Token(counterSeed(clk.now)) {
		t.Fatalf("token %d, want the seed %d", l.Token(), counterSeed(clk.now))
	}
}

// TestKeyCountersConsecutive: with KeyCounters a key's tokens are consecutive after the first,
// as before layouts existed, whatever the clock does.
func TestKeyCountersConsecutive(t *testing.T) {
	_, clients := miniNodes(t, 3)
	clk := &stepClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c := newTestClient(t, clients, WithClock(clk), WithCounterLayout(KeyCounters))
	ctx := ctxT(t, 10*time.Second)
	var first Token
	for round := range 5 {
		l, err := c.TryAcquire(ctx, "consecutive", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = l.Token()
		} else if l.Token() != first+Token(round) {
			t.Fatalf("round %d: token %d, want %d", round, l.Token(), first+Token(round))
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		clk.now = clk.now.Add(time.Hour)
	}
}

// upgradeCases runs on one node the counters of a deployment that predates the layouts
// against the new scripts and the old ones (testdata/legacy), checking the rules of
// docs/design.md §5.11 branch by branch.
func upgradeCases(t *testing.T, rc redis.UniversalClient) {
	ctx := ctxT(t, 10*time.Second)
	rc.FlushAll(ctx)
	key := "upgrade:k"
	per, _ := fenceKey(key)
	slot := slotCounter(key)
	get := func(k string) int64 { v, _ := rc.Get(ctx, k).Int64(); return v }
	acquire := func(l CounterLayout, id string, seed int64) int64 {
		t.Helper()
		own, other := per, slot
		if l == SlotCounters {
			own, other = slot, per
		}
		v, err := newScriptCall(acquireScript, []string{key, own, other}, id, 10000, seed, 0, argFlag(l == SlotCounters)).run(ctx, rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Del(ctx, key).Err(); err != nil { // released
			t.Fatal(err)
		}
		return v
	}
	legacy := func(id string, seed int64) int64 {
		t.Helper()
		v, err := rc.Eval(ctx, legacyAcquireSrc, []string{key, per}, id, 10000, seed, 0).Int64()
		if err != nil {
			t.Fatal(err)
		}
		rc.Del(ctx, key)
		return v
	}
	// An old deployment left a per-key counter far above the clock.
	high := aheadOfSeeds()
	rc.Set(ctx, per, high, time.Hour)
	// The slot layout goes above it and keeps it up (mirror), so the old version's next INCR
	// goes above the new token too; the mirror keeps the counter's TTL.
	if v := acquire(SlotCounters, "A", 1000); v != high+1 || get(slot) != high+1 || get(per) != high+1 {
		t.Fatalf("slot layout over a legacy counter: token %d, slot %d, per-key %d; want %d", v, get(slot), get(per), high+1)
	}
	if ttl := rc.PTTL(ctx, per).Val(); ttl <= 59*time.Minute {
		t.Fatalf("mirrored per-key counter TTL %v, want the hour it had", ttl)
	}
	if v := legacy("B", 1000); v != high+2 {
		t.Fatalf("old version after the slot layout: %d, want %d", v, high+2)
	}
	// The slot layout again: above the old version's token.
	if v := acquire(SlotCounters, "C", 1000); v != high+3 {
		t.Fatalf("slot layout after the old version: %d, want %d", v, high+3)
	}
	// Another key of the slot moves the slot counter only.
	other := "{" + slotTag(keySlot(key)) + "}:other"
	if keySlot(other) != keySlot(key) {
		t.Fatalf("%q not in %q's slot", other, key)
	}
	otherPer, _ := fenceKey(other)
	v, err := newScriptCall(acquireScript, []string{other, slot, otherPer}, "D", 10000, 1000, 0, "1").run(ctx, rc)
	if err != nil || v != high+4 || rc.Exists(ctx, otherPer).Val() != 0 {
		t.Fatalf("other key of the slot: %d, %v, its per-key counter exists %d", v, err, rc.Exists(ctx, otherPer).Val())
	}
	// The per-key layout reads the slot counter: above both counters.
	if v := acquire(KeyCounters, "E", 1000); v != high+5 || get(per) != high+5 || get(slot) != high+4 {
		t.Fatalf("per-key layout: token %d, per-key %d, slot %d; want %d, %d, %d", v, get(per), get(slot), high+5, high+5, high+4)
	}
	// The slot layout after it: above the per-key counter.
	if v := acquire(SlotCounters, "F", 1000); v != high+6 {
		t.Fatalf("slot layout after the per-key layout: %d, want %d", v, high+6)
	}
	// A resend in the slot layout returns the slot counter as it is and mirrors it.
	rc.Set(ctx, key, "G", 0)
	rc.Set(ctx, slot, high+9, 0)
	if v, err := newScriptCall(acquireScript, []string{key, slot, per}, "G", 10000, 1000, 0, "1").run(ctx, rc); err != nil || v != high+9 || get(per) != high+9 {
		t.Fatalf("resend: %d, %v, per-key %d", v, err, get(per))
	}
	// raise lifts the own counter and, in the slot layout, mirrors; never above-target.
	rc.Set(ctx, slot, high+9, 0)
	// A target below the slot counter is covered already: 1, the counter stays, the target is
	// mirrored.
	rc.Set(ctx, per, high+1, 0)
	if v, _ := newScriptCall(raiseScript, []string{key, slot, per}, "G", high+8, 0, "1").run(ctx, rc); v != 1 || get(slot) != high+9 || get(per) != high+8 {
		t.Fatalf("raise below the slot counter: %d, slot %d, per-key %d; want 1, %d, %d", v, get(slot), get(per), high+9, high+8)
	}
	if v, _ := newScriptCall(raiseScript, []string{key, slot, per}, "G", high+20, 0, "1").run(ctx, rc); v != 1 || get(slot) != high+20 || get(per) != high+20 {
		t.Fatalf("raise: %d, slot %d, per-key %d", v, get(slot), get(per))
	}
	if v, _ := newScriptCall(raiseScript, []string{key, per, slot}, "G", high+30, 0, "0").run(ctx, rc); v != 1 || get(per) != high+30 || get(slot) != high+20 {
		t.Fatalf("per-key raise: %d, per-key %d, slot %d (must stay)", v, get(per), get(slot))
	}
	rc.Del(ctx, key)
	// Keys that never had a per-key counter get none from the slot layout.
	rc.Del(ctx, per)
	if v := acquire(SlotCounters, "H", 1000); v != high+21 || rc.Exists(ctx, per).Val() != 0 {
		t.Fatalf("slot layout, no per-key counter: %d, per-key exists %d", v, rc.Exists(ctx, per).Val())
	}
	// Large values are written in full, not as 1.8e+15.
	if s := rc.Get(ctx, slot).Val(); s != strconv.FormatInt(high+21, 10) {
		t.Fatalf("slot counter stored as %q", s)
	}
}

func TestUpgradeOnMiniredis(t *testing.T) {
	_, clients := miniNodes(t, 1)
	upgradeCases(t, clients[0])
}

func TestRealUpgradeCases(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	upgradeCases(t, cluster.ClientsT(t)[0])
}

// TestRealUpgradeKeepsTokensAbove: five real nodes carry the per-key counters an old
// deployment left (the legacy scripts made them, above the clock); Clients of the new version,
// slot layout and per-key layout in turn, and the old scripts, take turns on the keys; every
// key's tokens strictly increase across all of them.
func TestRealUpgradeKeepsTokensAbove(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	ctx := ctxT(t, time.Minute)
	keys := []string{"{u}:a", "{u}:b", "u:c"}
	high := aheadOfSeeds()
	for _, rc := range clients {
		for _, k := range keys {
			f, _ := fenceKey(k)
			if err := rc.Eval(ctx, legacyAcquireSrc, []string{k, f}, "old", 1000, high, 0).Err(); err != nil {
				t.Fatal(err)
			}
			rc.Del(ctx, k)
		}
	}
	slotC := newTestClient(t, clients, WithCounterLayout(SlotCounters))
	keyC := newTestClient(t, clients, WithCounterLayout(KeyCounters))
	last := map[string]Token{}
	for _, k := range keys {
		last[k] = Token(high)
	}
	for round := range 30 {
		k := keys[round%len(keys)]
		var tok Token
		switch round % 3 {
		case 0, 1:
			c := []*Client{slotC, keyC}[round%2]
			l, err := c.TryAcquire(ctx, k, 10*time.Second)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			tok = l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			settle(c)
		case 2: // the old version, on every node: its fast path needs equal counters
			f, _ := fenceKey(k)
			vals := map[int64]int{}
			for _, rc := range clients {
				v, err := rc.Eval(ctx, legacyAcquireSrc, []string{k, f}, "old", 1000, 1, 0).Int64()
				if err != nil {
					t.Fatal(err)
				}
				vals[v]++
				rc.Del(ctx, k)
			}
			if len(vals) != 1 {
				t.Fatalf("round %d: old version saw per-key counters %v, want one value on every node", round, vals)
			}
			for v := range vals {
				tok = Token(v)
			}
		}
		if tok <= last[k] {
			t.Fatalf("round %d: %s token %d not above %d", round, k, tok, last[k])
		}
		last[k] = tok
	}
}

// TestStatusCountersBothLayouts: Status shows both counters, Counter is the larger, and the
// bound on the next token follows the client's layout.
func TestStatusCountersBothLayouts(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	clk := &stepClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	ctx := ctxT(t, 10*time.Second)
	key := "status:both"
	per, _ := fenceKey(key)
	seed := Token(counterSeed(clk.now))
	for _, s := range servers {
		s.Set(per, (seed + 100).String())
		s.Set(slotCounter(key), (seed + 50).String())
	}
	for _, tc := range []struct {
		layout CounterLayout
		want   Token
	}{{SlotCounters, seed + 101}, {KeyCounters, seed + 101}} {
		c := newTestClient(t, clients, WithClock(clk), WithCounterLayout(tc.layout))
		st, err := c.Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range st.Nodes {
			if ns.KeyCounter != seed+100 || ns.SlotCounter != seed+50 || ns.Counter != seed+100 {
				t.Fatalf("%v: node %d: %+v", tc.layout, ns.Node, ns)
			}
		}
		if st.NextTokenAtLeast != tc.want {
			t.Fatalf("%v: next token at least %d, want %d", tc.layout, st.NextTokenAtLeast, tc.want)
		}
		l, err := c.TryAcquire(ctx, key, time.Minute)
		if err != nil || l.Token() < st.NextTokenAtLeast {
			t.Fatalf("%v: acquired %v, %v; bound %d", tc.layout, l, err, st.NextTokenAtLeast)
		}
		_ = l.Release(ctx)
		settle(c)
		for _, s := range servers {
			s.Set(per, (seed + 100).String())
			s.Set(slotCounter(key), (seed + 50).String())
		}
	}
	// No counters: the slot layout's bound is the clock, as is the per-key layout's.
	for _, s := range servers {
		s.FlushAll()
	}
	for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
		c := newTestClient(t, clients, WithClock(clk), WithCounterLayout(l))
		if st, err := c.Status(context.Background(), key); err != nil || st.NextTokenAtLeast != seed {
			t.Fatalf("%v without counters: %+v, %v; want %d", l, st, err, seed)
		}
	}
}

// TestRealScriptTakesOverAMicrosecond backs assumption (R) of docs/design.md §5.6 for slot
// counters: a node runs one script at a time, and one acquire script takes more than a
// microsecond, so one slot counter takes fewer than one +1 step per microsecond. 3 000
// acquires of keys of one slot on a real redis-server; INFO commandstats gives the time per
// EVALSHA.
func TestRealScriptTakesOverAMicrosecond(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	rc := cluster.ClientsT(t)[0]
	ctx := ctxT(t, time.Minute)
	if err := acquireScript.Load(ctx, rc).Err(); err != nil {
		t.Fatal(err)
	}
	rc.ConfigResetStat(ctx)
	for i := range 3000 {
		set, err := newLockKeys(fmt.Sprintf("{one}:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		cmd := newAcquireCommand(set, acquireArgs{id: "A", px: 60000, seed: 1, idleMillis: 60000, layout: SlotCounters})
		if _, err := cmd.run(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	info := rc.Info(ctx, "commandstats").Val()
	var usec float64
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					usec, _ = strconv.ParseFloat(v, 64)
				}
			}
		}
	}
	t.Logf("acquire.lua: %.2f µs per EVALSHA on redis-server", usec)
	if usec <= 1 {
		t.Fatalf("an acquire script took %.2f µs; (R) needs more than 1", usec)
	}
	if v, _ := rc.Get(ctx, slotCounter("{one}:0")).Int64(); v != 3000 {
		t.Fatalf("slot counter %d after 3000 acquires from seed 1, want 3000", v)
	}
}
