package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock/internal/testutil"
)

// TestReentrantDo: inside a Do on K, an Acquire and a Do on K with the function's context
// join the hold: same token and holder id, no command sent to any node; the inner release
// leaves the outer hold in place, and the outer hold is still renewed afterwards.
func TestReentrantDo(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRenewFraction(0.2))
	ctx := ctxT(t, 10*time.Second)
	err := c.Do(ctx, "re:k", 500*time.Millisecond, func(ctx context.Context, outer *Lock) error {
		heldEverywhere(t, servers, "re:k", outer.ID())
		before := commandCounts(servers)
		inner, err := c.Acquire(ctx, "re:k", time.Second)
		if err != nil {
			return err
		}
		if inner.Token() != outer.Token() || inner.ID() != outer.ID() || inner.Until() != outer.Until() {
			return fmt.Errorf("joined hold differs: token %d/%d id %s/%s", inner.Token(), outer.Token(), inner.ID(), outer.ID())
		}
		err = c.Do(ctx, "re:k", time.Second, func(ctx context.Context, l *Lock) error {
			if l.Token() != outer.Token() {
				return fmt.Errorf("nested Do token %d, outer %d", l.Token(), outer.Token())
			}
			// Deeper still: TryAcquire with the nested Do's context joins too.
			l2, err := c.TryAcquire(ctx, "re:k", time.Second)
			if err != nil {
				return err
			}
			return l2.Release(ctx)
		})
		if err != nil {
			return err
		}
		if err := inner.Release(ctx); err != nil {
			return err
		}
		if err := inner.Release(ctx); !errors.Is(err, ErrReleased) {
			return fmt.Errorf("second inner release: %v", err)
		}
		if got := commandCounts(servers); fmt.Sprint(got) != fmt.Sprint(before) {
			return fmt.Errorf("joined holds sent commands: %v → %v", before, got)
		}
		// The nodes beyond the quorum may still be answering the acquire: count holders.
		held := 0
		for _, s := range servers {
			if v, _ := s.Get("re:k"); v == outer.ID() {
				held++
			}
		}
		if held < c.Quorum() {
			return fmt.Errorf("after the inner release only %d nodes hold the key", held)
		}
		// The outer hold is still renewed: wait for Until to move (a renewal every 100 ms).
		u := outer.Until()
		for outer.Until() == u {
			select {
			case <-ctx.Done():
				return fmt.Errorf("no renewal after the inner release: %w", context.Cause(ctx))
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReentrantUnrelatedContextWaits: the same key from a context that does not carry the
// hold is refused as for any other caller.
func TestReentrantUnrelatedContextWaits(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryLimit(2), WithRetryDelay(time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	outer, err := c.TryAcquire(ctx, "re:w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "re:w", time.Minute); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("unrelated context: %v", err)
	}
	marked := outer.Context(ctx)
	j, err := c.Acquire(marked, "re:w", time.Minute)
	if err != nil || j.Token() != outer.Token() {
		t.Fatalf("marked context: %v, token %d", err, j.Token())
	}
	// Another Client on the same nodes does not join: it is another process's view.
	other := newTestClient(t, clients, WithRetryLimit(1))
	if _, err := other.TryAcquire(marked, "re:w", time.Minute); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("other client with the marked context: %v", err)
	}
	if err := j.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// After the outer release, the marked context acquires anew: a new token.
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.TryAcquire(marked, "re:w", time.Minute)
	if err != nil || again.outer != nil || again.Token() <= outer.Token() {
		t.Fatalf("after the outer release: %v, joined %v, token %d", err, again != nil && again.outer != nil, again.Token())
	}
}

// TestReentrantOutlived: a nested hold that is still open when its outer hold is released
// fails its release and extend with ErrOutlived (which matches ErrNotHeld), rather than
// unlocking silently; a nested Do whose outer hold was released reports it too.
func TestReentrantOutlived(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	outer, err := c.TryAcquire(ctx, "re:o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.TryAcquire(outer.Context(ctx), "re:o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inner.Extend(ctx, time.Minute); !errors.Is(err, ErrOutlived) || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend of an outlived nested hold: %v", err)
	}
	if err := inner.Release(ctx); !errors.Is(err, ErrOutlived) || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release of an outlived nested hold: %v", err)
	}

	outer2, err := c.TryAcquire(ctx, "re:o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(outer2.Context(ctx), "re:o", time.Minute, func(ctx context.Context, l *Lock) error {
		return outer2.Release(ctx)
	})
	if !errors.Is(err, ErrOutlived) {
		t.Fatalf("nested Do that outlived its outer hold: %v", err)
	}
}

// TestReentrantMulti: a DoMulti's context lets an acquire of one of its keys join (with
// that key's token); an acquire of a set that the context holds only in part is refused
// with ErrInvalidArgument instead of waiting for itself.
func TestReentrantMulti(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	err := c.DoMulti(ctx, []string{"re:a", "re:b"}, time.Minute, func(ctx context.Context, m *MultiLock) error {
		heldEverywhere(t, servers, "re:a", m.ID())
		before := commandCounts(servers)
		b, err := c.Acquire(ctx, "re:b", time.Minute)
		if err != nil || b.Token() != m.Token("re:b") {
			return fmt.Errorf("join one key: %v, token %d want %d", err, b.Token(), m.Token("re:b"))
		}
		sub, err := c.AcquireMulti(ctx, []string{"re:b", "re:a"}, time.Minute)
		if err != nil || sub.Token("re:a") != m.Token("re:a") {
			return fmt.Errorf("join the set in another order: %v", err)
		}
		if got := commandCounts(servers); fmt.Sprint(got) != fmt.Sprint(before) {
			return fmt.Errorf("joins sent commands: %v → %v", before, got)
		}
		if _, err := c.AcquireMulti(ctx, []string{"re:a", "re:c"}, time.Minute); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("partly held set: %v", err)
		}
		return errors.Join(sub.Release(ctx), b.Release(ctx))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// heldEverywhere waits until every node holds key for id and has run the whole acquire
// script: miniredis counts each command a script runs, and the key is set before the script's
// last commands (the fence counter's), so a count taken as soon as the key shows can still
// grow (a run under -race saw [20 20 19] → [20 20 20]). Every node gets the same commands
// here, so the script is done everywhere when the nodes have counted the same.
func heldEverywhere(t *testing.T, servers []*miniredis.Miniredis, key, id string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "every node to hold "+key+" and finish the script", func() bool {
		for _, s := range servers {
			if v, _ := s.Get(key); v != id {
				return false
			}
		}
		n := commandCounts(servers)
		return slices.Min(n) == slices.Max(n)
	})
}
