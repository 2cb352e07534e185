package redlock

// A Lock's Extend and Release: after expiry, extending, and a failed shorter extend.

import (
	"errors"
	"testing"
	"time"
)

func TestReleaseAndExtendAfterExpiry(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	a, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for _, s := range servers {
		s.FastForward(2 * time.Second)
	}
	if err := a.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend after expiry: %v, want ErrNotHeld", err)
	}
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d: extend re-created an expired key", i)
		}
	}
	b, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after expiry not above %d", b.Token(), a.Token())
	}
	err = a.Release(ctx)
	var qe *QuorumError
	if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || qe.Op != "release" || qe.Agreed != 0 {
		t.Fatalf("release after expiry: %v, want a release *QuorumError matching ErrNotHeld", err)
	}
	if err := a.Extend(ctx, 10*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend over another holder: %v", err)
	}
	settle(c)
	for i, s := range servers {
		if got, _ := s.Get(testKey); got != b.id {
			t.Fatalf("node %d: the stale holder touched the new holder's key (%q)", i, got)
		}
		if ttl := s.TTL(testKey); ttl != 10*time.Second {
			t.Fatalf("node %d: the stale holder changed the new holder's TTL to %v", i, ttl)
		}
	}
}

func TestExtend(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok, until := l.Token(), l.Until()
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l.Token() != tok || !l.Until().After(until.Add(50*time.Second)) {
		t.Fatalf("after extend: token %d (was %d), until +%v", l.Token(), tok, l.Until().Sub(until))
	}
	settle(c)
	for i, s := range servers {
		if ttl := s.TTL(testKey); ttl != time.Minute {
			t.Fatalf("node %d TTL %v after extend, want 1m", i, ttl)
		}
	}
	// Take our key away on three nodes: the extend must fail and Until must stay.
	c = newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	l.c = c
	for _, s := range servers[:3] {
		s.Set(testKey, "someone-else")
	}
	until = l.Until()
	err = l.Extend(ctx, 2*time.Minute)
	var qe *QuorumError
	if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || qe.Agreed > 2 {
		t.Fatalf("extend with 3 foreign keys: %v", err)
	}
	if !l.Until().Equal(until) {
		t.Fatal("Until moved after a failed extend")
	}
}

// TestFailedShorterExtendMovesUntilEarlier: an extend to a shorter TTL that only a minority
// confirms still shortens the keys on that minority, so another holder can reach a quorum
// sooner than the old deadline. Until must move down to the shorter deadline (found by the
// chaos lab's simulator, TestSimFailedShorterExtend).
func TestFailedShorterExtendMovesUntilEarlier(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for _, s := range servers[:3] {
		s.SetError("ERR unavailable")
	}
	before := time.Now()
	if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend with 3 of 5 nodes failing: %v", err)
	}
	if limit := before.Add(time.Second + 100*time.Millisecond); l.Until().After(limit) {
		t.Fatalf("Until still %v ahead after a failed extend to 1s", time.Until(l.Until()))
	}
	// A failed extend to a longer TTL leaves Until where it was.
	until := l.Until()
	if err := l.Extend(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	if !l.Until().Equal(until) {
		t.Fatal("a failed longer extend moved Until")
	}
	for _, s := range servers[:3] {
		s.SetError("")
	}
}
