package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// TestReleaseWakesWaiters: an Acquire waiting on a key held by the same client retries as
// soon as that lock is released, not after its retry delay (a minute here, longer than the
// test's deadline), and leaves no waiter entry behind.
func TestReleaseWakesWaiters(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryDelay(time.Minute))
	ctx := ctxT(t, 20*time.Second)
	held, err := c.TryAcquire(ctx, testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, testKey, time.Minute)
		if err == nil && l.Token() <= held.Token() {
			t.Errorf("token %d after %d", l.Token(), held.Token())
		}
		got <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the acquire to wait on the key", func() bool {
		c.wait.mu.Lock()
		defer c.wait.mu.Unlock()
		return c.wait.m[testKey] != nil
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter did not get the lock after the release: %v", err)
	}
	c.wait.mu.Lock()
	defer c.wait.mu.Unlock()
	if len(c.wait.m) != 0 {
		t.Fatalf("waiter entries left: %v", c.wait.m)
	}
}

// TestWaiterLeavesOnCancel: a waiter whose context ends removes its entry.
func TestWaiterLeavesOnCancel(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryDelay(time.Minute))
	if _, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, testKey, time.Minute)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the acquire to wait on the key", func() bool {
		c.wait.mu.Lock()
		defer c.wait.mu.Unlock()
		return c.wait.m[testKey] != nil
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("acquired a held lock")
	}
	c.wait.mu.Lock()
	defer c.wait.mu.Unlock()
	if len(c.wait.m) != 0 {
		t.Fatalf("waiter entries left after cancel: %v", c.wait.m)
	}
}

// TestSeniorityDelay: a woken waiter that has lost no release to another process gives way
// by 8 steps of min(d/50, 1 ms), one step less per release lost, none from the 8th on.
func TestSeniorityDelay(t *testing.T) {
	d := 50 * time.Millisecond
	for losses, want := range map[int]time.Duration{0: 8 * time.Millisecond, 1: 7 * time.Millisecond, 5: 3 * time.Millisecond, 8: 0, 30: 0} {
		if got := seniorityDelay(d, losses); got != want {
			t.Errorf("seniorityDelay(%v, %d) = %v, want %v", d, losses, got, want)
		}
	}
	if got := seniorityDelay(time.Minute, 0); got != 8*time.Millisecond {
		t.Errorf("seniorityDelay(1m, 0) = %v, want 8ms (steps of at most 1 ms)", got)
	}
	if got := seniorityDelay(10*time.Millisecond, 2); got != 6*200*time.Microsecond {
		t.Errorf("seniorityDelay(10ms, 2) = %v, want 1.2ms", got)
	}
}

// TestCrowdedKey: a woken attempt that lost marks the key crowded; a win by a waiter that
// had lost before keeps the mark; a win by one that never lost clears it. Keys without a
// subscription are never crowded.
func TestCrowdedKey(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	c.wake.wokenAttempt("other", false, 0)
	if c.wake.crowded("other") {
		t.Fatal("a key nobody subscribed to is crowded")
	}
	c.wake.subscribe(testKey, false)
	defer c.wake.unsubscribe(testKey)
	steps := []struct {
		won    bool
		losses int
		want   bool
	}{{false, 0, true}, {true, 3, true}, {false, 1, true}, {true, 0, false}, {true, 2, false}}
	for i, s := range steps {
		c.wake.wokenAttempt(testKey, s.won, s.losses)
		if got := c.wake.crowded(testKey); got != s.want {
			t.Fatalf("step %d (won %v after %d losses): crowded %v, want %v", i, s.won, s.losses, got, s.want)
		}
	}
}
