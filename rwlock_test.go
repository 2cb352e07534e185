package redlock

import (
	"context"
	"errors"
	"slices"
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
// which readers come in and writers wait whatever the intent, until the readers marked have
// come in or readPhaseMax has passed; a reader's token is 0 and it is never joined.
func TestRWLockSemantics(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	rw, rw2 := c.RWLock("ledger:snapshot"), other.RWLock("ledger:snapshot")
	frozen := time.Now() // the nodes' TIME: marks and phases end only when the test moves it
	for _, s := range servers {
		s.SetTime(frozen)
	}
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
	if _, err := rw2.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "readers hold") {
		t.Fatalf("writer while readers hold: %v, want ErrNotAcquired saying readers hold", err)
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
	if _, err := rw.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "key held by another holder") {
		t.Fatalf("second writer: %v, want ErrNotAcquired saying the key is held", err)
	}
	// A waiting reader is marked on the nodes that refuse it, and the writer's release opens
	// a read phase for it, which ends when it has come in: a writer is refused until then.
	got := make(chan *Lock, 1)
	go func() {
		l, err := rw.AcquireRead(ctx, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitRW(t, ctx, rw, "a reader marked waiting on a quorum", func(st *RWStatus) bool {
		return onQuorum(st, func(n RWNodeStatus) bool { return n.Phase == "w" && n.Waiting == 1 })
	})
	if err := w1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r3 := <-got
	if r3 == nil {
		return
	}
	// It came in on a quorum, which ended the phase there (its marks elsewhere go after).
	if st := rwStatusT(t, ctx, rw); !onQuorum(st, func(n RWNodeStatus) bool { return n.Phase == "" && n.Waiting == 0 }) {
		t.Errorf("after the only reader marked came in: %+v; want the phase ended on a quorum", st.Nodes)
	}
	// The phase is over, so a writer's intent keeps new readers out again.
	if _, err := rw2.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("writer beside a reader: %v, want ErrNotAcquired", err)
	}
	if _, err := rw.TryAcquireRead(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a new reader while a writer waits, after the read phase: %v, want ErrNotAcquired", err)
	}
	if err := r3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w3, err := rw2.TryAcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("the waiting writer after the reader left:", err)
	}
	// A reader that gives up (its context cancelled) takes its marks away: no read phase is
	// to wait for it. (The nodes' clocks are frozen, so no mark expires meanwhile.)
	gone, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := rw.AcquireRead(gone, 10*time.Second)
		done <- err
	}()
	waitRW(t, ctx, rw, "a reader marked waiting on a quorum", func(st *RWStatus) bool {
		return onQuorum(st, func(n RWNodeStatus) bool { return n.Waiting == 1 })
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v", err)
	}
	waitRW(t, ctx, rw, "the cancelled reader's marks gone from every node", func(st *RWStatus) bool {
		return !slices.ContainsFunc(st.Nodes, func(n RWNodeStatus) bool { return n.Waiting != 0 })
	})
	// A reader marked that never comes back (its process died: a mark written here) holds
	// the read phase open for at most readPhaseMax: meanwhile writers are refused and readers
	// come in despite the intent; afterwards the intent keeps readers out again.
	for _, s := range servers {
		if _, err := s.ZAdd(rw.keys.phase, float64(frozen.Add(rwIntentTTL(DefaultRetryDelay)).UnixMilli()), "dead0000dead0000dead0000dead0000"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st := rwStatusT(t, ctx, rw); !onQuorum(st, func(n RWNodeStatus) bool {
		return n.Phase == "r" && n.Waiting == 1 && n.PhaseTTL <= readPhaseMax(DefaultRetryDelay)
	}) {
		t.Errorf("read phase: %+v; want on a quorum \"r\", 1 to come, at most %v left", st.Nodes, readPhaseMax(DefaultRetryDelay))
	}
	if _, err := rw2.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "a read phase is open") {
		t.Fatalf("writer in the read phase: %v, want ErrNotAcquired saying a read phase is open", err)
	}
	r4, err := rw.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("a reader in the read phase, beside a writer's intent:", err)
	}
	// After the bound (miniredis moves TIME with SetTime and expires keys on FastForward)
	// the phase is over although its reader never came.
	for _, s := range servers {
		d := readPhaseMax(DefaultRetryDelay) + time.Millisecond
		s.SetTime(frozen.Add(d))
		s.FastForward(d)
	}
	if _, err := rw.TryAcquireRead(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a reader after the read phase, a writer waiting: %v, want ErrNotAcquired", err)
	}
	if err := r4.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w1 = w3
	for _, s := range servers {
		s.FastForward(rwIntentTTL(DefaultRetryDelay)) // the intent lapses
	}
	if r3, err = rw.TryAcquireRead(ctx, 10*time.Second); err != nil {
		t.Fatal("reader once the intent lapsed:", err)
	}
	// A reader's context joins nothing: a write acquire under it is a new acquire (refused
	// here, the reader holds). A writer's is joined (TestRWLockWriterJoins).
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

// rwStatusT reads rw's status or fails the test.
func rwStatusT(t *testing.T, ctx context.Context, rw *RWLock) *RWStatus {
	t.Helper()
	st, err := rw.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// onQuorum reports whether ok holds for the status of at least a quorum of st's nodes.
func onQuorum(st *RWStatus, ok func(RWNodeStatus) bool) bool {
	n := 0
	for _, ns := range st.Nodes {
		if ns.Err == nil && ok(ns) {
			n++
		}
	}
	return n >= st.Quorum
}

// waitRW waits, polling rw's status, until ok holds for it (what, in the error when ctx
// ends first).
func waitRW(t *testing.T, ctx context.Context, rw *RWLock, what string, ok func(*RWStatus) bool) {
	t.Helper()
	var last *RWStatus
	var lastErr error
	for {
		st, err := rw.Status(ctx)
		if err == nil && ok(st) {
			return
		}
		if err == nil || last == nil {
			last, lastErr = st, err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				t.Fatalf("waiting for %s: %v (last status: %+v; error %v)", what, ctx.Err(), last.Nodes, lastErr)
			}
			t.Fatalf("waiting for %s: %v (last error %v)", what, ctx.Err(), lastErr)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestRWLockWriterJoins: a write acquire under the writer's context joins its hold (same
// token, nothing sent, a nested Release that leaves the hold), TryAcquireWrite, AcquireWrite
// and DoWrite alike; a read acquire under it is a new acquire, refused; another Client's
// writer is refused all along; once the hold is released the context joins nothing.
func TestRWLockWriterJoins(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	rw := c.RWLock("ledger:join")
	w, err := rw.TryAcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held := w.Context(ctx)
	settle(c) // the acquire returned at a quorum: its last node's call may still be on its way
	before := commandCounts(servers)
	j1, err := rw.TryAcquireWrite(held, 10*time.Second)
	if err != nil {
		t.Fatal("TryAcquireWrite under the writer's context:", err)
	}
	j2, err := rw.AcquireWrite(held, 10*time.Second)
	if err != nil {
		t.Fatal("AcquireWrite under the writer's context:", err)
	}
	ran := false
	err = rw.DoWrite(held, 10*time.Second, func(ctx context.Context, l *Lock) error {
		ran = l.Token() == w.Token()
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("DoWrite under the writer's context: %v, ran with its token %v", err, ran)
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("joined writer acquires reached the nodes: %v -> %v", before, got)
	}
	for _, j := range []*Lock{j1, j2} {
		if j.Token() != w.Token() || j.Key() != w.Key() {
			t.Errorf("joined: token %d key %q, want the hold's %d %q", j.Token(), j.Key(), w.Token(), w.Key())
		}
		if err := j.Release(ctx); err != nil {
			t.Errorf("nested release: %v", err)
		}
	}
	if _, err := other.RWLock("ledger:join").TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("another Client's writer after the nested releases: %v, want ErrNotAcquired (the hold stays)", err)
	}
	if _, err := rw.TryAcquireRead(held, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a reader under the writer's context: %v, want ErrNotAcquired (never joined)", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := rw.TryAcquireWrite(held, 10*time.Second)
	if err != nil {
		t.Fatal("write acquire under a released hold's context:", err)
	}
	if w2.Token() <= w.Token() {
		t.Errorf("a new hold after the release: token %d after %d, want a new, larger one", w2.Token(), w.Token())
	}
	_ = w2.Release(ctx)
}

// TestReadPhaseMaxFloor: the read phase's bound is one retry delay, but never below the
// whole 2 ms that the nodes can count (a sub-millisecond retry delay would open no phase).
func TestReadPhaseMaxFloor(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{
		{time.Microsecond, 2 * time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{DefaultRetryDelay, DefaultRetryDelay},
	} {
		if got := readPhaseMax(tc.d); got != tc.want || got.Milliseconds() < 1 {
			t.Errorf("readPhaseMax(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}
