package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

func TestDoRejectsBadInput(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	before := commandCounts(servers)
	called := false
	fn := func(context.Context, *Lock) error { called = true; return nil }
	if err := c.Do(ctxT(t, time.Second), testKey, time.Second, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil fn: %v", err)
	}
	if err := c.Do(ctxT(t, time.Second), "", time.Second, fn); !errors.Is(err, ErrInvalidArgument) || called {
		t.Fatalf("empty key: %v (fn called: %v)", err, called)
	}
	if _, err := New(clients, WithRenewFraction(0.5), WithCancelMargin(0.5)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("renew fraction + margin ≥ 1: %v", err)
	}
	for _, o := range []Option{WithRenewFraction(0), WithRenewFraction(1), WithCancelMargin(0), WithCancelMargin(1.5)} {
		if _, err := New(clients, o); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("option out of range accepted: %v", err)
		}
	}
	if fmtCounts := commandCounts(servers); fmtCounts[0] != before[0] {
		t.Fatal("bad input sent commands")
	}
}

func TestDoReturnsFnErrorAndReleases(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	boom := errors.New("boom")
	var token Token
	err := c.Do(ctxT(t, 5*time.Second), testKey, time.Minute, func(ctx context.Context, l *Lock) error {
		token = l.Token()
		held := 0
		for _, s := range servers {
			if s.Exists(testKey) {
				held++
			}
		}
		if held < c.Quorum() {
			t.Errorf("key held on %d nodes while fn runs, quorum %d", held, c.Quorum())
		}
		return boom
	})
	if !errors.Is(err, boom) || errors.Is(err, ErrLockLost) {
		t.Fatalf("Do = %v, want fn's error alone", err)
	}
	settle(c)
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d: key left after Do", i)
		}
	}
	if token == 0 {
		t.Fatal("fn got no token")
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the panic to continue", p)
			}
		}()
		_ = c.Do(ctxT(t, 5*time.Second), testKey, time.Minute, func(context.Context, *Lock) error {
			panic("boom")
		})
	}()
	settle(c)
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d: key left after a panic in fn", i)
		}
	}
}

// TestRealDoRenews runs fn for many TTLs on real nodes, where keys expire in real
// time. Another client must fail to acquire the key the whole time; right after Do returns
// it succeeds.
func TestRealDoRenews(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	// Generous margins: renew every fifth of the TTL and give up only 30% before Until, so
	// a loaded machine does not starve the renewer into a (correct) loss.
	c := newTestClient(t, clients, WithNodeTimeout(time.Second), WithRenewFraction(0.2), WithCancelMargin(0.3))
	other := newTestClient(t, clients, WithNodeTimeout(time.Second))
	const ttl = 400 * time.Millisecond
	ctx := ctxT(t, time.Minute)
	var tries int
	lag := schedLag(t)
	err := c.Do(ctx, "do:renew", ttl, func(ctx context.Context, l *Lock) error {
		end := time.Now().Add(8 * ttl)
		for time.Now().Before(end) {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if _, err := other.TryAcquire(ctx, "do:renew", time.Second); !errors.Is(err, ErrNotAcquired) {
				t.Errorf("another client acquired a renewed lock: %v", err)
				return nil
			}
			tries++
			time.Sleep(ttl / 10) // the workload: checking while holding
		}
		if time.Now().After(l.Until()) {
			t.Error("Until not moved forward by the renewals")
		}
		return nil
	})
	if late := lag(); err != nil {
		if errors.Is(err, ErrLockLost) && late > ttl/5 {
			t.Skipf("the lock was lost (%v), but this process's timers ran up to %v late, longer than a renewal interval: the machine is starved", err, late)
		}
		t.Fatalf("%v (timers at most %v late)", err, late)
	}
	if tries < 10 {
		t.Fatalf("only %d checks", tries)
	}
	l, err := other.TryAcquire(ctx, "do:renew", time.Second)
	if err != nil {
		t.Fatalf("after Do returned: %v", err)
	}
	_ = l.Release(ctx)
}

// TestRealDoCancelsBeforeExpiry stops three of five real nodes (SIGSTOP) while fn runs. fn's
// context must be cancelled with a cause wrapping ErrLockLost before the last confirmed
// validity deadline, and Do must return ErrLockLost joined with fn's error.
func TestRealDoCancelsBeforeExpiry(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients, WithNodeTimeout(50*time.Millisecond))
	const ttl = 600 * time.Millisecond
	fnErr := errors.New("stopped early")
	var cancelledAt, until time.Time
	var cause error
	lag := schedLag(t)
	err := c.Do(ctxT(t, time.Minute), "do:lost", ttl, func(ctx context.Context, l *Lock) error {
		for _, n := range cluster.Nodes()[:3] {
			if err := n.Pause(); err != nil {
				t.Error(err)
			}
		}
		<-ctx.Done()
		cancelledAt = time.Now()
		until = l.Until()
		cause = context.Cause(ctx)
		return fnErr
	})
	if !errors.Is(err, ErrLockLost) || !errors.Is(err, fnErr) {
		t.Fatalf("Do = %v, want ErrLockLost joined with fn's error", err)
	}
	if !errors.Is(cause, ErrLockLost) {
		t.Fatalf("cancellation cause %v, want ErrLockLost", cause)
	}
	var lle *LockLostError
	if !errors.As(cause, &lle) || lle.Refused || lle.Late == LateNone || lle.Margin != time.Duration(float64(ttl)*DefaultCancelMargin) {
		t.Fatalf("cancellation cause %#v, want a late *LockLostError with the cancel margin", lle)
	}
	margin := time.Duration(float64(ttl) * DefaultCancelMargin)
	if late := lag(); !cancelledAt.Before(until) {
		if late > margin/2 {
			// The cancellation is scheduled for Until − margin; a process whose timers run
			// this late cannot see it in time, which is why writes carry fencing tokens.
			t.Skipf("fn was told %v after the validity deadline, but this process's timers ran up to %v late (margin %v): the machine is starved", cancelledAt.Sub(until), late, margin)
		}
		t.Fatalf("fn was told %v after the validity deadline, with timers at most %v late", cancelledAt.Sub(until), late)
	}
	t.Logf("fn told %v before the validity deadline (margin %v)", until.Sub(cancelledAt), time.Duration(float64(ttl)*DefaultCancelMargin))
	for _, n := range cluster.Nodes()[:3] {
		if err := n.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
}

// TestRealDoToleratesMinorityFlaps pauses and resumes a minority (nodes 3 and 4, alone or
// together) of five real nodes while fn runs for many TTLs, sometimes longer than the TTL so
// that their keys expire: the lock stays held on the majority and fn is never cancelled.
// (A key that expired on a node stays gone: extend never re-creates it. So a minority that
// moves around the nodes would eventually take the lock down, as the algorithm demands.)
func TestRealDoToleratesMinorityFlaps(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	// A node timeout and a TTL with room for a busy machine (the healthy three must answer
	// every renewal within the node timeout); the flaps scale with the TTL.
	c := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(150*time.Millisecond))
	const ttl = 900 * time.Millisecond
	var flaps atomic.Int32
	err := c.Do(ctxT(t, time.Minute), "do:flaps", ttl, func(ctx context.Context, l *Lock) error {
		for round := range 8 {
			victims := [][]*redisproc.Node{cluster.Nodes()[3:5], cluster.Nodes()[3:4], cluster.Nodes()[4:5]}[round%3]
			for _, n := range victims {
				if err := n.Pause(); err != nil {
					return err
				}
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(ttl / 2 * time.Duration(1+round%3)): // down across one or more renewals
			}
			for _, n := range victims {
				if err := n.Resume(); err != nil {
					return err
				}
			}
			flaps.Add(1)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Do with minority flaps: %v", err)
	}
	if flaps.Load() != 8 {
		t.Fatalf("%d flaps", flaps.Load())
	}
	c.Close()
}

// TestCloseAfterLongDo: when the last Do of a client ends, its renewer stops at once, so
// Close does not wait for the next renewal of a long TTL (here 20 minutes away).
func TestCloseAfterLongDo(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c, err := New(clients)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctxT(t, 10*time.Second), testKey, time.Hour, func(context.Context, *Lock) error { return nil }); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting 10s after the last Do returned")
	}
}

// TestDoLockLostError: the cause of a lost Do is a *LockLostError that says how it was lost:
// refused (the keys were gone from every node) with the renewal's *QuorumError inside, or
// late (no renewal confirmed in time, with the cancel margin), and it matches ErrLockLost.
func TestDoLockLostError(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRenewFraction(0.1))
	ctx := ctxT(t, 10*time.Second)
	err := c.Do(ctx, "lost:refused", time.Second, func(ctx context.Context, l *Lock) error {
		for _, s := range servers {
			s.Del("lost:refused")
		}
		<-ctx.Done()
		return nil
	})
	var lle *LockLostError
	var qe *QuorumError
	if !errors.Is(err, ErrLockLost) || !errors.As(err, &lle) || !lle.Refused || lle.Late != LateNone ||
		!errors.As(err, &qe) || qe.Op != "extend" || lle.Keys[0] != "lost:refused" {
		t.Fatalf("refused: %v (%+v)", err, lle)
	}
	if !strings.HasPrefix(err.Error(), `redlock: lock lost: "lost:refused": `) {
		t.Fatalf("message: %v", err)
	}
	// The late case: TestRealDoCancelsBeforeExpiry.
}

// TestDoRefusesTTLItCannotRenew: a TTL below MinDoTTL (100 ms with the default tenth of a
// cancel margin, so that fn is told at least 10 ms before the deadline) is refused before
// anything is sent, and fn is not run; a larger cancel margin lowers the minimum.
func TestDoRefusesTTLItCannotRenew(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	if got := c.MinDoTTL(); got != 100*time.Millisecond {
		t.Fatalf("MinDoTTL %v with the defaults, want 100ms", got)
	}
	before := commandCounts(servers)
	called := false
	fn := func(context.Context, *Lock) error { called = true; return nil }
	for _, ttl := range []time.Duration{5 * time.Millisecond, 99 * time.Millisecond} {
		if err := c.Do(ctxT(t, time.Second), testKey, ttl, fn); !errors.Is(err, ErrInvalidArgument) || called {
			t.Fatalf("Do with ttl %v: %v (fn called: %v), want ErrInvalidArgument and fn not run", ttl, err, called)
		}
		if err := c.DoMulti(ctxT(t, time.Second), []string{"a", "b"}, ttl, func(context.Context, *MultiLock) error { called = true; return nil }); !errors.Is(err, ErrInvalidArgument) || called {
			t.Fatalf("DoMulti with ttl %v: %v (fn called: %v), want ErrInvalidArgument", ttl, err, called)
		}
	}
	if after := commandCounts(servers); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused Do calls sent commands: %v → %v", before, after)
	}
	if err := c.Do(ctxT(t, 5*time.Second), testKey, 100*time.Millisecond, fn); err != nil || !called {
		t.Fatalf("Do with ttl = MinDoTTL: %v (fn called: %v)", err, called)
	}
	wide := newTestClient(t, clients, WithCancelMargin(0.5))
	if got := wide.MinDoTTL(); got != 20*time.Millisecond {
		t.Fatalf("MinDoTTL %v with a cancel margin of a half, want 20ms", got)
	}
}

// lateClock reads start for its first reads readings and start + then after that: an
// acquire whose replies come in after its validity was nearly used up.
type lateClock struct {
	start time.Time
	then  time.Duration
	reads int32
	n     atomic.Int32
}

func (c *lateClock) Now() time.Time {
	if c.n.Add(1) <= c.reads {
		return c.start
	}
	return c.start.Add(c.then)
}

// TestDoSkipsFnWhenAcquireLeftNoTime: when the acquire returns with less validity left than
// the cancel margin (slow nodes ate it), Do does not run fn: it would be told to stop at once.
// It returns a *LockLostError with Late LateAcquire, and releases the lock.
func TestDoSkipsFnWhenAcquireLeftNoTime(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	const ttl = time.Second // margin 100 ms, drift 12 ms
	// Two readings at the start (the waiter's ticket and the attempt's start), then 900 ms
	// later: 88 ms of validity left, less than the margin.
	clk := &lateClock{start: time.Now(), then: 900 * time.Millisecond, reads: 2}
	c := newTestClient(t, clients, WithClock(clk))
	called := false
	err := c.Do(ctxT(t, 5*time.Second), testKey, ttl, func(context.Context, *Lock) error { called = true; return nil })
	var lle *LockLostError
	if called || !errors.Is(err, ErrLockLost) || !errors.As(err, &lle) || lle.Late != LateAcquire {
		t.Fatalf("Do after an acquire that left 88 ms: %v (fn called: %v), want a LateAcquire *LockLostError", err, called)
	}
	settle(c)
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d kept the key of a Do that did not run fn", i)
		}
	}
}
