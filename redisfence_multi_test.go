package redlock

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRedisFenceIncrByAll: a transfer's two legs are admitted together or not at all, each
// against its own key's highest token; a failing leg undoes the others.
func TestRedisFenceIncrByAll(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		a, b := "{bank}:balance:a", "{bank}:balance:b"
		val := func(k string) (int64, bool) {
			v, err := rc.Get(ctx, k).Int64()
			return v, err == nil
		}
		// Opening balances, each under its own token.
		got, err := f.IncrByAll(ctx, FencedIncr{a, 1000, 5}, FencedIncr{b, 0, 7})
		if err != nil || len(got) != 2 || got[0] != 1000 || got[1] != 0 {
			t.Fatalf("open: %v, %v", got, err)
		}
		// A transfer of 300 under tokens 5 (a) and 7 (b).
		if got, err := f.IncrByAll(ctx, FencedIncr{a, -300, 5}, FencedIncr{b, 300, 7}); err != nil || got[0] != 700 || got[1] != 300 {
			t.Fatalf("transfer: %v, %v", got, err)
		}
		// A newer holder of b writes with token 9; the old holder's next transfer is refused
		// whole, though its token for a is still the highest there.
		if _, err := f.IncrBy(ctx, b, 50, 9); err != nil {
			t.Fatal(err)
		}
		_, err = f.IncrByAll(ctx, FencedIncr{a, -100, 5}, FencedIncr{b, 100, 7})
		wantStale(t, err, b, 7, 9)
		if v, _ := val(a); v != 700 {
			t.Fatalf("a = %d after a refused transfer, want 700", v)
		}
		if v, _ := val(b); v != 350 {
			t.Fatalf("b = %d after a refused transfer, want 350", v)
		}
		if h, _ := f.Highest(ctx, a); h != 5 {
			t.Fatalf("a's highest token %d, want 5", h)
		}
		// A leg that cannot be applied (b's value is not an integer) undoes the leg before it,
		// including a key that the leg had created, and records no token.
		fresh := "{bank}:balance:fresh"
		rc.Set(ctx, b, "not a number", 0)
		_, err = f.IncrByAll(ctx, FencedIncr{fresh, 10, 20}, FencedIncr{a, -10, 20}, FencedIncr{b, 10, 20})
		if err == nil || errors.Is(err, ErrStaleToken) {
			t.Fatalf("leg on a non-integer: %v, want a Redis error", err)
		}
		if _, ok := val(fresh); ok {
			t.Fatal("the undone leg left the key it created")
		}
		if v, _ := val(a); v != 700 {
			t.Fatalf("a = %d after an undone transfer, want 700", v)
		}
		if h, _ := f.Highest(ctx, a); h != 5 {
			t.Fatalf("a's highest token %d after an undone transfer, want 5", h)
		}
		// Overflow on the second leg: the first is undone too.
		rc.Set(ctx, b, math.MaxInt64, 0)
		if _, err := f.IncrByAll(ctx, FencedIncr{a, 1, 30}, FencedIncr{b, 1, 30}); err == nil {
			t.Fatal("overflowing leg admitted")
		}
		if v, _ := val(a); v != 700 {
			t.Fatalf("a = %d after an overflow, want 700", v)
		}
	})
}

func TestRedisFenceIncrByAllRejectsBadInput(t *testing.T) {
	_, clients := miniNodes(t, 1)
	f := NewRedisFence(clients[0])
	ctx := context.Background()
	many := make([]FencedIncr, MaxMultiKeys+1)
	for i := range many {
		many[i] = FencedIncr{Key: "k" + string(rune('A'+i)), Delta: 1, Token: 1}
	}
	for name, incs := range map[string][]FencedIncr{
		"none":              nil,
		"too many":          many,
		"empty key":         {{"", 1, 1}},
		"reserved key":      {{FencePrefix + "x", 1, 1}},
		"slot counter name": {{SlotCounterPrefix + "{x}", 1, 1}},
		"zero token":        {{"a", 1, 0}},
		"min int64":         {{"a", math.MinInt64, 1}},
		"twice":             {{"a", 1, 1}, {"a", 2, 1}},
		"shared token key":  {{"x", 1, 1}, {"{x}", 2, 1}},
	} {
		if _, err := f.IncrByAll(ctx, incs...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if keys, _ := clients[0].Keys(ctx, "*").Result(); len(keys) != 0 {
		t.Fatalf("bad input wrote %v", keys)
	}
	var nilFence *RedisFence
	if _, err := nilFence.IncrByAll(ctx, FencedIncr{"a", 1, 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil fence: %v", err)
	}
}

// TestRealRedisFenceIncrByAllCluster: on a Redis Cluster client, legs in two hash slots are
// refused before anything is sent, and legs sharing a hash tag work.
func TestRealRedisFenceIncrByAllCluster(t *testing.T) {
	rc := redisproc.StartRedisClusterT(t, 3, redisproc.Config{}).ClusterClientT(t)
	f := NewRedisFence(rc)
	ctx := ctxT(t, 20*time.Second)
	if _, err := f.IncrByAll(ctx, FencedIncr{"acct:a", 1, 1}, FencedIncr{"acct:b", 1, 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("two slots: %v, want ErrInvalidArgument", err)
	}
	if got, err := f.IncrByAll(ctx, FencedIncr{"{acct}:a", -5, 1}, FencedIncr{"{acct}:b", 5, 1}); err != nil || got[0] != -5 || got[1] != 5 {
		t.Fatalf("one slot: %v, %v", got, err)
	}
}

// TestRedisFenceGarbageTokenKey: a token key that holds something other than a token (written
// by another program) makes every fenced write fail with an error that says so, and nothing is
// written.
func TestRedisFenceGarbageTokenKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 10*time.Second)
		f := NewRedisFence(rc)
		tk, _ := highestKey("q")
		rc.Set(ctx, tk, "not-a-token", 0)
		for name, err := range map[string]error{
			"Set":       f.Set(ctx, "q", "v", 5),
			"IncrByAll": func() error { _, err := f.IncrByAll(ctx, FencedIncr{"q", 1, 5}); return err }(),
		} {
			if err == nil || !strings.Contains(err.Error(), "holds something other than a token") {
				t.Fatalf("%s over a garbage token key: %v", name, err)
			}
		}
		if n := rc.Exists(ctx, "q").Val(); n != 0 {
			t.Fatal("a write went through")
		}
	})
}
