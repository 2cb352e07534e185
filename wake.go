package redlock

import (
	"context"
	"sync"
	"time"
)

// WakeChannelPrefix begins the name of every pub/sub channel the library uses: a Release
// publishes on WakeChannelPrefix + key (only when it deleted the key), and a Client whose
// Acquire calls wait for a key subscribes to that channel on every node. An ACL user needs
// the channel pattern "&redlock:wake:*" and the commands +publish +subscribe +unsubscribe
// for wake-ups (docs/operations.md); without them everything still works, by polling.
const WakeChannelPrefix = "redlock:wake:"

// waitQueues orders the Acquire calls of one Client that wait for the same key. Per key
// they queue in arrival order and only the first (the head) makes attempts; the others wait
// for their turn without sending anything, so a thousand waiters on one key cost the nodes
// what one does. A Release by a Lock of the same Client wakes the head at once instead of
// leaving it to sleep out its retry pause, and a new Acquire of a key with waiters joins
// the back of the queue rather than trying first, so a holder that releases and acquires
// again in a loop cannot starve the others. Releases by other processes (or other Clients)
// wake the head through the key's wake-up channel (wakehub.go); when that message is lost,
// the head's retry pause still bounds the wait. An entry lives only while someone waits on
// its key.
type waitQueues struct {
	mu sync.Mutex
	m  map[string][]*waiter // per key, oldest first; m[key][0] is the head
	// sets maps a key to the multi-key sets (their waitKey) that have waiters and contain
	// it, with their waiter counts: a release of the key wakes those sets' heads too.
	sets map[string]map[string]int
	// placed has the keys whose waiters here may have this Client's place in the nodes'
	// queue (queue.go): one of them sent a queued attempt, or a release handed the place to
	// them. It goes with the key's last waiter, who takes the place out if it did not win.
	placed map[string]bool
	closed bool          // the client is closed: every waiter goes now (and fails)
	done   chan struct{} // closed with closed; made on first use
}

// isClosed reports whether the client has closed.
func (q *waitQueues) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// closing returns a channel that is closed once the client closes.
func (q *waitQueues) closing() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done == nil {
		q.done = make(chan struct{})
		if q.closed {
			close(q.done)
		}
	}
	return q.done
}

// waiter is one Acquire's place in a queue.
type waiter struct {
	poke    chan struct{} // buffered 1: "you are the head now" or "released: try now"
	kicked  bool          // a release happened since the head's last attempt; guarded by mu
	catchUp bool          // the kick is only a subscription's catch-up (wakeHub.subscribed)
	kickKey string        // the key whose release kicked it last ("" for a catch-up); guarded by mu
	// heir: the head before this one gave up (leave) having taken the hub's stamp heirMark
	// before its last attempt; this waiter, head now, takes that stamp as its own mark, so
	// that a release or turn the other one never acted on still makes it try at once.
	// Guarded by mu.
	heir     bool
	heirMark uint64
	// soon: a node told this Client that its place is the runner-up of the key's queue,
	// behind a head told its turn that nobody heard (lua/queue.lua, qtell); that head, most
	// likely a waiter that died, is passed over once the key has been free for the grace,
	// but only at some waiter's attempt, so this one tries again by soon at the latest,
	// whatever pause it drew when it was further back. Zero for none; cleared when it makes
	// its attempt. Guarded by mu.
	soon time.Time

	// Owned by the Acquire call: the wake hub's stamp taken before its last attempt, so that
	// a release announced between that attempt and the wait is not missed (wakeHub.since).
	mark   uint64
	marked bool // mark is set; a waiter that joined without attempting takes it as head
	woken  bool // waitTurn returned for a release, not because the pause ran out
	// released: when woken, the key whose release woke it, if known ("" otherwise): a
	// semaphore's woken attempt tries that permit first (Semaphore.attempt).
	released string

	ticket int64 // its ticket in the nodes' queue for the key (queue.go), 0 if not queued
}

func pokeWaiter(w *waiter) {
	select {
	case w.poke <- struct{}{}:
	default: // a poke is pending already
	}
}

// busy reports whether some Acquire of this client waits for key.
func (q *waitQueues) busy(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.m[key]) > 0
}

// join puts a new waiter at the back of the queue of set (whose waitKey is key), with its
// ticket in the nodes' queue (0 if it has none).
func (q *waitQueues) join(set lockKeys, key string, ticket int64) *waiter {
	w := &waiter{poke: make(chan struct{}, 1), ticket: ticket}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string][]*waiter{}
	}
	q.m[key] = append(q.m[key], w)
	if waitsOnSet(set, key) {
		if q.sets == nil {
			q.sets = map[string]map[string]int{}
		}
		for _, k := range set.keys {
			if q.sets[k] == nil {
				q.sets[k] = map[string]int{}
			}
			q.sets[k][key]++
		}
	}
	return w
}

// waitsOnSet reports whether the waiters queued under key wait for a release of any of
// set's keys (a multi-key lock; a semaphore's permits, whose queue is named apart even for
// one permit) rather than for the key itself.
func waitsOnSet(set lockKeys, key string) bool {
	return len(set.keys) > 1 || set.keys[0] != key
}

// head reports whether w is first in key's queue, and takes a pending release kick: for a
// release, the released key (waiter.kickKey) comes with it.
func (q *waitQueues) head(key string, w *waiter) (isHead, kicked, release bool, released string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true, true, false, ""
	}
	if l := q.m[key]; len(l) == 0 || l[0] != w {
		return false, false, false, ""
	}
	kicked, w.kicked = w.kicked, false
	release, w.catchUp = kicked && !w.catchUp, false
	released, w.kickKey = w.kickKey, ""
	return true, kicked, release, released
}

// inherited returns the mark that w, head now, inherits from the head before it (leave), if
// any.
func (q *waitQueues) inherited(w *waiter) (mark uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return w.heirMark, w.heir
}

// first reports whether w is the first waiter for key.
func (q *waitQueues) first(key string, w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.m[key]
	return len(l) > 0 && l[0] == w
}

// handOff returns the ticket of the first waiter for key, 0 when nobody waits here. A
// release that gives it to the nodes puts this Client's place there for that waiter, so the
// key counts as placed.
func (q *waitQueues) handOff(key string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.m[key]; len(l) > 0 {
		q.placeLocked(key)
		return l[0].ticket
	}
	return 0
}

// place records that a waiter for key sent a queued attempt, which may have put this
// Client's place in the nodes' queue.
func (q *waitQueues) place(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.m[key]) > 0 {
		q.placeLocked(key)
	}
}

func (q *waitQueues) placeLocked(key string) {
	if q.placed == nil {
		q.placed = map[string]bool{}
	}
	q.placed[key] = true
}

// leave removes w from the queue of set (whose waitKey is key); when w was the head, the
// next waiter becomes the head. It reports whether nobody waits for set here any more, and
// then whether the key was placed (place, handOff) while they waited.
func (q *waitQueues) leave(set lockKeys, key string, w *waiter) (empty, placed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if waitsOnSet(set, key) {
		for _, k := range set.keys {
			if q.sets[k][key]--; q.sets[k][key] <= 0 {
				delete(q.sets[k], key)
				if len(q.sets[k]) == 0 {
					delete(q.sets, k)
				}
			}
		}
	}
	l := q.m[key]
	for i, x := range l {
		if x != w {
			continue
		}
		l = append(l[:i], l[i+1:]...)
		if i == 0 && len(l) > 0 {
			// The next waiter is the head now, and inherits what this one had not acted on:
			// a kick it had not taken, and the mark of its last attempt (leave is called by
			// w's own Acquire, which owns w.mark).
			next := l[0]
			if w.kicked {
				next.kicked, next.catchUp = true, w.catchUp
			}
			if w.marked {
				next.heir, next.heirMark = true, w.mark
			}
			if !w.soon.IsZero() && (next.soon.IsZero() || w.soon.Before(next.soon)) {
				next.soon = w.soon
			}
			pokeWaiter(next)
		}
		break
	}
	if len(l) == 0 {
		delete(q.m, key)
		placed = q.placed[key]
		delete(q.placed, key)
		return true, placed
	}
	q.m[key] = l
	return false, false
}

// closeAll wakes every waiter of every key: the client is closing, and their next attempt
// returns ErrClosed at once instead of after a retry pause each. It returns the keys whose
// waiters may have a place on the nodes (placed), for Close to take them out.
func (q *waitQueues) closeAll() (placed []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed && q.done != nil {
		close(q.done)
	}
	q.closed = true
	for key, l := range q.m {
		for _, w := range l {
			pokeWaiter(w)
		}
		if q.placed[key] {
			placed = append(placed, key)
		}
	}
	return placed
}

// catchUp wakes the head of key's queue, and of every multi-key set's queue that contains
// key, for a subscription that has just become active: the head tries once more, but it
// was not woken by a release.
func (q *waitQueues) catchUp(key string) { q.kick(key, true, true, true) }

// kick wakes, for an attempt now, the head of key's queue (single) and the heads of the
// multi-key sets' queues that contain key (sets); catchUp says it was not a release.
func (q *waitQueues) kick(key string, catchUp, single, sets bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	kick := func(w *waiter) {
		if !w.kicked {
			w.catchUp = catchUp
		} else if !catchUp {
			w.catchUp = false // a release as well
		}
		if !catchUp {
			w.kickKey = key // the latest release
		}
		w.kicked = true
		pokeWaiter(w)
	}
	if l := q.m[key]; single && len(l) > 0 {
		kick(l[0])
	}
	if !sets {
		return
	}
	for set := range q.sets[key] {
		if l := q.m[set]; len(l) > 0 {
			kick(l[0])
		}
	}
}

// soon asks the head of key's queue, if it is queued on the nodes, to try again by at at the
// latest (waiter.soon).
func (q *waitQueues) soon(key string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.m[key]
	if len(l) == 0 || l[0].ticket == 0 {
		return
	}
	if w := l[0]; w.soon.IsZero() || at.Before(w.soon) {
		w.soon = at
		pokeWaiter(w)
	}
}

// soonOf returns w's soon, and clears it when clear is set (w is about to make its attempt).
func (q *waitQueues) soonOf(w *waiter, clear bool) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	at := w.soon
	if clear {
		w.soon = time.Time{}
	}
	return at
}

// The wake hub is keyed by single keys; a multi-key set waits on each of its keys.

func (c *Client) subscribe(set lockKeys, queued bool) {
	for _, k := range set.keys {
		c.wake.subscribe(k, queued)
	}
}

func (c *Client) unsubscribe(set lockKeys) {
	for _, k := range set.keys {
		c.wake.unsubscribe(k)
	}
}

func (c *Client) crowded(set lockKeys) bool {
	for _, k := range set.keys {
		if c.wake.crowded(k) {
			return true
		}
	}
	return false
}

func (c *Client) wokenAttempt(set lockKeys, won bool, losses int) {
	for _, k := range set.keys {
		c.wake.wokenAttempt(k, won, losses)
	}
}

// heardSince returns a key of the set whose release was announced after mark (for a
// queued waiter: one after which it is the head), and whether there is one.
func (c *Client) heardSince(set lockKeys, mark uint64, queued bool) (string, bool) {
	for _, k := range set.keys {
		if c.wake.since(k, mark, queued) {
			return k, true
		}
	}
	return "", false
}

// waitTurn blocks until w should make its next attempt: w is the head and either pause has
// passed, a release of key by this client kicked it, or a release announced by another
// process (wakehub.go) came after the head's last attempt started. It returns ctx.Err()
// when ctx ends.
func (c *Client) waitTurn(ctx context.Context, set lockKeys, key string, w *waiter, pause time.Duration) error {
	queued := w.ticket != 0
	if queued {
		defer c.wait.soonOf(w, true) // the attempt that follows answers for the notices so far
	}
	var deadline time.Time // when the head's pause ends
	for {
		isHead, kicked, release, released := c.wait.head(key, w)
		if kicked {
			w.woken, w.released = release, released
			if release {
				c.observeWakeUp(ctx, set)
			}
			return nil
		}
		if !isHead {
			select {
			case <-w.poke: // we may be the head now
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !w.marked {
			// Head now without an attempt of our own: the events before this moment were the
			// previous head's to act on, unless it gave up without acting on them (it took
			// its mark before its last attempt: we take that one).
			if m, ok := c.wait.inherited(w); ok {
				w.mark = m
			} else {
				w.mark = c.wake.mark()
			}
			w.marked = true
		}
		if k, ok := c.heardSince(set, w.mark, queued); ok {
			w.woken, w.released = true, k
			c.observeWakeUp(ctx, set)
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(pause)
		}
		if queued {
			if at := c.wait.soonOf(w, false); !at.IsZero() && at.Before(deadline) {
				deadline = at // the runner-up: by the grace and a little after (wakeHub.soonFrom)
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			w.woken, w.released = false, ""
			return nil
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
			w.woken, w.released = false, ""
			return nil
		case <-w.poke: // a release kick, or a poke from before we became the head
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// observeWakeUp tells the observer, if any, that a waiter of set was woken by a release.
func (c *Client) observeWakeUp(ctx context.Context, set lockKeys) {
	if o := c.cfg.observer; o != nil && !c.wait.isClosed() {
		o.Event(ctx, Event{Kind: EventWakeUp, Keys: set.keys})
	}
}
