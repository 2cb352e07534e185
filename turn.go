package redlock

import (
	"context"
	"time"
)

// turn is one Acquire's place among the waiters for its keys, from its first attempt to
// its return: its place in this Client's queue for the keys (waitQueues, wake.go), and for
// a queued Acquire (one key, wake-ups on) its place in the nodes' queue for the key
// (queue.go, docs/design.md §3.10). It owns the wake-up subscription, the hub's mark taken
// before each attempt, the count of woken attempts that lost, and leaving. It is used by the
// Acquire call's goroutine only.
type turn struct {
	c          *Client
	set        lockKeys
	key        string     // set.waitKey(), built once
	qa         *queueArgs // the nodes' queue for the key; nil when not queued
	ticket     int64      // qa's ticket: this call's start on the Client's clock; 0 when not queued
	w          *waiter    // our place in this Client's queue, once joined
	subscribed bool
	losses     int // attempts made on a wake-up that another contender beat
	overloaded int // consecutive attempts that failed with no node refusing (turn.pause)
	// attempt makes one attempt; nil for the lock's own (runAttempt on set). A semaphore's
	// turn waits on every permit key and chooses one per attempt (semaphore.go).
	attempt func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error)
	// eager: a new head attempts at once instead of after a retry pause. For waiters of
	// something several may hold (a semaphore's permits, a read/write lock), where the
	// waiter before it winning does not mean the next must fail.
	eager bool
	// shares: the waiter shares what it waits for with the others woken with it (a reader),
	// so its woken attempt is not delayed by seniority (giveWay).
	shares bool
}

// newTurn makes the turn of an Acquire of set, with its ticket when it queues on the nodes.
func (c *Client) newTurn(set lockKeys) *turn {
	t := &turn{c: c, set: set, key: set.waitKey()}
	if c.queued(set) {
		t.ticket = counterSeed(c.cfg.clock.Now())
		t.qa = c.newQueueArgs(set.keys[0], t.ticket)
	}
	return t
}

// subscribe starts hearing of releases by other processes (wakehub.go), once.
func (t *turn) subscribe() {
	if !t.subscribed {
		t.subscribed = true
		t.c.subscribe(t.set, t.qa != nil)
	}
}

// join takes a place at the back of this Client's queue for the keys.
func (t *turn) join() {
	t.w = t.c.wait.join(t.set, t.key, t.ticket)
	t.subscribe()
}

// enter prepares the first attempt. A queued Acquire subscribes first (its turn may come at
// once) and takes its place here before the attempt, so that a release by this Client, even
// one while that attempt is in flight, finds it and keeps its place on the nodes; any
// Acquire waits behind those already here. It returns ctx.Err() when ctx ended while it
// waited.
func (t *turn) enter(ctx context.Context) error {
	if t.qa != nil {
		t.subscribe()
	}
	if t.qa == nil && !t.c.wait.busy(t.key) {
		return nil
	}
	t.join()
	if t.c.wait.first(t.key, t.w) {
		return nil
	}
	pause := jitter(t.c.cfg.retryDelay)
	if t.eager {
		pause = 0
	}
	return t.c.waitTurn(ctx, t.set, t.key, t.w, pause)
}

// woken reports whether the next attempt answers a release announced on the keys' channel
// (queued waiters are told their turn instead, and do not count).
func (t *turn) woken() bool { return t.w != nil && t.w.woken && t.qa == nil }

// released returns the key whose release (by this Client, or announced by a quorum of
// nodes) woke the next attempt, "" when it was not woken by one or the key is not known.
func (t *turn) released() string {
	if t.w == nil || !t.w.woken {
		return ""
	}
	return t.w.released
}

// giveWay delays a woken attempt on a crowded key by its seniority (seniorityDelay), so that
// the waiters that have lost most releases reach the nodes first. It returns ctx.Err() when
// ctx ended.
func (t *turn) giveWay(ctx context.Context) error {
	if t.shares || !t.c.crowded(t.set) {
		return nil
	}
	return t.c.giveWay(ctx, seniorityDelay(t.c.cfg.retryDelay, t.losses))
}

// try makes the next attempt.
func (t *turn) try(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
	if t.attempt != nil {
		return t.attempt(ctx, ttl)
	}
	return t.c.runAttempt(ctx, t.set, ttl, t.qa)
}

// mark is taken just before an attempt: a release announced from then on gets us another
// attempt at once. A queued attempt answers for the turns told so far.
func (t *turn) mark() uint64 {
	if t.qa != nil {
		t.c.wake.turnReset(t.set.keys[0])
	}
	return t.c.wake.mark()
}

// tried records an attempt's result: for a queued one, that it reached the nodes (it may
// have queued this Client there) and what becomes of the turns told meanwhile (wakeHub.
// turnDone); for a woken attempt, whether it won or lost to another contender (the key's
// crowding and our seniority).
func (t *turn) tried(woken bool, r attemptResult) {
	if t.qa != nil {
		if r.detail != nil {
			t.c.wait.place(t.key)
		}
		t.c.wake.turnDone(t.set.keys[0], r.kind == attemptWon, r.took, r.cancelled)
	}
	switch {
	case woken && r.kind == attemptWon:
		t.c.wokenAttempt(t.set, true, t.losses)
	case woken && r.kind == attemptContended && r.refused:
		// Lost to another contender: a node refused it. An attempt refused here, without
		// asking the nodes (attemptResult.here), lost to nobody; counted, it made a Client
		// alone on a semaphore give way before every woken attempt (docs/history.md, "A
		// semaphore that gave way to nobody"; TestSemaphoreLocalRefusalNotCrowded).
		t.c.wokenAttempt(t.set, false, t.losses)
		t.losses++
	}
}

// pause is how long to wait after a failed attempt before the next one: the retry delay,
// jittered, while the key is contended, or for a queued waiter with others ahead of it the
// longer pause of queuePause; doubled for each consecutive attempt that failed without any
// node refusing (overload). An eager turn waits no longer than the refusals last (the most
// milliseconds left that a refusing node reported, plus one): a permit or a writer key about
// to expire, a read phase about to end, with no release to announce it.
//
// A queued waiter that every refusing node turned away from a free key (no milliseconds
// left, waiters ahead) comes back by runnerUpWait at the latest: the key is between a
// release and its head's acquire, and a head that heard its turn and never came (its process
// died just then, or stopped) loses it to the first attempt after the grace (design.md
// §3.10, rule 4), which no notice brings forward. Without this, that attempt waited for the
// first waiter whose own pause ended.
func (t *turn) pause(r attemptResult) time.Duration {
	d := t.c.cfg.retryDelay
	if r.kind == attemptOverloaded {
		t.overloaded++
		return jitter(overloadDelay(d, t.overloaded))
	}
	t.overloaded = 0
	if r.ahead > 0 {
		p := jitter(queuePause(d, r.ahead))
		if r.kind == attemptContended && r.left == 0 {
			p = min(p, runnerUpWait(d))
		}
		return p
	}
	p := jitter(d)
	if t.eager && r.left > 0 {
		p = min(p, time.Duration(r.left+1)*time.Millisecond)
	}
	return p
}

// wait blocks until the next attempt is due (waitTurn): after pause, or at once when a
// release came after mark. It joins this Client's queue first if needed. It returns
// ctx.Err() when ctx ended.
func (t *turn) wait(ctx context.Context, pause time.Duration, mark uint64) error {
	if t.w == nil {
		t.join()
	}
	t.w.mark, t.w.marked = mark, true
	return t.c.waitTurn(ctx, t.set, t.key, t.w, pause)
}

// leave gives the turn up when the Acquire returns: its place here, its subscription, and,
// when it did not win, nobody else here waits for the key and one of this Client's waiters
// for it may have put its place on the nodes (waitQueues.place, handOff), that place. When
// it won in those circumstances it reports true: the place may still stand on the nodes
// where the acquire never landed, and the lock's release tidies it there (quorumOp.tidy).
func (t *turn) leave(won bool) (placedWon bool) {
	var last, placed bool // nobody here waits for the key any more; the nodes may queue us
	if t.w != nil {
		last, placed = t.c.wait.leave(t.set, t.key, t.w)
	} else {
		last = !t.c.wait.busy(t.key)
	}
	if t.subscribed {
		t.c.unsubscribe(t.set)
	}
	if t.qa != nil && !won && placed && last {
		t.c.leaveQueue(t.set.keys[0]) // the place on the nodes is nobody's now
	}
	return t.qa != nil && won && placed && last
}
