package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
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

// TestTurnCounting: how a queued waiter's turns (wakeHub.turnFrom) kick it, on 5 nodes
// (quorum 3). An attempt that won starts the count afresh, so the turns of that lock's own
// release kick the next waiter here even when a quorum of turns came in while the attempt
// ran (before, that kick stood until the next attempt and swallowed them: the waiter slept
// its retry pause). The late turns of a release whose quorum kicked an attempt are dropped
// while it runs and after it won, where it took the key, but count once it failed (the
// release reached those nodes after the attempt did), and after it won from the nodes where
// it did not take the key (a stall in 3 of 4 runs of 2 Clients × 4 goroutines with two
// nodes of five 40 ms late, before). An attempt that its caller's context ended gives back
// the turns it began with.
func TestTurnCounting(t *testing.T) {
	_, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	h := &c.wake
	h.subscribe(testKey, true)
	defer h.unsubscribe(testKey)
	turns := func(id string, nodes ...int) {
		for _, n := range nodes {
			h.turnFrom(testKey, id, n)
		}
	}
	attempt := func() uint64 { h.turnReset(testKey); return h.mark() }
	kicked := func(what string, m uint64, want bool) {
		t.Helper()
		if got := h.since(testKey, m, true); got != want {
			t.Fatalf("%s: kicked %v, want %v", what, got, want)
		}
	}

	// An attempt runs; a release's turns from three nodes come meanwhile; it wins.
	m := attempt()
	turns("r1", 0, 1, 2)
	kicked("a quorum of turns during an attempt", m, true)
	h.turnDone(testKey, true, nil, false)
	m = h.mark()
	turns("r1", 3, 4) // r1's late turns: no news
	kicked("the late turns of the release that kicked the won attempt", m, false)
	turns("own", 0, 1, 2) // the winner's own release tells the next waiter here
	kicked("the release of the lock that was won", m, true)

	// Kicked by r2 on three nodes, the attempt fails: r2 reached nodes 3 and 4 after it.
	m = attempt()
	h.turnDone(testKey, true, nil, false) // the "own" kick's attempt, won
	turns("r2", 0, 1, 2)
	kicked("r2's quorum", m, true)
	m = attempt()
	turns("r2", 3) // late, while the attempt runs: dropped for now
	kicked("r2's late turn during the attempt it kicked", m, false)
	h.turnDone(testKey, false, nil, false)
	kicked("one late turn after the failure", m, false)
	turns("r2", 4)                                    // after the failure, r2 counts again
	turns("undo", 0)                                  // our undo tells us our turn on node 0
	kicked("r2's late turns and the undo's", m, true) // nodes 3, 4 and 0

	// The attempt that answers it wins everywhere. Then r3 kicks an attempt from nodes 0, 1
	// and 3, its turn from node 2 comes while it runs, and it wins having taken the key on
	// nodes 0, 1 and 3 only (its call to node 2 landed before r3 did; node 4 had not
	// answered). r3's turns from nodes 2 and 4 are the next waiter's, since the attempt
	// changed nothing there; those from the nodes it took are no news.
	m = attempt()
	h.turnDone(testKey, true, nil, false)
	turns("r3", 0, 1, 3)
	kicked("r3's quorum", m, true)
	m = attempt()
	turns("r3", 2)
	h.turnDone(testKey, true, []bool{true, true, false, true, false}, false)
	turns("r3", 0, 3, 4)
	kicked("r3's turns where the won attempt did not take the key: two nodes", m, false)
	turns("own2", 1) // the winner's release, on a node where it deleted the key
	kicked("r3's turns from nodes 2 and 4 with the release's from node 1", m, true)

	// An attempt kicked by those turns ends with its caller's context before any node
	// answered: it answered for nothing, and the turns it began with count again, so the
	// Client's next waiter is kicked at once. One that the nodes answered and refused does
	// not give them back.
	m = attempt()
	h.turnDone(testKey, false, nil, true)
	kicked("the turns of an attempt its context ended", m, true)
	m = attempt()
	h.turnDone(testKey, false, nil, false)
	kicked("the turns of a refused attempt", m, false)
}

// TestWaitQueuePlaced: the last waiter of a key to leave learns whether some waiter of it
// here sent a queued attempt (place) or was handed this Client's place by a release
// (handOff), whichever waiter that was; the mark goes with the key's last waiter.
func TestWaitQueuePlaced(t *testing.T) {
	var q waitQueues
	set, err := newLockKeys(testKey)
	if err != nil {
		t.Fatal(err)
	}
	leave := func(w *waiter, wantLast, wantPlaced bool) {
		t.Helper()
		if last, placed := q.leave(set, testKey, w); last != wantLast || placed != wantPlaced {
			t.Fatalf("leave: last %v placed %v, want %v %v", last, placed, wantLast, wantPlaced)
		}
	}
	w1, w2 := q.join(set, testKey, 10), q.join(set, testKey, 20)
	q.place(testKey) // w1's attempt
	leave(w1, false, false)
	leave(w2, true, true) // w2 never attempted, but the Client may be queued on the nodes
	w3 := q.join(set, testKey, 30)
	leave(w3, true, false) // a new round of waiters starts unplaced
	q.place(testKey)       // nobody waits: nothing to mark
	w4, w5 := q.join(set, testKey, 40), q.join(set, testKey, 50)
	if got := q.handOff(testKey); got != 40 {
		t.Fatalf("handOff: ticket %d, want the head's 40", got)
	}
	leave(w4, false, false)
	leave(w5, true, true)
}

// TestQueuePlaceGoesWithLastWaiter: two Acquire calls of one Client wait behind another
// Client's lock and give up together. Whichever of them leaves last, and whether or not it
// made an attempt itself, the Client's place goes from every node (leave.lua): before, it
// stayed when the last one to leave had not attempted (the other had, and queued the
// Client), and the next Client's waiter was refused there until the place expired.
func TestQueuePlaceGoesWithLastWaiter(t *testing.T) {
	_, clients := miniNodes(t, 3)
	h := newTestClient(t, clients)
	// A node timeout far above a loaded machine's stalls: an attempt that timed out on a node
	// would not queue the Client there, and the next comes a retry delay (a minute) later.
	a := newTestClient(t, clients, WithRetryDelay(time.Minute), WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 30*time.Second)
	if _, err := h.TryAcquire(ctx, testKey, time.Minute); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		actx, cancel := context.WithCancel(ctx)
		done := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := a.Acquire(actx, testKey, time.Minute)
				done <- err
			}()
		}
		testutil.WaitFor(t, 10*time.Second, "both waiters, the Client queued on every node", func() bool {
			a.wait.mu.Lock()
			n := len(a.wait.m[testKey])
			a.wait.mu.Unlock()
			return n == 2 && queuedOnEvery(ctx, clients, testKey, a.id)
		})
		cancel()
		for range 2 {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: %v, want the context's end", round, err)
			}
		}
		settle(a)
		if n := queuedOn(ctx, clients, testKey, a.id); n != 0 {
			t.Fatalf("round %d: both waiters gave up, and the Client still has a place on %d nodes", round, n)
		}
	}
}

// TestWaitQueueHeir: a head that gives up hands what it had not acted on to the next waiter,
// head now: a kick it had not taken, and the mark of its last attempt, so that a turn or a
// release that came after that attempt still makes the next one try at once. Before, the
// next head took a fresh mark and slept its retry pause with the key free and its Client the
// head on every node (a newcomer's stress run: 4 Clients × 4 goroutines, 30 % of them giving
// up, retry delay a minute, stalled in 5 of 6 runs).
func TestWaitQueueHeir(t *testing.T) {
	var q waitQueues
	set, err := newLockKeys(testKey)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2, w3 := q.join(set, testKey, 10), q.join(set, testKey, 20), q.join(set, testKey, 30)
	if _, ok := q.inherited(w2); ok {
		t.Fatal("a waiter inherits before any head left")
	}
	w1.mark, w1.marked = 7, true // w1 attempted with mark 7, then was kicked
	q.kick(testKey, false, true, false)
	q.leave(set, testKey, w1) // w1 gives up without taking the kick
	if m, ok := q.inherited(w2); !ok || m != 7 {
		t.Fatalf("w2 inherits mark %d (%v), want 7", m, ok)
	}
	if isHead, kicked, release, _ := q.head(testKey, w2); !isHead || !kicked || !release {
		t.Fatalf("w2: head %v kicked %v release %v, want the kick w1 had not taken", isHead, kicked, release)
	}
	// w2 leaves without having attempted: it has no mark of its own, so w3 inherits nothing
	// from it, and nothing is pending.
	q.leave(set, testKey, w2)
	if _, ok := q.inherited(w3); ok {
		t.Fatal("w3 inherits the mark of a head that never attempted")
	}
	if _, kicked, _, _ := q.head(testKey, w3); kicked {
		t.Fatal("w3 kicked with no kick pending")
	}
}

// TestWakeNamesReleasedKey: a head woken by a release learns which key was released (the
// latest, when several were); a subscription's catch-up names none, and does not hide a
// release kicked before it. waitTurn hands the key to the Acquire (waiter.released).
func TestWakeNamesReleasedKey(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	s := c.Semaphore("lanes", 3)
	k0, k1, k2 := s.PermitKey(0), s.PermitKey(1), s.PermitKey(2)
	w := c.wait.join(s.all, s.waitKey, 0)
	c.wait.catchUp(k0)
	if _, kicked, release, key := c.wait.head(s.waitKey, w); !kicked || release || key != "" {
		t.Fatalf("catch-up: kicked %v release %v key %q, want a kick that is not a release", kicked, release, key)
	}
	c.wait.kick(k1, false, true, true)
	c.wait.catchUp(k0)
	if _, _, release, key := c.wait.head(s.waitKey, w); !release || key != k1 {
		t.Fatalf("release then catch-up: release %v key %q, want the release of %q", release, key, k1)
	}
	c.wait.kick(k1, false, true, true)
	c.wait.kick(k2, false, true, true)
	w.mark, w.marked = c.wake.mark(), true
	if err := c.waitTurn(ctxT(t, 10*time.Second), s.all, s.waitKey, w, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !w.woken || w.released != k2 {
		t.Fatalf("two releases: woken %v released %q, want the latest, %q", w.woken, w.released, k2)
	}
}

// TestOwnReleaseAfterItsEcho: the nodes' announcements of a release by this Client that
// reach a quorum before the release's own replies kick the waiters once; the release's
// confirmation (ownRelease) that follows kicks nobody again, while a release whose
// announcements have not come kicks at once, and its echo then kicks nobody.
func TestOwnReleaseAfterItsEcho(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	s := c.Semaphore("echo", 2)
	k := s.PermitKey(0)
	c.wake.subscribe(k, false)
	defer c.wake.unsubscribe(k)
	w := c.wait.join(s.all, s.waitKey, 0)
	kicked := func(what string, want bool) {
		t.Helper()
		if _, got, _, _ := c.wait.head(s.waitKey, w); got != want {
			t.Fatalf("%s: kicked %v, want %v", what, got, want)
		}
	}
	m := c.wake.mark()
	for node := range 2 {
		c.wake.heardFrom(k, "h1", node)
	}
	kicked("the echo of h1 from a quorum", true)
	c.wake.ownRelease(k, "h1", false)
	kicked("h1's own confirmation after its echo", false)
	if _, ok := c.heardSince(s.all, c.wake.mark(), false); ok {
		t.Fatal("h1's confirmation stamped a release after its echo had")
	}
	if _, ok := c.heardSince(s.all, m, false); !ok {
		t.Fatal("h1's echo is not heard since before it")
	}
	c.wake.ownRelease(k, "h2", false)
	kicked("h2's own confirmation, first", true)
	for node := range 3 {
		c.wake.heardFrom(k, "h2", node)
	}
	kicked("h2's echo after its confirmation", false)

	// A key with a queued waiter here (its turn channel) and a multi-key waiter (its own
	// channel): the echo of a multi-key lock's release kicks the multi-key waiter, not the
	// queued head, which the nodes do not tell its turn when the releasing Client is its own
	// (qhandoff); the release's confirmation then kicks the queued head, and only it.
	const key = "echo:k"
	single, err := newLockKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := newLockKeys(key, "echo:other")
	if err != nil {
		t.Fatal(err)
	}
	c.wake.subscribe(key, true)
	defer c.wake.unsubscribe(key)
	c.wake.subscribe(key, false)
	defer c.wake.unsubscribe(key)
	q := c.wait.join(single, key, 7)
	mw := c.wait.join(multi, multi.waitKey(), 0)
	took := func(what string, w *waiter, waitKey string, want bool) {
		t.Helper()
		if _, got, _, _ := c.wait.head(waitKey, w); got != want {
			t.Fatalf("%s: kicked %v, want %v", what, got, want)
		}
	}
	for node := range 2 {
		c.wake.heardFrom(key, "m1", node)
	}
	took("the echo of m1: the multi-key waiter", mw, multi.waitKey(), true)
	took("the echo of m1: the queued head", q, key, false)
	c.wake.ownRelease(key, "m1", false)
	took("m1's confirmation: the queued head", q, key, true)
	took("m1's confirmation: the multi-key waiter", mw, multi.waitKey(), false)
}

// TestTurnCatchUpAtQuorum: the catch-up attempt of a new turn subscription comes once a
// quorum of nodes listens, not at the first: a turn told by a node before it listened is lost,
// and a head caught up before the others listened could then wait its retry pause.
func TestTurnCatchUpAtQuorum(t *testing.T) {
	_, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	h, w := queuedHubWaiter(t, c)
	for node := range 2 {
		h.turnSubscribed(node)
		if _, kicked, _, _ := c.wait.head(testKey, w); kicked {
			t.Fatalf("caught up when %d of 5 nodes listen", node+1)
		}
	}
	h.turnSubscribed(1) // the same node again
	if _, kicked, _, _ := c.wait.head(testKey, w); kicked {
		t.Fatal("caught up on a node's second confirmation")
	}
	h.turnSubscribed(4)
	if _, kicked, release, _ := c.wait.head(testKey, w); !kicked || release {
		t.Fatalf("at a quorum: kicked %v release %v, want a catch-up kick", kicked, release)
	}
	h.turnSubscribed(3)
	if _, kicked, _, _ := c.wait.head(testKey, w); kicked {
		t.Fatal("a second catch-up for the same subscription")
	}
}

// TestRunnerUpNotice: a node's runner-up notice (lua/queue.lua, qtell) brings the queued head
// waiter's next attempt forward to runnerUpWait from the notice, whatever pause it drew; it
// is not a wake-up (no kick), a later notice never puts the attempt back, a notice for a key
// this Client has no queued waiter for changes nothing, and the attempt clears it.
func TestRunnerUpNotice(t *testing.T) {
	_, clients := miniNodes(t, 5)
	const delay = 40 * time.Millisecond
	c := newTestClient(t, clients, WithRetryDelay(delay))
	h, w := queuedHubWaiter(t, c) // the messages below are dispatched by hand
	set := mustLockKeys(t, testKey)
	id := newHolderID()
	notice := &redis.Message{Channel: h.turnCh, Payload: runnerUpMark + id + testKey}
	other := &redis.Message{Channel: h.turnCh, Payload: runnerUpMark + id + "another"}
	ctx := ctxT(t, 10*time.Second)

	h.dispatch(other, 0)
	if at := c.wait.soonOf(w, false); !at.IsZero() {
		t.Fatalf("a notice for another key set the waiter's soon to %v", at)
	}
	start := time.Now()
	h.dispatch(notice, 2)
	first := c.wait.soonOf(w, false)
	if first.IsZero() || first.Before(start.Add(runnerUpWait(delay))) || first.After(time.Now().Add(runnerUpWait(delay))) {
		t.Fatalf("soon %v after the notice, want runnerUpWait (%v) from it", first.Sub(start), runnerUpWait(delay))
	}
	h.dispatch(notice, 3) // a later node: no later deadline
	if at := c.wait.soonOf(w, false); !at.Equal(first) {
		t.Fatalf("a second notice moved soon from %v to %v", first, at)
	}
	if err := c.waitTurn(ctx, set, testKey, w, time.Minute); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	if waited < runnerUpWait(delay) || waited > 30*time.Second {
		t.Fatalf("the waiter's pause of a minute ended after %v, want runnerUpWait (%v)", waited, runnerUpWait(delay))
	}
	if w.woken {
		t.Fatal("a runner-up notice counted as a wake-up")
	}
	if at := c.wait.soonOf(w, false); !at.IsZero() {
		t.Fatalf("soon %v left after the wait ended for the attempt", at)
	}
	// Without a notice the pause is the waiter's own.
	ctx2, cancel := context.WithTimeout(ctx, 3*runnerUpWait(delay))
	defer cancel()
	if err := c.waitTurn(ctx2, set, testKey, w, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitTurn without a notice: %v, want the context's end before the minute's pause", err)
	}
}

// queuedHubWaiter subscribes c's wake hub to testKey for a queued waiter and joins one such
// waiter (ticket 1), left at the test's end. The turn channel is marked wanted before the key
// subscribes, so that the hub's connections never send its SUBSCRIBE: the turn channel's
// confirmations and messages are the test's alone.
func queuedHubWaiter(t *testing.T, c *Client) (*wakeHub, *waiter) {
	t.Helper()
	h := &c.wake
	h.mu.Lock()
	h.turnWanted = true
	h.subscribeLocked(testKey, true)
	h.mu.Unlock()
	set := mustLockKeys(t, testKey)
	w := c.wait.join(set, testKey, 1)
	t.Cleanup(func() { c.wait.leave(set, testKey, w) })
	return h, w
}

func mustLockKeys(t *testing.T, key string) lockKeys {
	t.Helper()
	set, err := newLockKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
