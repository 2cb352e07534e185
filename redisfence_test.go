package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// forEachStore runs f once against a miniredis server and once against a real redis-server
// started for the test (that subtest skips, or fails with REDLOCK_REQUIRE_REDIS=1, when
// redis-server is missing).
func forEachStore(t *testing.T, f func(t *testing.T, rc redis.UniversalClient)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		_, clients := miniNodes(t, 1)
		f(t, clients[0])
	})
	t.Run("redis-server", func(t *testing.T) {
		cluster := redisproc.StartT(t, 1, redisproc.Config{})
		f(t, cluster.ClientsT(t)[0])
	})
}

// wantStale fails unless err is a *StaleTokenError for resource with the given tokens.
func wantStale(tb testing.TB, err error, resource string, got, highest Token) {
	tb.Helper()
	var se *StaleTokenError
	if !errors.Is(err, ErrStaleToken) || !errors.As(err, &se) {
		tb.Fatalf("error %v; want a *StaleTokenError matching ErrStaleToken", err)
	}
	if se.Resource != resource || se.Got != got || se.Highest != highest {
		tb.Fatalf("stale error %+v; want resource %q, got %d, highest %d", *se, resource, got, highest)
	}
}

// TestRedisFenceRejectsBadInput: every bad argument gives ErrInvalidArgument and sends nothing.
func TestRedisFenceRejectsBadInput(t *testing.T) {
	servers, clients := miniNodes(t, 1)
	f := NewRedisFence(clients[0])
	ctx := ctxT(t, 5*time.Second)
	var typedNil *redis.Client
	var nilFence *RedisFence
	tooMany := make(map[string]string, maxHSetFields+1)
	for i := range maxHSetFields + 1 {
		tooMany[fmt.Sprint(i)] = "v"
	}
	before := servers[0].CommandCount()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"nil client", func() error { return NewRedisFence(nil).Set(ctx, "k", "v", 1) }},
		{"typed nil client", func() error { return NewRedisFence(typedNil).Set(ctx, "k", "v", 1) }},
		{"nil fence", func() error { return nilFence.Set(ctx, "k", "v", 1) }},
		{"nil client, get", func() error { _, _, err := NewRedisFence(nil).Get(ctx, "k"); return err }},
		{"nil client, highest", func() error { _, err := NewRedisFence(nil).Highest(ctx, "k"); return err }},
		{"empty key", func() error { return f.Set(ctx, "", "v", 1) }},
		{"empty key, get", func() error { _, _, err := f.Get(ctx, ""); return err }},
		{"empty key, highest", func() error { _, err := f.Highest(ctx, ""); return err }},
		{"token key prefix", func() error { return f.Set(ctx, HighestTokenPrefix+"{k}", "v", 1) }},
		{"lock counter prefix", func() error { return f.Set(ctx, FencePrefix+"{k}", "v", 1) }},
		{"slot counter prefix", func() error { return f.Set(ctx, SlotCounterPrefix+"{k}", "v", 1) }},
		{"key too long", func() error { return f.Set(ctx, strings.Repeat("k", MaxKeyLen+1), "v", 1) }},
		{"zero token, set", func() error { return f.Set(ctx, "k", "v", 0) }},
		{"zero token, hset", func() error { return f.HSet(ctx, "k", map[string]string{"a": "b"}, 0) }},
		{"zero token, incrby", func() error { _, err := f.IncrBy(ctx, "k", 1, 0); return err }},
		{"no fields", func() error { return f.HSet(ctx, "k", nil, 1) }},
		{"too many fields", func() error { return f.HSet(ctx, "k", tooMany, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error %v; want ErrInvalidArgument", err)
			}
		})
	}
	if after := servers[0].CommandCount(); after != before {
		t.Fatalf("rejected calls sent %d commands", after-before)
	}
}

// TestHighestKey pins the layout of token keys: same hash tag as the data key.
func TestHighestKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"payout:S-1", "redlock:highest:{payout:S-1}"},
		{"{acct:7}:balance", "redlock:highest:{acct:7}:balance"},
		{"a{b", "redlock:highest:{a{b}"},
	} {
		got, err := highestKey(tc.key)
		if err != nil || got != tc.want {
			t.Errorf("highestKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
		keyTag, ok := hashTag(tc.key)
		if !ok {
			keyTag = tc.key
		}
		if tag, _ := hashTag(got); tag != keyTag {
			t.Errorf("highestKey(%q) = %q hashes on %q, the key on %q", tc.key, got, tag, keyTag)
		}
	}
}

// TestRedisFenceSet walks the ≥ rule for Set and Get: equal and higher tokens are admitted, a
// lower one is refused with the highest token named and the value left alone.
func TestRedisFenceSet(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		const key = "ledger:S-1"

		if _, tok, err := f.Get(ctx, key); !errors.Is(err, redis.Nil) || tok != 0 {
			t.Fatalf("Get of a new key = %d, %v; want 0, redis.Nil", tok, err)
		}
		steps := []struct {
			value string
			tok   Token
			stale Token // the expected Highest when the write must be refused
		}{
			{"a@10", 10, 0},
			{"b@10", 10, 0}, // the same holder writes again
			{"c@12", 12, 0},
			{"d@11", 11, 12}, // a paused holder comes back
			{"e@1", 1, 12},
			{"f@12", 12, 0},
		}
		want, high := "", Token(0)
		for _, s := range steps {
			err := f.Set(ctx, key, s.value, s.tok)
			if s.stale != 0 {
				wantStale(t, err, key, s.tok, s.stale)
			} else if err != nil {
				t.Fatalf("Set(%q, %d): %v", s.value, s.tok, err)
			} else {
				want, high = s.value, s.tok
			}
			v, tok, err := f.Get(ctx, key)
			if err != nil || v != want || tok != high {
				t.Fatalf("after Set(%q, %d): Get = %q, %d, %v; want %q, %d", s.value, s.tok, v, tok, err, want, high)
			}
		}
		if h, err := f.Highest(ctx, key); err != nil || h != 12 {
			t.Fatalf("Highest = %d, %v; want 12", h, err)
		}
		// The layout is what the docs say: a plain string and a decimal token beside it.
		if v, err := rc.Get(ctx, key).Result(); err != nil || v != "f@12" {
			t.Fatalf("GET %s = %q, %v", key, v, err)
		}
		if v, err := rc.Get(ctx, "redlock:highest:{ledger:S-1}").Result(); err != nil || v != "12" {
			t.Fatalf("GET token key = %q, %v; want 12", v, err)
		}
		// A value deleted by someone else: Get reports redis.Nil and still the token.
		if err := rc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if _, tok, err := f.Get(ctx, key); !errors.Is(err, redis.Nil) || tok != 12 {
			t.Fatalf("Get after DEL = %d, %v; want 12, redis.Nil", tok, err)
		}
		wantStale(t, f.Set(ctx, key, "late", 11), key, 11, 12)
	})
}

// TestRedisFenceLargeTokens: tokens beyond 2^53, where Lua's doubles would merge neighbours,
// are still ordered exactly, up to the largest uint64.
func TestRedisFenceLargeTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		const two53 = Token(1) << 53
		for _, tc := range []struct{ admitted, refused Token }{
			{two53 + 1, two53}, // float64(2^53+1) == 2^53: a double comparison would admit
			{1<<60 + 1, 1 << 60},
			{9_999_999_999, 999_999_999}, // different lengths
			{10_000_000_000, 9_999_999_999},
			{math.MaxUint64, math.MaxUint64 - 1},
		} {
			key := "big:" + tc.admitted.String()
			if err := f.Set(ctx, key, "new", tc.admitted); err != nil {
				t.Fatalf("Set with %d: %v", tc.admitted, err)
			}
			wantStale(t, f.Set(ctx, key, "old", tc.refused), key, tc.refused, tc.admitted)
			if err := f.Set(ctx, key, "same", tc.admitted); err != nil {
				t.Fatalf("Set again with %d: %v", tc.admitted, err)
			}
			if v, tok, err := f.Get(ctx, key); err != nil || v != "same" || tok != tc.admitted {
				t.Fatalf("Get = %q, %d, %v; want same, %d", v, tok, err, tc.admitted)
			}
		}
	})
}

// TestRedisFenceHSet: fields are set under the key's token; a stale write changes no field;
// the key's token is shared with the other operations; a failing HSET (wrong type) leaves the
// token alone.
func TestRedisFenceHSet(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		const key = "{run:2026-11-29}:status"
		if err := f.HSet(ctx, key, map[string]string{"S-1": "paid", "S-2": "due"}, 5); err != nil {
			t.Fatal(err)
		}
		if err := f.HSet(ctx, key, map[string]string{"S-2": "paid"}, 7); err != nil {
			t.Fatal(err)
		}
		wantStale(t, f.HSet(ctx, key, map[string]string{"S-1": "due", "S-3": "paid"}, 6), key, 6, 7)
		got, err := rc.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"S-1": "paid", "S-2": "paid"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("hash %v; want %v", got, want)
		}
		if h, err := f.Highest(ctx, key); err != nil || h != 7 {
			t.Fatalf("Highest = %d, %v; want 7", h, err)
		}
		// Get reads strings only.
		if _, _, err := f.Get(ctx, key); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("Get of a hash: %v; want WRONGTYPE", err)
		}
		// A string key: HSET fails inside the script, before the token is recorded.
		if err := f.Set(ctx, "plain", "v", 3); err != nil {
			t.Fatal(err)
		}
		if err := f.HSet(ctx, "plain", map[string]string{"a": "b"}, 9); err == nil || errors.Is(err, ErrStaleToken) {
			t.Fatalf("HSet on a string: %v; want WRONGTYPE", err)
		}
		if h, err := f.Highest(ctx, "plain"); err != nil || h != 3 {
			t.Fatalf("Highest after a failed HSet = %d, %v; want 3 (unchanged)", h, err)
		}
	})
}

// TestRedisFenceIncrBy: a fenced balance. Admitted increments add up; a stale one changes
// nothing; a zero delta raises the token; an increment that Redis refuses records no token.
func TestRedisFenceIncrBy(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		const key = "balance:acct-7"
		for _, s := range []struct {
			delta int64
			tok   Token
			want  int64
		}{{500, 3, 500}, {-200, 3, 300}, {1000, 4, 1300}} {
			n, err := f.IncrBy(ctx, key, s.delta, s.tok)
			if err != nil || n != s.want {
				t.Fatalf("IncrBy(%d, %d) = %d, %v; want %d", s.delta, s.tok, n, err, s.want)
			}
		}
		_, err := f.IncrBy(ctx, key, 1000, 3)
		wantStale(t, err, key, 3, 4)
		if n, err := f.IncrBy(ctx, key, 0, 8); err != nil || n != 1300 {
			t.Fatalf("IncrBy(0, 8) = %d, %v; want 1300", n, err)
		}
		_, err = f.IncrBy(ctx, key, 1, 4)
		wantStale(t, err, key, 4, 8)
		if v, err := rc.Get(ctx, key).Int64(); err != nil || v != 1300 {
			t.Fatalf("balance %d, %v; want 1300", v, err)
		}
		// Overflow: Redis refuses, and the token stays where it was.
		if _, err := f.IncrBy(ctx, key, math.MaxInt64, 9); err == nil || errors.Is(err, ErrStaleToken) {
			t.Fatalf("overflowing IncrBy: %v; want a Redis error", err)
		}
		if h, err := f.Highest(ctx, key); err != nil || h != 8 {
			t.Fatalf("Highest after a refused increment = %d, %v; want 8", h, err)
		}
	})
}

// TestRedisFenceIncrByExact: the new value IncrBy and IncrByAll return is exact over the
// whole int64 range, also above 2^53, where Lua's numbers (doubles) cannot hold every
// integer: before, 1e18+7 plus 1 came back as 1e18 and MaxInt64-1 plus 1 as -2^63, while
// Redis stored the right value. The value returned equals the value stored, and an increment
// past MaxInt64 or below MinInt64 is refused with nothing written.
func TestRedisFenceIncrByExact(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		for i, tc := range []struct{ start, delta, want int64 }{
			{1e18 + 7, 1, 1e18 + 8},
			{math.MaxInt64 - 1, 1, math.MaxInt64},
			{1 << 53, 1, 1<<53 + 1}, // 2^53 + 1 is no double
			{1<<53 + 1, 1<<53 + 2, 1<<54 + 3},
			{math.MinInt64 + 1, -1, math.MinInt64},
			{-(1 << 53), -1, -(1 << 53) - 1},
			{0, math.MaxInt64, math.MaxInt64},
		} {
			key := fmt.Sprintf("{exact}:%d", i)
			rc.Set(ctx, key, tc.start, 0)
			n, err := f.IncrBy(ctx, key, tc.delta, 5)
			if err != nil || n != tc.want {
				t.Fatalf("IncrBy(%d) of %d = %d, %v; want %d", tc.delta, tc.start, n, err, tc.want)
			}
			if v, err := rc.Get(ctx, key).Int64(); err != nil || v != tc.want {
				t.Fatalf("stored %d, %v; want %d", v, err, tc.want)
			}
			other := key + ":b"
			rc.Set(ctx, key, tc.start, 0)
			rc.Set(ctx, other, tc.start, 0)
			got, err := f.IncrByAll(ctx, FencedIncr{key, tc.delta, 5}, FencedIncr{other, tc.delta, 5})
			if err != nil || len(got) != 2 || got[0] != tc.want || got[1] != tc.want {
				t.Fatalf("IncrByAll(%d) of %d = %v, %v; want %d twice", tc.delta, tc.start, got, err, tc.want)
			}
		}
		// Past the ends of int64: refused, nothing written, no token recorded.
		for _, tc := range []struct{ start, delta int64 }{{math.MaxInt64, 1}, {math.MinInt64, -1}} {
			key := fmt.Sprintf("{exact}:edge:%d", tc.delta)
			rc.Set(ctx, key, tc.start, 0)
			if _, err := f.IncrBy(ctx, key, tc.delta, 6); err == nil || !strings.Contains(err.Error(), "overflow") {
				t.Fatalf("IncrBy(%d) of %d: %v; want an overflow error", tc.delta, tc.start, err)
			}
			if v, _ := rc.Get(ctx, key).Int64(); v != tc.start {
				t.Fatalf("value %d after a refused increment, want %d", v, tc.start)
			}
			if h, err := f.Highest(ctx, key); err != nil || h != 0 {
				t.Fatalf("Highest after a refused increment = %d, %v; want 0", h, err)
			}
		}
	})
}

// TestRedisFenceConcurrent: many goroutines make fenced increments with random tokens on one
// key. Each admitted increment returns its position in the order Redis applied the writes,
// so the test can replay that order against a model of the ≥ rule: the admitted tokens never
// decrease, every refusal names a higher token that was admitted, and the counter equals the
// number of admitted writes.
func TestRedisFenceConcurrent(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		const workers, writes, tokenRange = 12, 60, 40
		ctx := ctxT(t, 30*time.Second)
		f := NewRedisFence(rc)
		const key = "seq"

		type result struct {
			tok, highest Token
			pos          int64 // 1-based position among admitted writes; 0 when refused
		}
		results := make(chan result, workers*writes)
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 42))
				for range writes {
					tok := Token(1 + rng.IntN(tokenRange))
					n, err := f.IncrBy(ctx, key, 1, tok)
					var se *StaleTokenError
					switch {
					case err == nil:
						results <- result{tok: tok, pos: n}
					case errors.As(err, &se):
						results <- result{tok: tok, highest: se.Highest}
					default:
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var admitted []result
		var refused []result
		for r := range results {
			if r.pos > 0 {
				admitted = append(admitted, r)
			} else {
				refused = append(refused, r)
			}
		}
		if len(admitted) == 0 || len(refused) == 0 {
			t.Fatalf("%d admitted, %d refused; want some of each", len(admitted), len(refused))
		}
		slices.SortFunc(admitted, func(a, b result) int { return int(a.pos - b.pos) })
		var highest Token
		seen := map[Token]bool{}
		for i, r := range admitted {
			if r.pos != int64(i+1) {
				t.Fatalf("admitted positions are not 1..%d: %d at index %d", len(admitted), r.pos, i)
			}
			if r.tok < highest {
				t.Fatalf("write %d admitted token %d after %d", r.pos, r.tok, highest)
			}
			highest = r.tok
			seen[r.tok] = true
		}
		for _, r := range refused {
			if r.highest <= r.tok || !seen[r.highest] {
				t.Fatalf("refusal of %d named highest %d, which is not a higher admitted token", r.tok, r.highest)
			}
		}
		if h, err := f.Highest(ctx, key); err != nil || h != highest {
			t.Fatalf("Highest = %d, %v; want %d", h, err, highest)
		}
		if n, err := rc.Get(ctx, key).Int64(); err != nil || n != int64(len(admitted)) {
			t.Fatalf("counter %d, %v; want %d admitted writes", n, err, len(admitted))
		}
	})
}

// TestRedisFenceStopsPausedHolder is the story end to end on miniredis: holder A's lock expires
// while it is paused, B takes over with a larger token and writes, and A's late write is
// refused.
func TestRedisFenceStopsPausedHolder(t *testing.T) {
	servers, nodes := miniNodes(t, 3)
	store := miniredis.RunT(t)
	sc := redis.NewClient(&redis.Options{Addr: store.Addr()})
	t.Cleanup(func() { sc.Close() })
	c := newTestClient(t, nodes, WithNodeTimeout(2*time.Second))
	f := NewRedisFence(sc)
	ctx := ctxT(t, 10*time.Second)
	const lockKey, key = "settlement:S-9", "payout:S-9"

	a, err := c.TryAcquire(ctx, lockKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, key, "A: started", a.Token()); err != nil {
		t.Fatal(err)
	}
	settle(c)
	for _, s := range servers { // A is paused past its TTL: its keys expire
		s.FastForward(2 * time.Second)
	}
	b, err := c.TryAcquire(ctx, lockKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d", b.Token(), a.Token())
	}
	if err := f.Set(ctx, key, "B: paid", b.Token()); err != nil {
		t.Fatal(err)
	}
	wantStale(t, f.Set(ctx, key, "A: paid", a.Token()), key, a.Token(), b.Token())
	if v, tok, err := f.Get(ctx, key); err != nil || v != "B: paid" || tok != b.Token() {
		t.Fatalf("Get = %q, %d, %v; want B's write", v, tok, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealRedisFenceOnClusterNode runs every fenced operation on a cluster-enabled
// redis-server that serves all slots, where a script touching keys of two slots fails with
// CROSSSLOT. The operations succeed, and the same script given a token key of another slot
// fails, which shows the check is real.
func TestRealRedisFenceOnClusterNode(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--cluster-enabled", "yes"}})
	rc := cluster.ClientsT(t)[0]
	ctx := ctxT(t, 20*time.Second)
	if err := rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "cluster_state:ok") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster state not ok: %s", info)
		case <-time.After(10 * time.Millisecond):
		}
	}
	f := NewRedisFence(rc)
	for _, key := range []string{"payout:S-1", "{acct:7}:balance", "a{b", "}a{b}", "payout:é:日本"} {
		if err := f.Set(ctx, key, "v", 2); err != nil {
			t.Fatalf("Set %q: %v", key, err)
		}
		if v, tok, err := f.Get(ctx, key); err != nil || v != "v" || tok != 2 {
			t.Fatalf("Get %q = %q, %d, %v", key, v, tok, err)
		}
		if err := f.HSet(ctx, key+":h", map[string]string{"f": "v"}, 2); err != nil {
			t.Fatalf("HSet %q: %v", key, err)
		}
		if _, err := f.IncrBy(ctx, key+":n", 1, 2); err != nil {
			t.Fatalf("IncrBy %q: %v", key, err)
		}
	}
	err := fenceWriteScript.Run(ctx, rc, []string{"payout:S-1", "redlock:highest:payout:S-1"}, "2", "set", "v").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") && !strings.Contains(err.Error(), "different slot") {
		t.Fatalf("script with keys of two slots: %v; want CROSSSLOT", err)
	}
}

// TestRedisFenceContext: a call whose context has ended returns an error that wraps ctx.Err(),
// and here (go-redis checks the context before sending) writes nothing.
func TestRedisFenceContext(t *testing.T) {
	_, clients := miniNodes(t, 1)
	f := NewRedisFence(clients[0])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Set(ctx, "k", "v", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Set with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := f.IncrBy(ctx, "k", 1, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("IncrBy with a cancelled context: %v; want context.Canceled", err)
	}
	if _, _, err := f.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v; want context.Canceled", err)
	}
	if h, err := f.Highest(ctxT(t, 5*time.Second), "k"); err != nil || h != 0 {
		t.Fatalf("Highest = %d, %v; want 0: nothing written", h, err)
	}
}

// FuzzRedisFenceTokens: for any two tokens, a fenced write with the second after one with
// the first is admitted exactly when second ≥ first, also above 2^53, where Lua's numbers
// lose precision (fence_write.lua compares decimal strings in two exact halves); Get and
// Highest read back the highest token admitted; parseToken reads every token's decimal.
func FuzzRedisFenceTokens(f *testing.F) {
	_, clients := miniNodes(f, 1)
	fence := NewRedisFence(clients[0])
	ctx := context.Background()
	for _, s := range [][2]uint64{{1, 1}, {2, 1}, {1 << 53, 1<<53 + 1}, {1<<53 + 1, 1 << 53}, {math.MaxUint64, math.MaxUint64 - 1},
		{9_999_999_999, 10_000_000_000}, {10_000_000_000, 9_999_999_999}, {1796125193379247, 1796125193379248}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		if a == 0 || b == 0 {
			return
		}
		if got, err := parseToken(strconv.FormatUint(a, 10)); err != nil || uint64(got) != a {
			t.Fatalf("parseToken(%d) = %d, %v", a, got, err)
		}
		key := "fuzz:" + strconv.FormatUint(a, 36) + ":" + strconv.FormatUint(b, 36)
		defer clients[0].Del(ctx, key, "redlock:highest:{"+key+"}")
		if err := fence.Set(ctx, key, "first", Token(a)); err != nil {
			t.Fatalf("first write with %d: %v", a, err)
		}
		err := fence.Set(ctx, key, "second", Token(b))
		if admitted := err == nil; admitted != (b >= a) {
			t.Fatalf("write with %d after %d: %v", b, a, err)
		}
		if err != nil && !errors.Is(err, ErrStaleToken) {
			t.Fatalf("refusal of %d after %d: %v", b, a, err)
		}
		_, tok, err := fence.Get(ctx, key)
		if err != nil || uint64(tok) != max(a, b) {
			t.Fatalf("Get after %d, %d: token %d, %v", a, b, tok, err)
		}
	})
}

// FuzzParseToken: parseToken never panics, and what it accepts is the decimal of a token
// from 1 to 2^64−1 (leading zeros allowed).
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "18446744073709551615", "18446744073709551616", "-1", "+1", "007", "", "1e3", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := parseToken(s)
		if err == nil && (tok == 0 || strconv.FormatUint(uint64(tok), 10) != strings.TrimLeft(s, "0")) {
			t.Fatalf("parseToken(%q) = %d", s, tok)
		}
	})
}
