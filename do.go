package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do acquires the lock named key for ttl as [Client.Acquire] does, runs fn while holding it,
// and releases it when fn returns, whatever the path: an error, a panic (the lock is
// released, then the panic continues) or the end of ctx.
//
// While fn runs, a renewer owned by Do extends the lock every renew fraction × ttl
// ([WithRenewFraction], a third by default). A renewal that fails on a minority of nodes
// still succeeds; one that fails outright is retried while validity time is left. If no
// renewal is confirmed by Until − cancel margin × ttl ([WithCancelMargin], a tenth by
// default), or a quorum of nodes reports that the key is gone or someone else's, fn's context
// is cancelled with a cause that wraps [ErrLockLost] (see context.Cause). The cancellation
// always comes before the last confirmed validity deadline, never after it.
//
// The contract for fn: after its context is cancelled, fn must stop doing anything that
// needs the lock, and return. Even before that, fn must send [Lock.Token] with every write
// to a store that rejects stale tokens: a process pause or a delayed packet can carry a write
// past the deadline, and only the token check stops it (docs/design.md).
//
// Do returns fn's error when the lock was held throughout. When the lock was lost, it
// returns an error matching ErrLockLost, joined with fn's error if fn returned one. Errors
// from Acquire are returned as they are (ErrNotAcquired, ctx.Err(), ErrInvalidArgument),
// and fn is not called. A failed final Release is logged, not returned: the work was done
// under the lock, and the keys expire with their TTL. The renewer has stopped when Do
// returns. Do is safe for concurrent use.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error) (err error) {
	if fn == nil {
		return invalidf("fn is nil")
	}
	// Hold the client for the whole run, so that Close waits for the renewer too.
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	l, err := c.Acquire(ctx, key, ttl)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	lost := make(chan error, 1)
	c.spawn(func() { lost <- c.renew(ctx, l, cancel, stop) })

	defer func() {
		p := recover()
		close(stop)
		lostErr := <-lost
		cancel(context.Canceled)
		// Release even a lost lock: compare-and-delete removes whatever keys are still ours.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.nodeTimeout+time.Second)
		if rerr := l.Release(rctx); rerr != nil && lostErr == nil {
			c.cfg.logger.Warn("redlock: release after Do failed; the keys expire with their TTL",
				"key", key, "err", rerr)
		}
		rcancel()
		if p != nil {
			panic(p)
		}
		if lostErr != nil {
			err = errors.Join(lostErr, err)
		}
	}()
	return fn(fnCtx, l)
}

// renew keeps l alive until stop is closed. It returns nil when stopped with the lock held,
// or the error that cancelled fn's context (wrapping ErrLockLost) when the lock was lost.
func (c *Client) renew(ctx context.Context, l *Lock, cancel context.CancelCauseFunc, stop <-chan struct{}) error {
	ttl := l.ttl
	interval := time.Duration(float64(ttl) * c.cfg.renewFraction)
	margin := time.Duration(float64(ttl) * c.cfg.cancelMargin)
	retry := min(c.cfg.retryDelay, interval/4)
	renewCtx := context.WithoutCancel(ctx) // fn may still be finishing its writes
	next := c.cfg.clock.Now().Add(interval)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		cancelAt := l.Until().Add(-margin)
		now := c.cfg.clock.Now()
		wake := next
		if cancelAt.Before(wake) {
			wake = cancelAt
		}
		timer.Reset(wake.Sub(now))
		select {
		case <-stop:
			return nil
		case <-timer.C:
		}
		now = c.cfg.clock.Now()
		if !now.Before(cancelAt) {
			return c.lose(l, cancel, fmt.Errorf("%w: %q: no renewal confirmed %v before the validity deadline: %w",
				ErrLockLost, l.key, margin, lastOrLate(last)))
		}
		ectx, ecancel := context.WithDeadline(renewCtx, cancelAt)
		last = l.Extend(ectx, ttl)
		ecancel()
		switch {
		case last == nil:
			next = c.cfg.clock.Now().Add(interval)
		case c.definitelyLost(last):
			return c.lose(l, cancel, fmt.Errorf("%w: %q: %w", ErrLockLost, l.key, last))
		default:
			c.cfg.logger.Debug("redlock: renewal failed, retrying", "key", l.key, "err", last)
			next = c.cfg.clock.Now().Add(retry)
		}
	}
}

func (c *Client) lose(l *Lock, cancel context.CancelCauseFunc, err error) error {
	c.cfg.logger.Warn("redlock: lock lost while running", "key", l.key, "err", err)
	cancel(err)
	return err
}

// definitelyLost reports whether a failed extend proves the lock is gone: more than N − Q
// nodes answered that our key is not there, so no quorum can hold it any more.
func (c *Client) definitelyLost(err error) bool {
	var qe *QuorumError
	if !errors.As(err, &qe) || qe.Nodes == nil {
		return false
	}
	refused := 0
	for _, e := range qe.Nodes.Errors {
		if errors.Is(e, errNotOurs) {
			refused++
		}
	}
	return refused > len(c.nodes)-c.quorum
}

// errRenewerLate is the cause when the renewer woke past the cancel point without having
// tried a renewal since the last success: the process or the renewer itself was paused or
// starved of CPU.
var errRenewerLate = errors.New("the renewer ran too late to try a renewal (process paused or starved)")

func lastOrLate(err error) error {
	if err == nil {
		return errRenewerLate
	}
	return err
}
