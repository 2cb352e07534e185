package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// TestRealQueueScripts: the queue's rules (queueCases) on a real redis-server, whose TIME and
// key expiry are its own.
func TestRealQueueScripts(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	queueCases(t, cluster.ClientsT(t)[0])
	queueElsewhereCases(t, cluster.ClientsT(t)[0])
	queueRunnerUpCases(t, cluster.ClientsT(t)[0]) // PUBLISH's count of receivers, as Redis gives it
}

// queuedOn counts the nodes on which member has a place in key's queue.
func queuedOn(ctx context.Context, admin []redis.UniversalClient, key, member string) int {
	q := newQueueKeys(key)
	n := 0
	for _, rc := range admin {
		if err := rc.ZScore(ctx, q.queue, member).Err(); err == nil {
			n++
		}
	}
	return n
}

// queuedOnEvery reports whether member has a place in key's queue on every node.
func queuedOnEvery(ctx context.Context, admin []redis.UniversalClient, key, member string) bool {
	return queuedOn(ctx, admin, key, member) == len(admin)
}

// acquireInBackground starts c.Acquire(ctx, key, ttl) on a goroutine of its own and returns
// the channel that gets its Lock (nil, with the error reported, when it failed).
func acquireInBackground(t *testing.T, ctx context.Context, c *Client, key string, ttl time.Duration) <-chan *Lock {
	got := make(chan *Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, ttl)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	return got
}

// queuedOnQuorum reports whether member has a place in key's queue on a majority of the
// nodes. That is all a waiter's first refused attempt is sure to leave: once a quorum has
// refused it, its acquire calls that the transport has not written yet are dropped (an
// attempt that has failed costs the nodes nothing more), so on a loaded machine the last
// nodes may see the waiter only at its next attempt, a retry pause later. Tests with one
// waiter behind a holder need no more (the release tells it its turn where it is queued,
// and the other nodes have no queue); design.md §3.10 says what a missing place costs.
func queuedOnQuorum(ctx context.Context, admin []redis.UniversalClient, key, member string) bool {
	return queuedOn(ctx, admin, key, member) > len(admin)/2
}

// TestRealQueueFIFO: six Clients (six processes, as far as the nodes can tell) start an
// Acquire of a held key one after the other, each once the one before is queued on every
// node; they get the lock in that order, each told its turn by the release before it (a
// retry delay of a minute leaves them nothing else to go by).
func TestRealQueueFIFO(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	const key = "queue:fifo"
	holder := newTestClient(t, cluster.ClientsT(t))
	held, err := holder.TryAcquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var mu sync.Mutex
	var order []int
	errs := make(chan error, n)
	for i := range n {
		c := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
		go func() {
			l, err := c.Acquire(ctx, key, 30*time.Second)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			errs <- l.Release(ctx)
		}()
		testutil.WaitFor(t, 10*time.Second, "the waiter to be queued on every node", func() bool {
			return queuedOnEvery(ctx, admin, key, c.id)
		})
	}
	// Status counts the six places on every node.
	st, err := holder.Status(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range st.Nodes {
		if ns.Waiters != n {
			t.Fatalf("node %d: Status counts %d waiters, want %d", ns.Node, ns.Waiters, n)
		}
	}
	start := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("order %v, %v for the six handoffs", order, time.Since(start))
	for i, w := range order {
		if w != i {
			t.Fatalf("order of service %v, want the order of arrival", order)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("six handoffs took %v", took)
	}
}

// TestRealQueueDeadHead: a waiter that died while it was the head of the queue (a place on
// every node, alive for a minute, whose Client never comes) delays the next one by about the
// grace and one retry pause after the release, not by the place's liveness: the release
// names the dead head, and the live waiter's next attempt finds the key free beyond the
// grace and takes it. The dead place is gone afterwards from the nodes where the grace had
// run out (a quorum at least: the live waiter took the key there).
func TestRealQueueDeadHead(t *testing.T) {
	const key = "queue:dead"
	cluster, admin, ctx, held := heldOnFive(t, key)
	q := newQueueKeys(key)
	placeWaiters(t, ctx, admin, q, map[string]float64{deadWaiter: 1}) // ahead of every real ticket
	const delay = 100 * time.Millisecond
	w := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(delay))
	got := acquireTimed(ctx, w, key)
	testutil.WaitFor(t, 10*time.Second, "the live waiter to be queued on every node", func() bool {
		return queuedOnEvery(ctx, admin, key, w.id)
	})
	took := releaseAndTime(t, ctx, held, got)
	t.Logf("the live waiter had the lock %v after the release (grace %v, retry pause at most %v)", took, queueGrace(delay), 3*delay/2)
	if took > 2*time.Second {
		t.Fatalf("the live waiter waited %v behind a dead head, want well under its place's minute", took)
	}
	wantPlaceGone(t, ctx, admin, q, deadWaiter, w.Quorum())
}

// TestRealCloseLeavesTheQueue: a Client closed while one of its Acquire calls waits in a key's
// queue takes its place out of the nodes' queues before Close returns, as a waiter that gives
// up does (leave.lua), so the next waiter is told its turn by the holder's release at once.
// Before, Close left the place to expire like a crash's: the release told the closed Client,
// nobody heard it, and the next waiter (a retry delay of a minute here) waited for the
// runner-up notice, 1.5 graces, 45 s.
func TestRealCloseLeavesTheQueue(t *testing.T) {
	const key = "queue:close"
	cluster, admin, ctx, held := heldOnFive(t, key)
	v := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	vGot := make(chan error, 1)
	go func() {
		_, err := v.Acquire(ctx, key, 30*time.Second)
		vGot <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the waiter to be closed to be queued on every node", func() bool {
		return queuedOnEvery(ctx, admin, key, v.id)
	})
	r := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	got := acquireTimed(ctx, r, key)
	testutil.WaitFor(t, 10*time.Second, "the next waiter to be queued on a quorum", func() bool {
		return queuedOnQuorum(ctx, admin, key, r.id)
	})
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-vGot; !errors.Is(err, ErrClosed) {
		t.Fatalf("the closed Client's Acquire: %v, want ErrClosed", err)
	}
	if n := queuedOn(ctx, admin, key, v.id); n != 0 {
		t.Fatalf("the closed Client still has a place on %d nodes after Close returned", n)
	}
	took := releaseAndTime(t, ctx, held, got)
	t.Logf("the next waiter had the lock %v after the release", took)
	if took > 5*time.Second {
		t.Fatalf("the next waiter had the lock %v after the release, want it told its turn at once", took)
	}
}

// deadWaiter is the id of a waiter whose Client never comes (it died).
const deadWaiter = "dead0000000000000000000000000000"

// heldOnFive starts five nodes and takes key on them (TryAcquire, TTL 30 s), for tests of the
// waiters behind that holder: the cluster, admin clients of its nodes, the test's context and
// the lock.
func heldOnFive(t *testing.T, key string) (*redisproc.Cluster, []redis.UniversalClient, context.Context, *Lock) {
	t.Helper()
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	held, err := newTestClient(t, cluster.ClientsT(t)).TryAcquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return cluster, admin, ctx, held
}

// placeWaiters gives each member of places a place in q on every node, at its score (its
// ticket), alive for a minute: waiters whose Clients never come, or that a test takes out by
// hand.
func placeWaiters(t *testing.T, ctx context.Context, admin []redis.UniversalClient, q queueKeys, places map[string]float64) {
	t.Helper()
	for _, rc := range admin {
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		alive := now.Add(time.Minute).UnixMilli()
		for m, score := range places {
			rc.ZAdd(ctx, q.queue, redis.Z{Score: score, Member: m})
			rc.HSet(ctx, q.waiters, m, alive)
		}
		rc.PExpire(ctx, q.queue, time.Minute)
		rc.PExpire(ctx, q.waiters, time.Minute)
	}
}

// timedLock is when an Acquire had the lock, or its error.
type timedLock struct {
	at  time.Time
	err error
}

// acquireTimed runs c.Acquire of key in the background; the lock is released as soon as it
// is had, and the moment it was had (or the error) comes on the channel.
func acquireTimed(ctx context.Context, c *Client, key string) <-chan timedLock {
	got := make(chan timedLock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 30*time.Second)
		r := timedLock{at: time.Now(), err: err}
		if err == nil {
			r.err = l.Release(ctx)
		}
		got <- r
	}()
	return got
}

// releaseAndTime releases held and returns how long after that the Acquire of got had its lock.
func releaseAndTime(t *testing.T, ctx context.Context, held *Lock, got <-chan timedLock) time.Duration {
	t.Helper()
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.at.Sub(released)
}

// wantPlaceGone checks that member's place in q is gone from at least quorum nodes.
func wantPlaceGone(t *testing.T, ctx context.Context, admin []redis.UniversalClient, q queueKeys, member string, quorum int) {
	t.Helper()
	gone := 0
	for _, rc := range admin {
		if err := rc.ZScore(ctx, q.queue, member).Err(); errors.Is(err, redis.Nil) {
			gone++
		}
	}
	if gone < quorum {
		t.Fatalf("the place of %s is gone from %d nodes, want a quorum (%d)", member, gone, quorum)
	}
}

// TestRealQueueDeadHeadFarBack: the live waiter behind a waiter that died was far back in the
// queue when it last tried, so its pause is long (ten places ahead: five to fifteen retry
// delays, at most queuePollMax's). The places ahead of the dead one are then served (taken out
// here), and the release tells the dead head its turn, which nobody hears, so the nodes tell
// the live waiter that it is the runner-up (lua/queue.lua, qtell): it tries again by
// runnerUpWait, after the grace, and takes the key then, not at the end of its long pause.
// Before the runner-up was told, it waited out that pause: 0.45 to 1.4 s after the release
// with 32 processes, in a helper's stress run.
func TestRealQueueDeadHeadFarBack(t *testing.T) {
	const key = "queue:dead:far"
	cluster, admin, ctx, held := heldOnFive(t, key)
	q := newQueueKeys(key)
	places := map[string]float64{deadWaiter: 100}
	var served []any // places ahead of the dead one, all of them older than any real ticket
	for i := range 9 {
		m := fmt.Sprintf("served%026d", i)
		places[m] = float64(1 + i)
		served = append(served, m)
	}
	placeWaiters(t, ctx, admin, q, places)
	const delay = 100 * time.Millisecond
	w := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(delay))
	got := acquireTimed(ctx, w, key)
	testutil.WaitFor(t, 10*time.Second, "the live waiter to be queued on a quorum", func() bool {
		return queuedOnQuorum(ctx, admin, key, w.id)
	})
	// Its attempt was refused with ten places ahead: its pause is at least half of
	// queuePause(delay, 10), which is a second.
	if p := queuePause(delay, 10) / 2; p < 5*delay {
		t.Fatalf("the far waiter's shortest pause is %v, want one much longer than a retry pause", p)
	}
	for _, rc := range admin {
		rc.ZRem(ctx, q.queue, served...)
		for _, m := range served {
			rc.HDel(ctx, q.waiters, m.(string))
		}
	}
	wantServedSoon(t, releaseAndTime(t, ctx, held, got), delay, "the runner-up", "a dead head")
	wantPlaceGone(t, ctx, admin, q, deadWaiter, w.Quorum())
}

// wantServedSoon checks that who had the lock within two retry delays (delay) of the release,
// behind head, which never came: about runnerUpWait, not the pause of a waiter that was ten
// places back when it last tried.
func wantServedSoon(t *testing.T, took, delay time.Duration, who, head string) {
	t.Helper()
	t.Logf("%s had the lock %v after the release (grace %v, runnerUpWait %v, a pause with ten ahead at least %v)",
		who, took, queueGrace(delay), runnerUpWait(delay), queuePause(delay, 10)/2)
	if took > 2*delay {
		t.Fatalf("%s waited %v behind %s, want about runnerUpWait (%v), under two retry delays",
			who, took, head, runnerUpWait(delay))
	}
}

// TestRealQueueInertHeadFarBack: the head hears its turn (a connection listens on its turn
// channel on every node, so no runner-up notice goes out) and never comes, as when its process
// dies or stops just then. The live waiter behind it was far back when it last tried, so its
// own pause is long. The Client that released tries the key again at once, as a service
// looping on it does, and is turned away from the free key with waiters ahead; it comes back
// by runnerUpWait (turn.pause), after the grace, which passes the inert head over and tells
// the live waiter its turn: it has the lock within one retry delay of the release. Before,
// the releasing Client came back after its own place's pause (here ten waiters ahead: half a
// second or more), and with 32 processes on one key such a head cost 0.43-0.51 s in a
// helper's runs (design.md §3.10).
func TestRealQueueInertHeadFarBack(t *testing.T) {
	const key = "queue:inert:far"
	const delay = 100 * time.Millisecond
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	looper := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(delay))
	held, err := looper.TryAcquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q := newQueueKeys(key)
	const inert = "inert000000000000000000000000000"
	places := map[string]float64{inert: 100}
	var served []any // places ahead of the inert head, older than any real ticket
	for i := range 9 {
		m := fmt.Sprintf("served%026d", i)
		places[m] = float64(1 + i)
		served = append(served, m)
	}
	placeWaiters(t, ctx, admin, q, places)
	for _, rc := range admin { // the inert head's process listens, and does nothing else
		ps := rc.Subscribe(ctx, turnChannel(inert))
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
	}
	w := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(delay))
	got := acquireTimed(ctx, w, key)
	testutil.WaitFor(t, 10*time.Second, "the live waiter to be queued on a quorum", func() bool {
		return queuedOnQuorum(ctx, admin, key, w.id)
	})
	// Eight more places behind the live waiter and ahead of the looping Client's next
	// Acquire: refused, that one has ten waiters ahead and would pause half a second or more.
	ticket, err := admin[0].ZScore(ctx, q.queue, w.id).Result()
	if err != nil {
		t.Fatal(err)
	}
	behind := map[string]float64{}
	for i := range 8 {
		behind[fmt.Sprintf("behind%026d", i)] = ticket + float64(1+i)
	}
	placeWaiters(t, ctx, admin, q, behind)
	for _, rc := range admin {
		rc.ZRem(ctx, q.queue, served...)
		for _, m := range served {
			rc.HDel(ctx, q.waiters, m.(string))
		}
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	again := make(chan error, 1)
	go func() { // the looping Client's next Acquire, which waits behind them all
		_, err := looper.Acquire(lctx, key, 30*time.Second)
		again <- err
	}()
	r := <-got
	stop()
	if err := <-again; !errors.Is(err, context.Canceled) {
		t.Fatalf("the looping Client's next Acquire: %v, want it still waiting when cancelled", err)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantServedSoon(t, r.at.Sub(released), delay, "the live waiter", "an inert head")
	wantPlaceGone(t, ctx, admin, q, inert, w.Quorum())
}

// TestRealQueueLeave: an Acquire that gives up (its context ends) takes its Client's place
// out of the queue on every node, so that nobody waits for it: the next waiter, queued behind
// it, is told its turn by the release (its retry delay of a minute leaves it nothing else).
func TestRealQueueLeave(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	const key = "queue:leave"
	holder := newTestClient(t, cluster.ClientsT(t))
	held, err := holder.TryAcquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	quitter := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	qctx, cancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx, key, 30*time.Second)
		quit <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the first waiter to be queued on a quorum", func() bool {
		return queuedOnQuorum(ctx, admin, key, quitter.id)
	})
	next := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	got := make(chan error, 1)
	go func() {
		l, err := next.Acquire(ctx, key, 30*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the second waiter to be queued on a quorum", func() bool {
		return queuedOnQuorum(ctx, admin, key, next.id)
	})
	cancel()
	if err := <-quit; !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	settle(quitter)
	q := newQueueKeys(key)
	for i, rc := range admin {
		if err := rc.ZScore(ctx, q.queue, quitter.id).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("node %d: the place of the Acquire that gave up is still there (%v)", i, err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second waiter was not told its turn after the first gave up")
	}
}

// TestRealQueueWithoutQueueCommands: a node user with the lock's own commands but none of the
// queue's (an ACL written for an earlier version) still locks, hands over and releases: the
// scripts skip the queue, and a waiter takes the lock by its retry pause.
func TestRealQueueWithoutQueueCommands(t *testing.T) {
	const pw = "q1Secret"
	acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "&*", "-@all"}, strings.Fields(aclCommands)...)
	acl = append(acl, "+publish", "+subscribe", "+unsubscribe")
	cluster := redisproc.StartT(t, 5, redisproc.Config{ExtraArgs: acl})
	userClients := func() []redis.UniversalClient { return aclUserClients(t, cluster.Addrs(), pw) }
	ctx := ctxT(t, 30*time.Second)
	a := newTestClient(t, userClients())
	b := newTestClient(t, userClients(), WithRetryDelay(100*time.Millisecond))
	const key = "queue:acl"
	held, err := a.TryAcquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, key, 20*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the second client to wait on the key", func() bool { return isWaiting(b, key) })
	if st, err := a.Status(ctx, key); err != nil {
		t.Fatalf("status by a user without the queue's commands: %v", err)
	} else if st.Nodes[0].Waiters != -1 {
		t.Fatalf("status by a user without ZCARD: %d waiters, want -1 (unknown)", st.Nodes[0].Waiters)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release by a user without the queue's commands: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter did not acquire: %v", err)
	}
	// Release returns once a quorum deleted the key; the other nodes' releases may still be
	// on their way. Close waits for them.
	a.Close()
	b.Close()
	for i, rc := range cluster.ClientsT(t) {
		if n := rc.Exists(ctx, key, newQueueKeys(key).queue).Val(); n != 0 {
			t.Fatalf("node %d: %d of the key and its queue left", i, n)
		}
	}
}

// TestRealQueueHandoffInsideOneClient: eight goroutines of one Client take turns on one key
// with no hold and no pause, and a retry delay of a minute, so that every handoff must come
// from the release telling the next waiter (a missed one would wait at least 30 s): 800
// acquisitions end well within that. Before, an Acquire's first attempt was not yet a
// waiter here, so a release made while it was in flight left it to its retry pause (one
// handoff in about forty), and a turn told by the slower nodes after the next attempt had
// begun was counted again, leaving the next waiter unwoken (one in four).
func TestRealQueueHandoffInsideOneClient(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	c := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	ctx := ctxT(t, 5*time.Minute)
	const goroutines, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	var last Token
	var mu sync.Mutex
	start := time.Now()
	for range goroutines {
		wg.Go(func() {
			for range each {
				l, err := c.Acquire(ctx, "queue:inproc", 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if l.Token() <= last {
					errs <- fmt.Errorf("token %d after %d", l.Token(), last)
				}
				last = l.Token()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d handoffs in %v", goroutines*each, took)
	if took > 25*time.Second {
		t.Fatalf("%d handoffs took %v: some waited for the retry pause (at least 30 s) instead of being told", goroutines*each, took)
	}
}

// TestRealQueueReleaseWhereRefused: a waiter whose acquire won on a quorum but was refused on
// the other nodes (there the release before it had not come yet: here another holder's key,
// "late", stands in for it) keeps its place on those nodes, since no acquire took it out
// there. Its release takes that place out as well (lua/queue.lua, qelsewhere) and tells the
// next waiter its turn there, so that no place of its refuses the waiters behind it.
// Then four handoffs in a row, each with two other nodes late, and a retry delay of a minute:
// each next waiter is told its turn by a quorum and has the lock within moments. Before,
// the places left behind piled up on different nodes until a waiter found a stale head on
// more than two of them and waited out its retry pause (the first lagging handoff after
// another stalled).
func TestRealQueueReleaseWhereRefused(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	const key = "queue:refused"
	late := func(nodes ...int) {
		for _, i := range nodes {
			if err := admin[i].Set(ctx, key, "late", 30*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	arrived := func(nodes ...int) {
		for _, i := range nodes {
			if err := admin[i].Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	holder := newTestClient(t, cluster.ClientsT(t))
	cur, err := holder.TryAcquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	got := make(chan *Lock, n)
	waiters := make([]*Client, n)
	for i := range waiters {
		c := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
		waiters[i] = c
		go func() {
			l, err := c.Acquire(ctx, key, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testutil.WaitFor(t, 10*time.Second, "the waiter to be queued on every node", func() bool {
			return queuedOnEvery(ctx, admin, key, c.id)
		})
	}
	next := func(what string) *Lock {
		t.Helper()
		select {
		case l := <-got:
			if l == nil {
				t.FailNow()
			}
			settle(l.c) // every node has answered its acquire
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the next waiter has no lock 10 s after the release (its retry pause is 30-90 s)", what)
			return nil
		}
	}

	// Nodes 3 and 4 late: the first waiter wins on 0-2 and is refused, and keeps its place, on 3 and 4.
	late(3, 4)
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := next("the first handoff")
	if q := queuedOn(ctx, admin, key, first.c.id); q != 2 {
		t.Fatalf("the first waiter, refused on two nodes, has a place on %d nodes, want 2", q)
	}
	arrived(3, 4)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	settle(first.c)
	if q := queuedOn(ctx, admin, key, first.c.id); q != 0 {
		t.Fatalf("after its release the first waiter still has a place on %d nodes", q)
	}
	cur = next("the second handoff")
	// The second waiter attempts once a quorum has told it its turn, which can be before the
	// first's release reaches a slow node (a CI run under -race saw it): there its acquire is
	// refused by the first's key and its place stays. That is a race, not a place left
	// behind (those were checked gone above), so it is logged, not failed.
	for i, rc := range admin {
		if v := rc.Get(ctx, key).Val(); v != cur.ID() {
			t.Logf("node %d: the second waiter's key is not there (%q): its acquire came before the first's release", i, v)
		}
	}
	// Four more handoffs, each with two nodes late, a different pair each time.
	for i := range n - 2 {
		lag := []int{(2 * i) % 5, (2*i + 1) % 5}
		late(lag...)
		start := time.Now()
		_ = cur.Release(ctx) // the late nodes hold another key: not a quorum confirmed, maybe
		cur = next(fmt.Sprintf("handoff %d, nodes %v late", i+3, lag))
		arrived(lag...)
		t.Logf("handoff %d with nodes %v late: %v", i+3, lag, time.Since(start))
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range waiters {
		settle(c)
	}
	for i, rc := range admin {
		if n := rc.Exists(ctx, key, newQueueKeys(key).queue).Val(); n != 0 {
			t.Fatalf("node %d: %d of the key and its queue left after the last release", i, n)
		}
	}
}

// TestRealQueueHotKeyRollingLag: Clients (processes, as far as the nodes can tell) loop
// Acquire / hold 2 ms / Release on one key for 4 s through proxies that delay two of the five
// nodes, a different pair every period, with a retry delay of a minute: every handoff must
// come from the nodes telling the next waiter its turn. No gap between two acquisitions may
// reach 2 s, and no two holders may overlap.
//
// Eight Clients of one goroutine each, 3 ms each way, a new pair every 30 ms: before,
// handoffs stalled for the retry pause in most runs. The first attempt of a waiter, refused
// by a quorum, dropped its call to a slow node (queued behind its own release there), so the
// queues disagreed on their head and nobody was told its turn by a quorum; and a head whose
// attempt, kicked by a release's turns from the fast nodes, failed because the slow nodes
// had not applied that release yet dropped their turns as no news.
//
// Several goroutines per Client, 40 and 100 ms each way, a new pair every 100 ms: before,
// a stall until the end of the run in most runs, in three ways, each a turn of the Client's
// next waiter that nobody counted. The turns of a release that had kicked an attempt which
// then won were dropped as no news also from the nodes where that attempt never took the
// key (wakeHub.turnDone). A release's reply of 2 that came after the node timeout was
// dropped with the late reply (quorumOp.Deliver). And a release sent nothing to a node where
// its acquire had never been written, so the Client's place there kept the ticket of the
// waiter before, ahead of other Clients' places that stood behind it elsewhere: the nodes'
// queues disagreed on their head, with every key free (quorumOp.tidy, qelsewhere's reply 3).
func TestRealQueueHotKeyRollingLag(t *testing.T) {
	for _, tc := range []struct {
		name                string
		clients, goroutines int
		lag, period         time.Duration
	}{
		{"8x1-3ms", 8, 1, 3 * time.Millisecond, 30 * time.Millisecond},
		{"2x4-40ms", 2, 4, 40 * time.Millisecond, 100 * time.Millisecond},
		{"4x4-100ms", 4, 4, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rollingLag(t, tc.clients, tc.goroutines, tc.lag, tc.period)
		})
	}
}

// rollingLag is one case of TestRealQueueHotKeyRollingLag.
func rollingLag(t *testing.T, clients, goroutines int, lag, period time.Duration) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	proxies := make([]*faultproxy.Proxy, 5)
	for i, a := range cluster.Addrs() {
		p, err := faultproxy.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		proxies[i] = p
		t.Cleanup(func() { p.Close() })
	}
	const key = "queue:rolling-lag"
	cs := make([]*Client, clients)
	for i := range cs {
		nodes := make([]redis.UniversalClient, len(proxies))
		for j, p := range proxies {
			rc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rc.Close() })
			nodes[j] = rc
		}
		cs[i] = newTestClient(t, nodes, WithRetryDelay(time.Minute))
	}
	const run = 4 * time.Second // before, the stalls came 0.1-4.4 s into the run
	ctx, cancel := context.WithTimeout(ctxT(t, 60*time.Second), run)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { // the lag moves on every period
		for i := 0; ctx.Err() == nil; i++ {
			for j, p := range proxies {
				d := time.Duration(0)
				if j == i%5 || j == (i+2)%5 {
					d = lag
				}
				p.SetDelay(d, d)
			}
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	})
	var holds hotKeyHolds
	for _, c := range cs {
		for range goroutines {
			wg.Go(func() {
				for ctx.Err() == nil {
					l, err := c.Acquire(ctx, key, 10*time.Second)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("Acquire: %v", err)
						}
						return
					}
					holds.hold(l)
				}
			})
		}
	}
	start := time.Now()
	wg.Wait()
	n, longest := holds.check(t, start)
	t.Logf("%d acquisitions in %v, the longest gap %v", n, run, longest)
}

// hotKeyHolds records the holds of one key by many goroutines (TestRealQueueHotKeyRollingLag,
// TestRealQueueGiveUps): holders that overlap, and when each hold began.
type hotKeyHolds struct {
	mu               sync.Mutex
	stamps           []time.Time
	inside, overlaps atomic.Int32
}

// hold records l's hold, holds it 2 ms and releases it (a slow node may answer the release
// after the node timeout: its error is not the test's concern).
func (h *hotKeyHolds) hold(l *Lock) {
	if h.inside.Add(1) != 1 {
		h.overlaps.Add(1)
	}
	h.mu.Lock()
	h.stamps = append(h.stamps, time.Now())
	h.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	h.inside.Add(-1)
	_ = l.Release(context.Background())
}

// check fails t if two holders overlapped or if 2 s passed without an acquisition between
// start and now (a handoff that waited for the retry pause of a minute). It returns the
// number of holds and the longest gap.
func (h *hotKeyHolds) check(t *testing.T, start time.Time) (int, time.Duration) {
	t.Helper()
	if n := h.overlaps.Load(); n > 0 {
		t.Fatalf("%d acquisitions while another holder had the lock", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var longest time.Duration
	prev := start
	for _, s := range append(h.stamps, time.Now()) {
		longest = max(longest, s.Sub(prev))
		prev = s
	}
	if longest >= 2*time.Second {
		t.Fatalf("a gap of %v between acquisitions: a handoff waited for the retry pause", longest)
	}
	return len(h.stamps), longest
}

// TestRealQueueGiveUps: four Clients of four goroutines each loop Acquire / hold 2 ms /
// Release on one key for 4 s, with 30 % of the Acquire calls on a context that ends after
// 5-40 ms, and a retry delay of a minute: waiters give up while queued, at the head or
// behind it, and every handoff must still come from the nodes' turns. No gap between two
// acquisitions may reach 2 s, and no two holders may overlap. Before, a newcomer's run of
// this shape stalled until its end in 5 of 6 runs, in three ways: a Client's next Acquire
// queued it on a node before the leave of the one that gave up landed there and took the new
// place out (TestLeaveIsPendingRelease); a head that gave up took the kick it had not acted
// on with it (TestWaitQueueHeir); and an attempt that its context ended before any node
// answered spent the turns that had kicked it (TestTurnCounting).
func TestRealQueueGiveUps(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	const key = "queue:give-ups"
	cs := make([]*Client, 4)
	for i := range cs {
		cs[i] = newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	}
	const run = 4 * time.Second
	ctx, cancel := context.WithTimeout(ctxT(t, 60*time.Second), run)
	defer cancel()
	var wg sync.WaitGroup
	var holds hotKeyHolds
	var gaveUp atomic.Int32
	for _, c := range cs {
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					actx, acancel := ctx, context.CancelFunc(func() {})
					if rand.IntN(10) < 3 {
						actx, acancel = context.WithTimeout(ctx, time.Duration(5+rand.IntN(36))*time.Millisecond)
					}
					l, err := c.Acquire(actx, key, 10*time.Second)
					acancel()
					if err != nil {
						if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("Acquire: %v", err)
							return
						}
						gaveUp.Add(1)
						continue
					}
					holds.hold(l)
				}
			})
		}
	}
	start := time.Now()
	wg.Wait()
	n, longest := holds.check(t, start)
	t.Logf("%d acquisitions and %d Acquire calls given up in %v, the longest gap %v", n, gaveUp.Load(), run, longest)
}

// TestRealQueueLeaveAfterKeptCall: a queued attempt refused by a quorum keeps its call to a
// slow node (there it waits behind the Client's own release: attempt.fail); when the Acquire
// then gives up, the leave goes behind that call and its undo on each node, so the call
// cannot land after the leave and put back the place of a Client that no longer waits (it
// did, on the slow node, in every run of a newcomer's probe before the leave was ordered).
func TestRealQueueLeaveAfterKeptCall(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	admin := cluster.ClientsT(t)
	proxies := make([]*faultproxy.Proxy, 3)
	for i, addr := range cluster.Addrs() {
		p, err := faultproxy.Start(addr)
		if err != nil {
			t.Fatal(err)
		}
		proxies[i] = p
		t.Cleanup(func() { p.Close() })
	}
	proxied := func() []redis.UniversalClient {
		nodes := make([]redis.UniversalClient, len(proxies))
		for j, p := range proxies {
			rc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rc.Close() })
			nodes[j] = rc
		}
		return nodes
	}
	ctx := ctxT(t, 60*time.Second)
	const key = "queue:kept-call"
	a := newTestClient(t, proxied(), WithRetryDelay(time.Minute))
	b := newTestClient(t, proxied(), WithRetryDelay(time.Minute))
	la, err := a.Acquire(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns at a quorum; the test needs A's key on all three nodes before B tries,
	// for A's release below to be agreed by nodes 0 and 1 while node 2 is slow. (A CI run
	// under load had B's first attempt reach node 1 before A's, so A never held it there,
	// and A's release got 1 of 3.)
	testutil.WaitFor(t, 10*time.Second, "A's key on every node", func() bool {
		for _, rc := range admin {
			if rc.Get(ctx, key).Val() != la.ID() {
				return false
			}
		}
		return true
	})
	got := acquireInBackground(t, ctx, b, key, 30*time.Second)
	testutil.WaitFor(t, 10*time.Second, "B to be queued on every node", func() bool {
		return queuedOnEvery(ctx, admin, key, b.id)
	})
	proxies[2].SetDelay(300*time.Millisecond, 300*time.Millisecond)
	if err := la.Release(ctx); err != nil { // returns at a quorum: node 2's is on its way
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	// A wants the key again for 100 ms: B holds it on nodes 0 and 1, so A's attempt is refused
	// there, and its call to node 2, behind its release, is kept; then A gives up.
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = a.Acquire(actx, key, 30*time.Second)
	cancel()
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("A's second Acquire: %v, want ErrNotAcquired", err)
	}
	settle(a) // its release, the kept call, its undo and the leave have all answered
	if n := queuedOn(ctx, admin, key, a.id); n != 0 {
		t.Fatalf("A gave up, and still has a place on %d nodes", n)
	}
	proxies[2].SetDelay(0, 0)
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealQueueReleaseWhereNeverSent: inside one Client, a waiter told its turn by the fast
// nodes wins there while its acquire call to a slow node still waits behind the previous
// holder's release to that node; it releases at once, which cancels that call, so our key
// never reaches the slow node. The release must still go there for the Client's place,
// which the previous release left standing for this waiter: else nothing of the Client
// reaches that node again, and the place stays at the head of a free key until its
// liveness runs out (a newcomer's stress run found such places on the slow node after every
// run with one node 3 ms late).
func TestRealQueueReleaseWhereNeverSent(t *testing.T) {
	admin, nodes, slow := slowLastNode(t, 3, redis.Options{MaxRetries: -1})
	ctx := ctxT(t, 30*time.Second)
	const key = "queue:never-sent"
	c := newTestClient(t, nodes, WithRetryDelay(time.Minute))
	for round := range 3 {
		first, err := c.Acquire(ctx, key, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		settle(c)
		got := acquireInBackground(t, ctx, c, key, 30*time.Second)
		testutil.WaitFor(t, 10*time.Second, "the second waiter to be queued on every node", func() bool {
			return queuedOnEvery(ctx, admin, key, c.id)
		})
		slow.SetDelay(40*time.Millisecond, 40*time.Millisecond)
		if err := first.Release(ctx); err != nil { // returns at a quorum: node 2's is on its way
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			t.FailNow()
		}
		// At once: its acquire call to node 2 most likely still waits behind the first release.
		if err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}
		settle(c) // every call is final: answered, or given up
		slow.SetDelay(0, 0)
		if n := queuedOn(ctx, admin, key, c.id); n != 0 {
			t.Fatalf("round %d: nobody waits, and the Client still has a place on %d nodes", round, n)
		}
		for i, a := range admin {
			if n := a.Exists(ctx, key).Val(); n != 0 {
				t.Fatalf("round %d: node %d still has the key", round, i)
			}
		}
	}
}
