package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// TryAcquire makes one attempt to acquire the lock named key for ttl: the acquire script on
// every node in parallel, returning as soon as a quorum agreed on a fencing token with
// validity time left, or a quorum became impossible (docs/design.md §3). No node's answer
// is awaited longer than the node timeout from its write ([WithNodeTimeout]). It neither
// queues behind this Client's waiting Acquire calls nor waits in the nodes' queues, so it
// takes a free key even when other processes' Acquire calls wait for it. Safe for
// concurrent use.
//
// ttl is truncated to whole milliseconds; it must leave validity after the drift allowance
// ([Drift]) and, with the lock-delay, be at most [MaxTTL]. [Lock.Until] is start + ttl −
// drift, start being read before the first command is sent.
//
// Errors: ErrInvalidArgument (nothing sent) for a nil ctx, a bad key (empty, longer than
// [MaxKeyLen], or starting with one of the library's prefixes: [FencePrefix],
// [SlotCounterPrefix], [HighestTokenPrefix], [QueuePrefix] or [WaitersPrefix], or one of
// those of the keys derived for semaphores, elections and read/write locks:
// [SemaphorePrefix], [ElectionPrefix], [LeaderPrefix], [RWPrefix], [ReadersPrefix],
// [IntentPrefix], [PhasePrefix]) or a bad ttl;
// a *QuorumError matching ErrNotAcquired when the lock is held elsewhere, too many nodes
// failed or the validity ran out; when ctx ends, an error matching ErrNotAcquired and
// ctx.Err(); ErrClosed after [Client.Close]. A failed attempt is undone on every node,
// whatever ctx.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	ttl, set, err := c.lockArgs(key, ttl)
	if err != nil {
		return nil, err
	}
	return c.tryAcquire(ctx, set, ttl)
}

// Acquire acquires the lock named key for ttl, retrying until it succeeds, the retry limit
// is reached ([WithRetryLimit]; none by default) or ctx ends. Arguments and errors are those
// of [Client.TryAcquire]; when ctx ends, the error matches ErrNotAcquired, ctx.Err() and,
// if an attempt was made, the last attempt's *QuorumError. After [Client.Close] it returns
// ErrClosed (which does not match ErrNotAcquired), at once also for calls that were waiting.
//
// Waiting is first come, first served across processes: this Client's Acquire calls for a
// key queue in arrival order and only the first makes attempts; it waits in the key's
// queue on the nodes, ordered by when its Acquire began, and is told when its turn comes.
// A waiter that hears nothing retries after the retry delay ([WithRetryDelay], jittered,
// longer for waiters far back and after overloaded attempts). The queue only ever refuses:
// mutual exclusion and tokens never depend on it. A retry limit counts this call's own
// attempts. The mechanism, and what a waiter that gives up or dies costs the others:
// docs/design.md §3.9 and §3.10. Without wake-ups ([WithoutWakeups]) there is no queue.
// Safe for concurrent use.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	ttl, set, err := c.lockArgs(key, ttl)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, set, ttl)
}

// tryAcquire is TryAcquire and TryAcquireMulti once the arguments are valid: one attempt,
// observed as one operation.
func (c *Client) tryAcquire(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, error) {
	return observed(c, ctx, Op{Kind: OpAcquire, Keys: set.keys, TTL: ttl}, func(ctx context.Context) (*Lock, End, error) {
		l, r, err := c.acquireOnce(ctx, set, ttl)
		return l, acquireEnd(l, r, 1, err), err
	})
}

// acquire is Acquire and AcquireMulti once the arguments are valid: the retry loop,
// observed as one operation.
func (c *Client) acquire(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, error) {
	return observed(c, ctx, Op{Kind: OpAcquire, Keys: set.keys, TTL: ttl}, func(ctx context.Context) (*Lock, End, error) {
		l, r, attempts, err := c.acquireRetrying(ctx, set, ttl)
		return l, acquireEnd(l, r, attempts, err), err
	})
}

// acquireOnce is one attempt of TryAcquire: reentrancy, the context and the Client are
// checked, then the attempt runs.
func (c *Client) acquireOnce(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, attemptResult, error) {
	if l, err := c.join(ctx, set); l != nil || err != nil {
		return l, joined(err), err
	}
	if err := ctx.Err(); err != nil {
		return nil, attemptResult{}, notAcquired(err)
	}
	if err := c.begin(); err != nil {
		return nil, attemptResult{}, err
	}
	defer c.end()
	return c.runAttempt(ctx, set, ttl, nil)
}

// acquireRetrying is the retry loop of Acquire. It checks reentrancy, the context and the
// Client once, then makes attempts until one wins, one fails for good, the retry limit is
// reached or ctx ends, waiting its turn between them. It returns the last attempt's result
// and the number of attempts made.
func (c *Client) acquireRetrying(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, attemptResult, int, error) {
	if l, err := c.join(ctx, set); l != nil || err != nil {
		return l, joined(err), 0, err
	}
	if err := ctx.Err(); err != nil {
		// Ended before anything was sent: no subscription either (its connection would
		// send commands for a call that can only fail).
		return nil, attemptResult{}, 0, notAcquired(err)
	}
	if err := c.begin(); err != nil {
		return nil, attemptResult{}, 0, err
	}
	defer c.end()
	t := c.newTurn(set)
	l, r, attempts, err := t.retry(ctx, ttl)
	if t.leave(l != nil) {
		l.mu.Lock()
		l.placed = true
		l.mu.Unlock()
	}
	return l, r, attempts, err
}

// attemptHeld makes one attempt of a semaphore or a read/write lock (attempt), with the
// context and the Client checked and the Client held.
func (c *Client) attemptHeld(ctx context.Context, ttl time.Duration, attempt func(context.Context, time.Duration) (*Lock, attemptResult, error)) (*Lock, attemptResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, attemptResult{}, notAcquired(err)
	}
	if err := c.begin(); err != nil {
		return nil, attemptResult{}, err
	}
	defer c.end()
	return attempt(ctx, ttl)
}

// retryTurn is acquireRetrying for a turn with an attempt of its own (a semaphore's, a
// read/write lock's): the retry loop with the context and the Client checked and the Client
// held, then leaving.
func (c *Client) retryTurn(ctx context.Context, ttl time.Duration, t *turn) (*Lock, attemptResult, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, attemptResult{}, 0, notAcquired(err)
	}
	if err := c.begin(); err != nil {
		return nil, attemptResult{}, 0, err
	}
	defer c.end()
	l, r, attempts, err := t.retry(ctx, ttl)
	t.leave(l != nil)
	return l, r, attempts, err
}

// retry makes the attempts of one Acquire.
func (t *turn) retry(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, int, error) {
	if err := t.enter(ctx); err != nil {
		return nil, attemptResult{}, 0, notAcquired(err)
	}
	var last attemptResult // the last attempt that reached the nodes, for the error when ctx ends
	var err error
	attempts := 0
	for {
		woken := t.woken() // this attempt answers a release announced by another process
		if woken && t.giveWay(ctx) != nil || ctx.Err() != nil {
			break
		}
		if t.c.isClosed() {
			return nil, attemptResult{kind: attemptFailed}, attempts, ErrClosed
		}
		mark := t.mark()
		if t.w != nil {
			t.w.mark, t.w.marked = mark, true // a heir, should we give up now (waitQueues.leave)
		}
		attempts++
		var l *Lock
		var r attemptResult
		l, r, err = t.try(ctx, ttl)
		t.tried(woken, r)
		switch {
		case r.kind == attemptWon:
			return l, r, attempts, nil
		case r.kind == attemptFailed:
			return nil, r, attempts, err
		}
		last = r
		if ctx.Err() != nil {
			break
		}
		if limit := t.c.cfg.retryLimit; limit > 0 && attempts >= limit {
			return nil, r, attempts, err
		}
		if t.wait(ctx, t.pause(r), mark) != nil {
			break
		}
	}
	return nil, last, attempts, ctxEnded(ctx.Err(), last.detail, err)
}

// joined is the result of a reentrant acquire (Client.join): won when it joined a hold of
// the context's, failed when it refused.
func joined(err error) attemptResult {
	if err != nil {
		return attemptResult{kind: attemptFailed}
	}
	return attemptResult{kind: attemptWon}
}

// notAcquired is the error of an acquire whose context ended before it sent anything.
func notAcquired(cerr error) error { return fmt.Errorf("%w: %w", ErrNotAcquired, cerr) }

// ctxEnded is the error of an Acquire whose context ended (cerr): the last attempt's
// detail, with the context's end at the top of it rather than only inside one node's entry.
func ctxEnded(cerr error, last *QuorumError, err error) error {
	switch {
	case last == nil && err == nil: // no attempt was made
		return notAcquired(cerr)
	case last != nil && last.Cause == nil:
		last.Cause = cerr
		return last
	case last != nil && errors.Is(last, cerr):
		return last
	case last != nil:
		return fmt.Errorf("%w: %w", last, cerr)
	case !errors.Is(err, cerr):
		return fmt.Errorf("%w: %w", err, cerr)
	}
	return err
}

// overloadDelay is the mean pause after the k-th consecutive attempt that failed without
// contention: d doubled k times, capped at max(32 d, 1 s).
func overloadDelay(d time.Duration, k int) time.Duration {
	limit := max(32*d, time.Second)
	for ; k > 0 && d < limit; k-- {
		d *= 2
	}
	return min(d, limit)
}

// seniorityRanks and seniorityStep shape seniorityDelay.
const (
	seniorityRanks = 8                // a waiter that lost this many releases waits no step
	seniorityStep  = time.Millisecond // the longest step; shorter for a retry delay below 50 ms
)

// seniorityDelay is how long a waiter woken by a release waits before its attempt when the
// key is crowded (several waiters answer each release): one step, min(d/50, 1 ms), for each
// of the first seniorityRanks releases it has not lost yet, so at most 8 ms for a newcomer
// and none for a waiter that lost 8 of them. Pub/sub wakes the waiters of every process at
// once and the first to reach a quorum wins, a lottery; this lets those that have waited
// longest reach the nodes first.
func seniorityDelay(d time.Duration, losses int) time.Duration {
	return time.Duration(max(0, seniorityRanks-losses)) * min(d/50, seniorityStep)
}

// giveWay waits d, or less when ctx ends or the client closes; it returns ctx.Err() when
// ctx ended.
func (c *Client) giveWay(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.wait.closing():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// jitter draws a pause uniformly from [d/2, 3d/2).
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}
