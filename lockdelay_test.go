package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestLockDelayBadTTL: a TTL whose keys would outlive MaxTTL once the lock-delay is added is
// refused by every call that takes a TTL, with ErrInvalidArgument and nothing sent; the
// largest allowed sum is accepted.
func TestLockDelayBadTTL(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	const d = time.Hour
	c := newTestClient(t, clients, WithLockDelay(d))
	ctx := ctxT(t, 10*time.Second)
	before := commandCounts(servers)
	for _, ttl := range []time.Duration{MaxTTL, MaxTTL - d + time.Millisecond} {
		if _, err := c.TryAcquire(ctx, "delay:bad", ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("TryAcquire(%v) with delay %v: %v, want ErrInvalidArgument", ttl, d, err)
		}
		if _, err := c.Acquire(ctx, "delay:bad", ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Acquire(%v) with delay %v: %v, want ErrInvalidArgument", ttl, d, err)
		}
	}
	for _, ttl := range []time.Duration{MaxTTL, MaxTTL - d + time.Millisecond} {
		keys := []string{"delay:bad:a", "delay:bad:b"}
		if _, err := c.TryAcquireMulti(ctx, keys, ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("TryAcquireMulti(%v) with delay %v: %v, want ErrInvalidArgument", ttl, d, err)
		}
		if err := c.DoMulti(ctx, keys, ttl, func(context.Context, *MultiLock) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("DoMulti(%v) with delay %v: %v, want ErrInvalidArgument", ttl, d, err)
		}
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Fatalf("commands sent for refused TTLs: %v -> %v", before, got)
	}
	l, err := c.TryAcquire(ctx, "delay:bad", MaxTTL-d) // the largest sum allowed
	if err != nil {
		t.Fatalf("TryAcquire(MaxTTL - delay): %v", err)
	}
	settle(c) // the nodes beyond the quorum answer in the background
	if ms := servers[0].TTL("delay:bad"); ms != MaxTTL {
		t.Fatalf("key TTL %v, want MaxTTL %v", ms, MaxTTL)
	}
	before = commandCounts(servers)
	if err := l.Extend(ctx, MaxTTL); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Extend(MaxTTL) with delay: %v, want ErrInvalidArgument", err)
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Fatalf("commands sent for a refused extend: %v -> %v", before, got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRealLockDelay: on real nodes, a holder that never releases (a crash) keeps the lock
// out of another client's reach after its TTL has passed, until TTL + delay; its keys carry
// PX TTL + delay, on acquire and on extend, while Until is computed from the TTL alone.
// Status reports the lapsed holder with the delay in its remaining time.
func TestRealLockDelay(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	clients := cluster.ClientsT(t)
	const (
		ttl   = 400 * time.Millisecond
		delay = 1600 * time.Millisecond
		key   = "real:delay"
	)
	holder := newTestClient(t, clients, WithLockDelay(delay), WithNodeTimeout(2*time.Second))
	// The other client has no delay of its own: the holder's keys carry it.
	other := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)

	t0 := time.Now()
	a, err := holder.TryAcquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if u := a.Until().Sub(t0); u > ttl {
		t.Fatalf("Until is %v after the start, beyond the TTL %v: the delay leaked into validity", u, ttl)
	}
	settle(holder)
	for i, rc := range clients {
		// The key lives TTL + delay, so right after the acquire it has more than the TTL left.
		if p := rc.PTTL(ctx, key).Val(); p <= ttl || p > ttl+delay {
			t.Fatalf("node %d: key PTTL %v, want in (%v, %v]", i, p, ttl, ttl+delay)
		}
	}
	// The holder now "crashes": it never releases. Wait for its validity to end.
	time.Sleep(time.Until(a.Until())) // the passing of time is what is under test
	st, err := other.Status(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != a.ID() {
		t.Fatalf("Status after Until: holder %q, want the lapsed holder %q", st.Holder, a.ID())
	}
	for _, ns := range st.Nodes {
		if ns.TTL <= 0 {
			t.Fatalf("Status after Until: node %d has no TTL left, want the delay's remainder", ns.Node)
		}
	}

	// Poll until the other client gets in, bounded.
	refusedAfterTTL := 0
	var b *Lock
	var gotAt time.Time
	for deadline := t0.Add(ttl + delay + 20*time.Second); b == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no acquire within %v of the start", deadline.Sub(t0))
		}
		asked := time.Now()
		b, err = other.TryAcquire(ctx, key, 10*time.Second)
		switch {
		case err == nil:
			gotAt = time.Now()
		case errors.Is(err, ErrNotAcquired):
			if asked.Sub(t0) >= ttl {
				refusedAfterTTL++
			}
			time.Sleep(20 * time.Millisecond) // a polling interval, not a synchronisation
		default:
			t.Fatal(err)
		}
	}
	if refusedAfterTTL == 0 {
		t.Fatal("no attempt was refused after the TTL had passed: the delay was not observed")
	}
	// The keys were set after t0 with PX ttl + delay; Redis may expire a key up to about a
	// millisecond early.
	if got := gotAt.Sub(t0); got < ttl+delay-5*time.Millisecond {
		t.Fatalf("acquired %v after the first holder's start, before TTL + delay = %v", got, ttl+delay)
	}
	t.Logf("refused %d times after the TTL; acquired %v after the start (TTL + delay = %v)",
		refusedAfterTTL, gotAt.Sub(t0), ttl+delay)
	if b.Token() <= a.Token() {
		t.Fatalf("token %d not above %d", b.Token(), a.Token())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release of the lapsed lock: %v, want ErrNotHeld", err)
	}

	// Extend gives the keys TTL + delay too.
	c, err := holder.TryAcquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if u := time.Until(c.Until()); u > 10*time.Second {
		t.Fatalf("Until %v away after Extend(10s): the delay leaked into validity", u)
	}
	settle(holder)
	for i, rc := range clients {
		if p := rc.PTTL(ctx, key).Val(); p <= 10*time.Second || p > 10*time.Second+delay {
			t.Fatalf("node %d: PTTL %v after Extend(10s), want in (10s, %v]", i, p, 10*time.Second+delay)
		}
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealLockDelayReleaseClears: an explicit Release deletes the keys, so the next acquire
// gets in at once rather than after TTL + delay; so does the undo of a failed acquire, which
// leaves no key behind.
func TestRealLockDelayReleaseClears(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	clients := cluster.ClientsT(t)
	const (
		ttl   = 5 * time.Second
		delay = time.Minute
		key   = "real:delay-release"
	)
	holder := newTestClient(t, clients, WithLockDelay(delay), WithNodeTimeout(2*time.Second))
	other := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryLimit(1))
	ctx := ctxT(t, time.Minute)

	a, err := holder.TryAcquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := other.TryAcquire(ctx, key, ttl)
	if err != nil {
		t.Fatalf("acquire right after a release with a delay of %v: %v", delay, err)
	}
	if e := time.Since(released); e >= ttl {
		t.Fatalf("the next holder got in %v after the release, not at once", e)
	}

	// While b holds, an acquire with the delay fails; its undo deletes nothing of b's, and
	// leaves no key of its own (it would otherwise sit there for TTL + delay).
	settle(other)
	settle(holder)
	// b won on a quorum; a node where a's release came after b's acquire has no key of b's.
	// Put b's key there, so that b holds every node before node 0 is freed.
	for _, rc := range clients {
		if rc.Get(ctx, key).Val() != b.ID() {
			if err := rc.Set(ctx, key, b.ID(), ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := clients[0].Del(ctx, key).Err(); err != nil { // node 0 free, so the attempt takes it
		t.Fatal(err)
	}
	if _, err := holder.TryAcquire(ctx, key, ttl); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire while held on 2 of 3 nodes: %v", err)
	}
	settle(holder)
	if n := clients[0].Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("node 0: the failed acquire's key is still there (PTTL %v)", clients[0].PTTL(ctx, key).Val())
	}
	for i, rc := range clients[1:] {
		if got := rc.Get(ctx, key).Val(); got != b.ID() {
			t.Fatalf("node %d: b's key became %q", i+1, got)
		}
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockDelayCounterOutlivesKey: the fence counter's idle TTL is never shorter than the
// lock key's lifetime, TTL + delay, so a key serving its delay still finds its counter.
func TestLockDelayCounterOutlivesKey(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithLockDelay(5*time.Second), WithCounterIdleTTL(time.Second))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, "delay:counter", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c) // the nodes beyond the quorum answer in the background
	fence := slotCounter("delay:counter")
	for i, s := range servers {
		if got := s.TTL(fence); got != 7*time.Second {
			t.Fatalf("node %d: counter TTL %v, want the key's 7s", i, got)
		}
		if got := s.TTL("delay:counter"); got != 7*time.Second {
			t.Fatalf("node %d: key TTL %v, want 7s", i, got)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealLockDelayLateExtend: a holder whose Until has passed but whose keys are still
// serving the delay can extend: its keys never expired, so nobody else held the lock
// meanwhile (docs/design.md §5.10). Another client is refused before and after.
func TestRealLockDelayLateExtend(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	clients := cluster.ClientsT(t)
	const (
		ttl   = 300 * time.Millisecond
		delay = 5 * time.Second
		key   = "real:delay-late-extend"
	)
	holder := newTestClient(t, clients, WithLockDelay(delay), WithNodeTimeout(2*time.Second))
	other := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, time.Minute)
	t0 := time.Now()
	a, err := holder.TryAcquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(a.Until())) // the lapse of validity is what is under test
	if _, err := other.TryAcquire(ctx, key, ttl); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire after Until, within the delay: %v, want ErrNotAcquired", err)
	}
	if err := a.Extend(ctx, 10*time.Second); err != nil {
		if time.Since(t0) >= ttl+delay {
			t.Skipf("the extend started after TTL + delay (%v): the machine is too loaded", time.Since(t0))
		}
		t.Fatalf("extend after Until within the delay: %v", err)
	}
	if time.Until(a.Until()) < 9*time.Second {
		t.Fatalf("Until did not move: %v left", time.Until(a.Until()))
	}
	if _, err := other.TryAcquire(ctx, key, ttl); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire after the late extend: %v, want ErrNotAcquired", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
