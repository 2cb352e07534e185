package redlock

import (
	"crypto/fips140"
	"crypto/sha1"
	"os"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestRealFIPSOnly runs the library's calls in Go's FIPS 140-only mode, where SHA-1 is refused
// (it panics): an acquire (queued, and TryAcquire), an extend, fenced writes of each kind, a
// release, and an acquire after the node lost its script cache (the EVAL fallback), against
// three real redis-servers. Before the SHA-1 constants the package did not even initialise
// in this mode (go-redis's NewScript hashed every script at init). .ci/run runs it with
// GODEBUG=fips140=only and REDLOCK_REQUIRE_FIPS=1, which makes it fail rather than skip when
// the mode is off.
func TestRealFIPSOnly(t *testing.T) {
	if !fips140.Enforced() {
		if os.Getenv("REDLOCK_REQUIRE_FIPS") == "1" {
			t.Fatal("REDLOCK_REQUIRE_FIPS=1 but FIPS 140-only mode is off; run with GODEBUG=fips140=only")
		}
		t.Skip("FIPS 140-only mode is off (GODEBUG=fips140=only turns it on)")
	}
	func() { // the mode is really on: SHA-1 panics
		defer func() {
			if recover() == nil {
				t.Fatal("sha1.Sum did not panic in FIPS 140-only mode")
			}
		}()
		sha1.Sum([]byte("x"))
	}()
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 30*time.Second)

	l, err := c.Acquire(ctx, "fips:k", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("extend: %v", err)
	}
	f := NewRedisFence(clients[0])
	if err := f.Set(ctx, "fips:data", "paid", l.Token()); err != nil {
		t.Fatalf("fenced set: %v", err)
	}
	if v, tok, err := f.Get(ctx, "fips:data"); err != nil || v != "paid" || tok != l.Token() {
		t.Fatalf("fenced get: %q, %d, %v", v, tok, err)
	}
	if n, err := f.IncrBy(ctx, "fips:n", 7, l.Token()); err != nil || n != 7 {
		t.Fatalf("fenced incrby: %d, %v", n, err)
	}
	if _, err := f.IncrByAll(ctx, FencedIncr{"{fips}:a", -3, l.Token()}, FencedIncr{"{fips}:b", 3, l.Token()}); err != nil {
		t.Fatalf("fenced incrby all: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}

	// A node without the scripts (restarted, SCRIPT FLUSH): EVALSHA fails with NOSCRIPT and
	// the EVAL fallback sends the source, which needs no hash either.
	for _, rc := range clients {
		if err := rc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l2, err := c.TryAcquire(ctx, "fips:k", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire after SCRIPT FLUSH: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	if err := f.Set(ctx, "fips:data", "again", l2.Token()); err != nil {
		t.Fatalf("fenced set after SCRIPT FLUSH: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("release after SCRIPT FLUSH: %v", err)
	}
}
