package redlock

import (
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

func TestScriptsOnRealRedis(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	scriptCases(t, cluster.ClientsT(t)[0])
}
