package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRWLockRejectsBadInput: bad names, contexts and TTLs are ErrInvalidArgument and send
// nothing.
func TestRWLockRejectsBadInput(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	var nilCtx context.Context // a nil context, as a careless caller passes it
	before := commandCounts(servers)
	ok := c.RWLock("ledger")
	fn := func(context.Context, *Lock) error { return nil }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"empty name", first(c.RWLock("").AcquireRead(ctx, time.Second)), "empty"},
		{"reserved name", first(c.RWLock(FencePrefix+"x").TryAcquireWrite(ctx, time.Second)), "reserved"},
		{"huge name", first(c.RWLock(strings.Repeat("n", MaxKeyLen)).TryAcquireRead(ctx, time.Second)), "MaxKeyLen"},
		{"nil ctx read", first(ok.TryAcquireRead(nilCtx, time.Second)), "context is nil"},
		{"nil ctx write", first(ok.AcquireWrite(nilCtx, time.Second)), "context is nil"},
		{"ttl 0", first(ok.TryAcquireRead(ctx, 0)), "ttl"},
		{"negative ttl", first(ok.TryAcquireWrite(ctx, -time.Second)), "ttl"},
		{"DoRead nil fn", ok.DoRead(ctx, time.Second, nil), "fn is nil"},
		{"DoWrite short ttl", ok.DoWrite(ctx, 20*time.Millisecond, fn), "too short"},
	} {
		if !errors.Is(tc.err, ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", tc.name, tc.err, tc.want)
		}
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("bad input reached the nodes: %v -> %v", before, got)
	}
}

// TestRWLockSemantics: readers share; a writer is refused while readers hold and then keeps
// new readers out; once the readers leave it gets the lock, readers are refused while it
// holds, and writer tokens increase; its release, readers having waited, opens a read phase in
// which readers come in and writers wait whatever the intent; a reader's token is 0 and it is
// never joined.
func TestRWLockSemantics(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	rw, rw2 := c.RWLock("ledger:snapshot"), other.RWLock("ledger:snapshot")
	r1, err := rw.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw2.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("a second reader:", err)
	}
	if r1.Token() != 0 || r1.Key() != rw.Key() {
		t.Errorf("reader: token %d, key %q", r1.Token(), r1.Key())
	}
	if _, err := rw2.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("writer while readers hold: %v, want ErrNotAcquired", err)
	}
	// The refused writer waits: new readers are refused (a stream cannot starve it).
	if _, err := rw.TryAcquireRead(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a new reader while a writer waits: %v, want ErrNotAcquired", err)
	}
	if err := r1.Extend(ctx, 20*time.Second); err != nil {
		t.Errorf("reader extend: %v", err)
	}
	for _, r := range []*Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w1, err := rw2.TryAcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("writer after the readers left:", err)
	}
	if _, err := rw.TryAcquireRead(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("reader while a writer holds: %v", err)
	}
	if _, err := rw.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("second writer: %v", err)
	}
	// Waiters: a reader and a writer of the other Client, woken by the release.
	got := make(chan *Lock, 1)
	go func() {
		l, err := rw.AcquireRead(ctx, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	if err := w1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r3 := <-got
	if r3 == nil {
		return
	}
	// The read phase (readers were refused while w1 held): a writer is refused and marks its
	// intent, and a reader comes in all the same.
	if _, err := rw2.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("writer in the read phase: %v, want ErrNotAcquired", err)
	}
	r4, err := rw.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("a reader in the read phase, beside a writer's intent:", err)
	}
	// After the phase (miniredis expires keys on FastForward only) the intent holds new
	// readers back again.
	for _, s := range servers {
		s.FastForward(readPhase(DefaultRetryDelay) + time.Millisecond)
	}
	if _, err := rw.TryAcquireRead(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a reader after the read phase, a writer waiting: %v, want ErrNotAcquired", err)
	}
	if err := r4.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader's context joins nothing: a write acquire under it is a new acquire (refused
	// here, the reader holds).
	if _, err := rw.TryAcquireWrite(r3.Context(ctx), 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("write under a reader's context: %v, want ErrNotAcquired (never joined)", err)
	}
	if err := r3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := rw.AcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Token() <= w1.Token() {
		t.Errorf("writer tokens %d then %d", w1.Token(), w2.Token())
	}
	_ = w2.Release(ctx)
}

// TestRWLockDo: DoRead and DoWrite run fn under the lock and release it.
func TestRWLockDo(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryDelay(20*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	rw := c.RWLock("do")
	err := rw.DoRead(ctx, time.Second, func(ctx context.Context, r *Lock) error {
		_, err := rw.TryAcquireWrite(ctx, time.Second)
		if !errors.Is(err, ErrNotAcquired) {
			t.Errorf("writer inside DoRead: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var tok Token
	err = rw.DoWrite(ctx, time.Second, func(ctx context.Context, w *Lock) error {
		tok = w.Token()
		return nil
	})
	if err != nil || tok == 0 {
		t.Fatalf("DoWrite: %v, token %d", err, tok)
	}
}

// TestEagerPauseFollowsRefusal: an eager turn (semaphore, read/write lock) refused by nodes
// whose refusals end in a few milliseconds (a read phase, a key about to expire) retries
// then, not after the retry delay; other turns, and refusals that last, keep the delay.
func TestEagerPauseFollowsRefusal(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryDelay(time.Second))
	for _, tc := range []struct {
		eager    bool
		left     int64
		min, max time.Duration
	}{
		{true, 3, 0, 4 * time.Millisecond},
		{true, 10_000, 500 * time.Millisecond, 1500 * time.Millisecond},
		{true, 0, 500 * time.Millisecond, 1500 * time.Millisecond},
		{false, 3, 500 * time.Millisecond, 1500 * time.Millisecond},
	} {
		tr := &turn{c: c, eager: tc.eager}
		p := tr.pause(attemptResult{kind: attemptContended, left: tc.left})
		if p < tc.min || p > tc.max {
			t.Errorf("eager %v, %d ms left: pause %v, want %v to %v", tc.eager, tc.left, p, tc.min, tc.max)
		}
	}
}
