package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Do acquires the lock named key for ttl as [Client.Acquire] does, runs fn while holding it,
// and releases it when fn returns, whatever the path: an error, a panic (the lock is
// released, then the panic continues) or the end of ctx.
//
// While fn runs, the client's renewer (one goroutine for all of its Do calls) extends the lock every renew fraction × ttl
// ([WithRenewFraction], a third by default). A renewal that fails on a minority of nodes
// still succeeds; one that fails outright is retried while validity time is left. If no
// renewal is confirmed by Until − cancel margin × ttl ([WithCancelMargin], a tenth by
// default), or a quorum of nodes reports that the key is gone or someone else's, fn's context
// is cancelled with a [*LockLostError] as its cause (see context.Cause), which matches
// [ErrLockLost] and says whether the keys were gone or no renewal came in time. The cancellation is
// scheduled for before the last confirmed validity deadline; a process that is paused or
// starved of CPU can see it late, which is why writes must carry the fencing token. One
// goroutine of the Client renews every Do's lock; a failed renewal is retried after
// min(retry delay, a quarter of the renewal interval).
//
// The contract for fn: after its context is cancelled, fn must stop doing anything that
// needs the lock, and return. Even before that, fn must send [Lock.Token] with every write
// to a store that rejects stale tokens: a process pause or a delayed packet can carry a write
// past the deadline, and only the token check stops it (docs/design.md).
//
// ttl must be at least [Client.MinDoTTL] (100 ms with the default options): with a shorter
// one fn would be told to stop too close to the validity deadline to stop before it. When the acquire returns with less
// validity left than the cancel margin (slow nodes ate it), fn is not called and Do returns
// a *LockLostError with Late [LateAcquire].
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
	if ctx == nil {
		return invalidf("context is nil")
	}
	ttl, set, err := c.lockArgs(key, ttl)
	if err != nil {
		return err
	}
	if err := c.checkDoTTL(ttl); err != nil {
		return err
	}
	return c.do(ctx, set, ttl, fn)
}

// MinDoTTL returns the shortest TTL that [Client.Do] and [Client.DoMulti] accept with this
// Client's options: the one whose cancel margin (cancel margin × ttl, [WithCancelMargin])
// is minCancelNotice, 100 ms with the default tenth. Below it fn would be told to stop so
// close to the validity deadline that a timer or a goroutine running late by a few
// milliseconds, as they do on a loaded machine, lets fn run past it; with a TTL of 5 ms the
// renewals could not even be tried in time.
func (c *Client) MinDoTTL() time.Duration {
	need := float64(minCancelNotice) / c.cfg.cancelMargin
	return time.Duration(math.Ceil(need/float64(time.Millisecond))) * time.Millisecond
}

// minCancelNotice is the least time between Do's cancellation of fn and the validity
// deadline: more than the lateness of Go's timers and of a goroutine's wake-up under load
// (a few milliseconds; docs/performance.md, "Renewals under CPU starvation").
const minCancelNotice = 10 * time.Millisecond

// checkDoTTL refuses a ttl below MinDoTTL.
func (c *Client) checkDoTTL(ttl time.Duration) error {
	if m := c.MinDoTTL(); ttl < m {
		return invalidf("ttl %v is too short for Do: fn must be told to stop at least %v before the validity deadline, which needs a ttl of at least %v with a cancel margin of %v (MinDoTTL)",
			ttl, minCancelNotice, m, c.cfg.cancelMargin)
	}
	return nil
}

// do is Do and DoMulti once the arguments are valid.
func (c *Client) do(ctx context.Context, set lockKeys, ttl time.Duration, fn func(ctx context.Context, l *Lock) error) error {
	return c.doWith(ctx, Op{Kind: OpDo, Keys: set.keys, TTL: ttl}, func(ctx context.Context) (*Lock, error) {
		return c.acquire(ctx, set, ttl)
	}, fn)
}

// doWith is a Do observed as op, whose lock comes from acquire (a lock's, a semaphore's
// permit, a read/write lock's side): acquire, run fn under it while the renewer keeps it,
// release. The arguments are valid.
func (c *Client) doWith(ctx context.Context, op Op, acquire func(context.Context) (*Lock, error), fn func(ctx context.Context, l *Lock) error) error {
	// Hold the client for the whole run, so that Close waits for the renewer too.
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	_, err := observed(c, ctx, op, func(ctx context.Context) (struct{}, End, error) {
		l, err := acquire(ctx)
		if err != nil {
			return struct{}{}, End{}, err
		}
		return struct{}{}, End{}, c.run(ctx, l, fn)
	})
	return err
}

// run runs fn under the newly acquired l while the renewer keeps it, and releases it (the
// part of a Do after its acquire: Client.Do, Semaphore.Do).
func (c *Client) run(ctx context.Context, l *Lock, fn func(ctx context.Context, l *Lock) error) (err error) {
	if l.outer != nil {
		return doJoined(ctx, l, fn)
	}
	margin := time.Duration(float64(l.ttl) * c.cfg.cancelMargin)
	if left := l.Until().Sub(c.cfg.clock.Now()); left < margin {
		// fn would be told to stop at once: do not start it.
		lost := &LockLostError{Keys: l.set.keys, Margin: margin, Late: LateAcquire,
			Cause: fmt.Errorf("%w: %v of validity left, less than the cancel margin", errAcquireLate, left.Round(time.Microsecond))}
		c.releaseAfterDo(ctx, l, lost)
		return lost
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	h := c.renewer.add(ctx, l, cancel)

	defer func() {
		p := recover()
		lostErr := c.renewer.remove(h)
		cancel(context.Canceled)
		c.releaseAfterDo(ctx, l, lostErr)
		if p != nil {
			panic(p)
		}
		if lostErr != nil {
			err = errors.Join(lostErr, err)
		}
	}()
	return fn(l.Context(fnCtx), l)
}

// releaseAfterDo releases a Do's lock, even a lost one (compare-and-delete removes whatever
// keys are still ours); a failure is logged unless the lock was known to be lost.
func (c *Client) releaseAfterDo(ctx context.Context, l *Lock, lostErr error) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.nodeTimeout+time.Second)
	defer rcancel()
	if rerr := l.Release(rctx); rerr != nil && lostErr == nil && !errors.Is(rerr, ErrReleased) {
		c.cfg.logger.Warn("redlock: release after Do failed; the keys expire with their TTL",
			"key", l.set.logKey(), "err", rerr)
	}
}

func (c *Client) lose(ctx context.Context, l *Lock, cancel context.CancelCauseFunc, err error) error {
	c.cfg.logger.Warn("redlock: lock lost while running", "key", l.set.logKey(), "err", err)
	if o := c.cfg.observer; o != nil {
		o.Event(ctx, Event{Kind: EventLockLost, Keys: l.set.keys, Token: l.token, Err: err})
	}
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
