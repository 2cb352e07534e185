package redlock

import (
	"context"
	"testing"
	"time"
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
	waitFor(t, func() bool {
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
	waitFor(t, func() bool {
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
