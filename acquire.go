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
// validity time left, or a quorum became impossible. No node's answer is awaited longer
// than the node timeout from its write ([WithNodeTimeout]). It does not queue behind this
// client's waiting Acquire calls. Safe for concurrent use. The protocol: docs/design.md §3.
//
// ttl is truncated to whole milliseconds; it must leave validity after the drift allowance
// ([Drift]) and, with the lock-delay, be at most [MaxTTL]. [Lock.Until] is start + ttl −
// drift, start being read before the first command is sent.
//
// Errors: ErrInvalidArgument (nothing sent) for a nil ctx, a bad key (empty, longer than
// [MaxKeyLen], or starting with one of the library's prefixes: [FencePrefix],
// [SlotCounterPrefix], [HighestTokenPrefix], [QueuePrefix] or [WaitersPrefix]) or a bad ttl;
// a *QuorumError matching ErrNotAcquired when the lock is held elsewhere, too many nodes
// failed or the validity ran out; when ctx ends, an error matching
// ErrNotAcquired and ctx.Err(). A failed attempt is undone on every node, whatever ctx.
// TryAcquire takes a free key even when Acquire calls of other processes are queued for it
// ([Client.Acquire]).
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	ttl, set, err := c.lockArgs(key, ttl)
	if err != nil {
		return nil, err
	}
	if c.cfg.observer == nil {
		return c.tryAcquire(ctx, set, ttl)
	}
	return c.observeAcquire(ctx, set, ttl, func(ctx context.Context) (*Lock, int, error) {
		l, err := c.tryAcquire(ctx, set, ttl)
		return l, 1, err
	})
}

// observeAcquire runs an acquire (one attempt, or retrying) under the observer's Start.
func (c *Client) observeAcquire(ctx context.Context, set lockKeys, ttl time.Duration, run func(context.Context) (*Lock, int, error)) (*Lock, error) {
	octx, end := c.startOp(ctx, Op{Kind: OpAcquire, Keys: set.keys, TTL: ttl})
	l, attempts, err := run(octx)
	e := End{Outcome: outcomeOf(err), Err: err, Attempts: attempts}
	if l != nil {
		e.Token, e.Joined = l.token, l.outer != nil
		if e.Joined {
			e.Attempts = 0
		}
	}
	end(e)
	return l, err
}

// tryAcquire is TryAcquire and TryAcquireMulti once the arguments are valid.
func (c *Client) tryAcquire(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, error) {
	return c.tryAcquireQueued(ctx, set, ttl, nil)
}

// tryAcquireQueued is one attempt, queued in the nodes' queue for the key when qa is not nil.
func (c *Client) tryAcquireQueued(ctx context.Context, set lockKeys, ttl time.Duration, qa *queueArgs) (*Lock, error) {
	if l, err := c.join(ctx, set); l != nil || err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()
	return c.acquire(ctx, set, newHolderID(), ttl, qa)
}

// Acquire acquires the lock named key for ttl, retrying until it succeeds, the retry limit
// is reached ([WithRetryLimit]; none by default) or ctx ends. Arguments and errors are those
// of [Client.TryAcquire]; when ctx ends, the error matches ErrNotAcquired, ctx.Err() and,
// if an attempt was made, the last attempt's *QuorumError.
//
// Waiting is first come, first served, across processes: the Acquire calls of one Client
// for one key queue in arrival order, and only the first of them makes attempts; that one
// waits in the key's queue on the nodes, ordered by when its Acquire began on the Client's
// clock, and a node lets only the head of its queue take the key. A release tells the head's
// process on its turn channel, and the head tries at once (docs/design.md §3.9, §3.10). A
// waiter that hears nothing (a lost message, a node down) retries after a pause drawn from
// [d/2, 3d/2), d being the retry delay ([WithRetryDelay]) for the head and the one after it
// and r·d (at most max(16d, 1 s)) for a waiter r places behind; after attempts that failed
// with no node reporting a holder (overload), d doubles each time, up to max(32d, 1 s). A
// queue only ever refuses, so mutual exclusion and tokens do not depend on it; a head that
// does not come within d/2 of the key being free loses its turn. Without wake-ups
// ([WithoutWakeups]) there is no queue: waiters of other processes retry at the retry delay.
// A retry limit counts this call's own attempts, not its time in the queue. An Acquire that
// gives up (ctx ended, retry limit) takes its place out of the nodes' queues when no other
// Acquire of this Client waits for the key; one ended by Close, or by the process exiting,
// leaves its place until it expires (4 × the longest pause without a refresh, 4 s by
// default), and while that place is the head of a free key it costs the next waiter the
// grace (d/2) and that waiter's next attempt, never more. After
// [Client.Close], Acquire returns ErrClosed (which does not match ErrNotAcquired), at once
// also for calls that were waiting. Safe for concurrent use.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	ttl, set, err := c.lockArgs(key, ttl)
	if err != nil {
		return nil, err
	}
	return c.acquireObserved(ctx, set, ttl)
}

// acquireObserved is acquireRetrying, under the observer's Start when there is one.
func (c *Client) acquireObserved(ctx context.Context, set lockKeys, ttl time.Duration) (*Lock, error) {
	if c.cfg.observer == nil {
		l, _, err := c.acquireRetrying(ctx, set, ttl)
		return l, err
	}
	return c.observeAcquire(ctx, set, ttl, func(ctx context.Context) (*Lock, int, error) {
		return c.acquireRetrying(ctx, set, ttl)
	})
}

// acquireRetrying is Acquire and AcquireMulti once the arguments are valid. It also
// returns the number of attempts made.
func (c *Client) acquireRetrying(ctx context.Context, set lockKeys, ttl time.Duration) (l *Lock, attempts int, err error) {
	if l, err := c.join(ctx, set); l != nil || err != nil {
		return l, 0, err
	}
	if err := ctx.Err(); err != nil {
		// Ended before anything was sent: no subscription either (its connection would
		// send commands for a call that can only fail).
		return nil, 0, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	key := set.waitKey()
	// A queued Acquire (one key, wake-ups on) waits in the nodes' queue for the key, with
	// this call's start as its ticket (queue.go).
	var qa *queueArgs
	var ticket int64
	if c.queued(set) {
		ticket = counterSeed(c.cfg.clock.Now())
		qa = c.newQueueArgs(set.keys[0], ticket)
	}
	var wt *waiter // our place in this client's queue for key, once we are in it
	subscribed := false
	sent := false // an attempt went to the nodes (it may have queued us there)
	subscribe := func() {
		if !subscribed {
			subscribed = true
			c.subscribe(set, qa != nil) // releases by other processes wake the head (wakehub.go)
		}
	}
	defer func() {
		var last bool // nobody here waits for the key any more
		if wt != nil {
			last = c.wait.leave(set, wt)
		} else {
			last = !c.wait.busy(key)
		}
		if subscribed {
			c.unsubscribe(set)
		}
		if qa != nil && l == nil && sent && last {
			c.leaveQueue(qa, set.keys[0]) // the place on the nodes is nobody's now
		}
	}()
	if qa != nil {
		// Before the first attempt, which may queue us: our turn may come at once.
		subscribe()
	}
	join := func() {
		wt = c.wait.join(set, ticket)
		subscribe()
	}
	var last *QuorumError // the last attempt's detail, kept for the error when ctx ends
	overloaded := 0       // consecutive attempts that failed without any node reporting a holder (retryPause)
	// A queued Acquire takes its place here before its first attempt, so that a release by
	// this Client, even one that comes while that attempt is in flight, finds it and keeps
	// its place on the nodes; any Acquire waits behind the ones already here.
	if qa != nil || c.wait.busy(key) {
		join()
		if !c.wait.first(key, wt) {
			if err := c.waitTurn(ctx, set, wt, jitter(c.cfg.retryDelay)); err != nil {
				return nil, 0, fmt.Errorf("%w: %w", ErrNotAcquired, err)
			}
		}
	}
	losses := 0 // attempts made on a wake-up that another contender beat
	for attempts = 1; ; attempts++ {
		// Woken by a release while other processes' waiters answer it too: give way to those
		// that have waited longer (seniorityDelay). Queued waiters are told their turn instead.
		woken := wt != nil && wt.woken && qa == nil
		if woken && c.crowded(set) && c.giveWay(ctx, seniorityDelay(c.cfg.retryDelay, losses)) != nil {
			break
		}
		if qa != nil {
			c.wake.turnReset(set.keys[0]) // this attempt answers for the turns told so far
		}
		mark := c.wake.mark() // a release announced from now on gets us another attempt at once
		l, err = c.tryAcquireQueued(ctx, set, ttl, qa)
		if err == nil {
			if woken {
				c.wokenAttempt(set, true, losses)
			}
			return l, attempts, nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			return l, attempts, err
		}
		var qe *QuorumError
		if errors.As(err, &qe) {
			last, sent = qe, true
		}
		if woken && qe != nil && qe.contended() {
			c.wokenAttempt(set, false, losses)
			losses++
		}
		if ctx.Err() != nil {
			break
		}
		if c.cfg.retryLimit > 0 && attempts >= c.cfg.retryLimit {
			return nil, attempts, err
		}
		pause := c.retryPause(qe, &overloaded)
		if wt == nil {
			join()
		}
		wt.mark, wt.marked = mark, true
		if c.waitTurn(ctx, set, wt, pause) != nil {
			break
		}
	}
	return nil, attempts, ctxEnded(ctx.Err(), last, err)
}

// retryPause is the pause before the next attempt after one that failed with qe: the retry
// delay, jittered, while the key is contended, or for a queued waiter with others ahead of
// it the longer pause of queuePause; doubled for each consecutive attempt that failed without
// any node reporting a holder (overload, counted in *overloaded).
func (c *Client) retryPause(qe *QuorumError, overloaded *int) time.Duration {
	if qe != nil && !qe.contended() {
		*overloaded++
		return jitter(overloadDelay(c.cfg.retryDelay, *overloaded))
	}
	*overloaded = 0
	if qe != nil && qe.ahead > 0 {
		return jitter(queuePause(c.cfg.retryDelay, qe.ahead))
	}
	return jitter(c.cfg.retryDelay)
}

// ctxEnded is the error of an Acquire whose context ended (cerr): the last attempt's
// detail, with the context's end at the top of it rather than only inside one node's entry.
func ctxEnded(cerr error, last *QuorumError, err error) error {
	switch {
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
