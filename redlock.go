package redlock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client acquires locks on a fixed set of independent Redis nodes. It is safe for
// concurrent use by many goroutines. Create it with [New]; call [Client.Close] when done so
// that background work (undoing failed acquires, replies from slow nodes) is waited for.
type Client struct {
	nodes  []node
	quorum int
	cfg    config

	mu        sync.RWMutex // guards closed against bg.Add racing with Close's Wait
	closed    bool
	closeDone chan struct{} // closed when the first Close has finished

	heldMu  sync.Mutex
	held    map[*Lock]struct{} // locks acquired and not yet released, for Close
	wait    waitQueues         // this client's Acquire calls waiting for a key, in arrival order
	wake    wakeHub            // releases announced by other processes, for the waiters (wakehub.go)
	renewer renewer            // the renewals of every Do of this client (renew.go)
	bg      sync.WaitGroup     // calls in flight and the background work they started
	senders sync.WaitGroup     // the transport's sender goroutines (transport.go)
	pending pendingReleases    // releases not yet final on every node (pending.go)
}

// New returns a Client over the given nodes. Each element must be a distinct, non-nil
// go-redis client of an independent Redis server (or cluster); two clients with the same
// address count as the same node. The quorum is a majority of the nodes, raised by
// [WithAmnesiaTolerance]. New sends one command, INFO server, to every node, and refuses two
// nodes that are the same server under two addresses (same run_id); it waits at most
// min(node timeout, 1 s) for that, and a node that does not answer in time is not checked.
// It returns an error matching ErrInvalidArgument for no nodes, a nil node, a node given
// twice (the same client, the same address, or the same run_id), a nil option or an option
// out of range. Sentinel-managed clients (redis.NewFailoverClient) have no address of their
// own and are told apart by run_id alone. The clients stay owned by the caller: Close does
// not close them.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	ns, err := newNodes(nodes)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return nil, invalidf("option %d is nil", i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.renewFraction+cfg.cancelMargin >= 1 {
		return nil, invalidf("renew fraction %v plus cancel margin %v must be below 1", cfg.renewFraction, cfg.cancelMargin)
	}
	q, err := quorumSize(len(ns), cfg.amnesiaTolerance)
	if err != nil {
		return nil, err
	}
	c := &Client{nodes: ns, quorum: q, cfg: cfg, closeDone: make(chan struct{}), held: map[*Lock]struct{}{}}
	for i := range c.nodes {
		c.nodes[i].q = newNodeQueue(c, i, c.nodes[i].client)
	}
	c.renewer.c = c
	c.wake.c, c.wake.linger = c, wakeLinger
	if err := c.checkDistinct(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Quorum returns how many nodes must agree for an acquire, extend or release to succeed.
func (c *Client) Quorum() int { return c.quorum }

// Nodes returns the number of nodes.
func (c *Client) Nodes() int { return len(c.nodes) }

// Close shuts the client down: Acquire calls waiting between attempts return ErrClosed at
// once; Close waits for every call in flight (a running [Client.Do] included) and the
// background work they started (undoing failed acquires, replies arriving
// after an outcome was decided), then releases every Lock of this client that is still held,
// waits for those releases (each bounded as a Release is), and makes every later call fail
// with ErrClosed. A Release after Close returns an error matching ErrReleased when Close
// released the lock, ErrClosed when it could not. So the shutdown order is: stop the work
// that uses the locks, then Close the Client, then close the node clients (Close does not
// close them). Close is idempotent and safe to call concurrently with other calls; a second
// Close waits for the first. A node that hangs delays Close until its go-redis client gives
// up on the calls already written to it: with go-redis v9.23's defaults (a 5 s read timeout,
// 3 retries) that can take 15 s or more; clients with ContextTimeoutEnabled stop at the exec
// budget, max(4 × node timeout, 1 s). Close always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if !first {
		<-c.closeDone
		return nil
	}
	c.wait.closeAll() // Acquire calls waiting for a key return ErrClosed at once
	c.wake.close()    // the subscriptions and their goroutines
	c.bg.Wait()
	c.heldMu.Lock()
	left := make([]*Lock, 0, len(c.held))
	for l := range c.held {
		left = append(left, l)
	}
	c.heldMu.Unlock()
	var wg sync.WaitGroup
	for _, l := range left {
		wg.Go(func() { _ = l.release(context.Background(), true) })
	}
	wg.Wait()
	c.bg.Wait()
	c.senders.Wait()
	close(c.closeDone)
	return nil
}

// remember records a lock this client holds, for Close; forget removes it.
func (c *Client) remember(l *Lock) {
	c.heldMu.Lock()
	c.held[l] = struct{}{}
	c.heldMu.Unlock()
}

func (c *Client) forget(l *Lock) {
	c.heldMu.Lock()
	delete(c.held, l)
	c.heldMu.Unlock()
}

// begin registers a call; end must follow when it returns.
func (c *Client) begin() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	c.bg.Add(1)
	return nil
}

func (c *Client) end() { c.bg.Done() }

// lockArgs validates a key and a TTL and returns the TTL in whole milliseconds and the lock's
// keys (the key and its fence counter).
func (c *Client) lockArgs(key string, ttl time.Duration) (time.Duration, lockKeys, error) {
	set, err := newLockKeys(key)
	if err != nil {
		return 0, lockKeys{}, err
	}
	ttl, err = c.checkKeyTTL(ttl)
	if err != nil {
		return 0, lockKeys{}, err
	}
	return ttl, set, nil
}

// checkKeyTTL validates a lock's TTL as checkTTL does, and also the lifetime of its keys,
// ttl + lock-delay, which must not exceed MaxTTL.
func (c *Client) checkKeyTTL(ttl time.Duration) (time.Duration, error) {
	ttl, err := checkTTL(ttl, c.cfg.driftFactor)
	if err != nil {
		return 0, err
	}
	if d := c.cfg.lockDelay; ttl > MaxTTL-d { // d < MaxTTL (WithLockDelay), so no overflow
		return 0, invalidf("ttl %v plus lock delay %v exceeds MaxTTL (%v)", ttl, d, MaxTTL)
	}
	return ttl, nil
}

// TryAcquire makes one attempt to acquire the lock named key for ttl. It sends the acquire
// script to every node in parallel and returns as soon as the outcome is known: a quorum
// agreed on a fencing token with positive validity time left, or a quorum became
// impossible. It never waits for a node's answer longer than the node timeout counted from
// the write ([WithNodeTimeout]), even when that node's go-redis client ignores context
// deadlines; under load a call may first wait in the node's queue, which the validity time
// bounds. TryAcquire does not queue behind this client's Acquire calls waiting for the same
// key (see [Client.Acquire]). Safe for concurrent use.
//
// ttl is truncated to whole milliseconds and must leave positive validity after the clock
// drift allowance ([Drift]), at most [MaxTTL] together with the lock-delay
// ([WithLockDelay]), which the keys live on top of ttl. The lock's validity deadline is
// start + ttl − drift, where start is taken before the first command is sent; see
// [Lock.Until].
//
// Errors: ErrInvalidArgument (nothing sent) for a nil ctx, an empty key, a key longer than
// [MaxKeyLen] or with the reserved prefix [FencePrefix], or a bad ttl; a *QuorumError matching ErrNotAcquired when the lock is held
// elsewhere, too many nodes failed, or the validity ran out; when ctx ends, an error matching
// both ErrNotAcquired and ctx.Err(). On any failure the acquire is undone on every node,
// including those that have not answered yet (calls not yet written are dropped instead),
// and ctx's cancellation does not reach the undo, so no key is left behind.
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
	return c.acquire(ctx, set, newHolderID(), ttl)
}

// Acquire acquires the lock named key for ttl, retrying until it succeeds, the retry limit
// is reached ([WithRetryLimit]; none by default) or ctx ends. Arguments and errors are those
// of [Client.TryAcquire]; when ctx ends, the error matches ErrNotAcquired, ctx.Err() and,
// if an attempt was made, the last attempt's *QuorumError.
//
// Waiting: the Acquire calls of one Client that wait for the same key queue in arrival
// order, and only the first of them makes attempts; a new Acquire of a key that already has
// waiters here joins the back of that queue instead of trying first (no barging). A Release
// by a Lock of this Client wakes the first waiter at once; a Release by another Client or
// process wakes it once a quorum of nodes has announced the release on the key's wake-up
// channel ([WakeChannelPrefix] + key; the Client subscribes to it on every node while it has
// waiters for the key; see [WithoutWakeups]), typically within a round trip of the release.
// When waiters of other processes answer the same releases, a woken first waiter gives way
// to those that have waited longer: before its attempt it waits min(retry delay / 50, 1 ms)
// for each of the first 8 releases it has not yet lost (at most 8 ms). A wake-up only makes
// the first waiter try; when none arrives (a node down, an ACL without the channel, a
// message lost), the first waiter retries after a pause drawn from [d/2, 3d/2) with d the
// retry delay ([WithRetryDelay]) when the key was held elsewhere, and d doubled for each
// consecutive attempt that failed without any node reporting a holder (nodes timing out or
// failing: overload, not contention), up to 32 d or one second, whichever is larger. A retry limit counts this
// call's own attempts, not its time in the queue. After [Client.Close], Acquire returns
// ErrClosed (which does not match ErrNotAcquired), at once also for calls that were waiting.
// Safe for concurrent use.
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
	key := set.waitKey()
	var wt *waiter // our place in this client's queue for key, once we are in it
	defer func() {
		if wt != nil {
			c.wait.leave(set, wt)
			c.unsubscribe(set)
		}
	}()
	join := func() {
		wt = c.wait.join(set)
		c.subscribe(set) // releases by other processes wake the head (wakehub.go)
	}
	var last *QuorumError // the last attempt's detail, kept for the error when ctx ends
	overloaded := 0       // consecutive attempts that failed without any node reporting a holder
	if c.wait.busy(key) {
		join()
		if err := c.waitTurn(ctx, set, wt, jitter(c.cfg.retryDelay)); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
	}
	losses := 0 // attempts made on a wake-up that another contender beat
	for attempts = 1; ; attempts++ {
		// Woken by a release while other processes' waiters answer it too: give way to those
		// that have waited longer (seniorityDelay).
		woken := wt != nil && wt.woken
		if woken && c.crowded(set) && c.giveWay(ctx, seniorityDelay(c.cfg.retryDelay, losses)) != nil {
			break
		}
		mark := c.wake.mark() // a release announced from now on gets us another attempt at once
		l, err = c.tryAcquire(ctx, set, ttl)
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
			last = qe
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
		pause := jitter(c.cfg.retryDelay)
		if qe != nil && !qe.contended() {
			overloaded++
			pause = jitter(overloadDelay(c.cfg.retryDelay, overloaded))
		} else {
			overloaded = 0
		}
		if wt == nil {
			join()
		}
		wt.mark, wt.marked = mark, true
		if c.waitTurn(ctx, set, wt, pause) != nil {
			break
		}
	}
	// ctx ended: report the last attempt, with the context's end at the top of it rather
	// than only inside one node's entry.
	cerr := ctx.Err()
	switch {
	case last != nil && last.Cause == nil:
		last.Cause = cerr
		return nil, attempts, last
	case last != nil && errors.Is(last, cerr):
		return nil, attempts, last
	case last != nil:
		return nil, attempts, fmt.Errorf("%w: %w", last, cerr)
	case !errors.Is(err, cerr):
		err = fmt.Errorf("%w: %w", err, cerr)
	}
	return nil, attempts, err
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

// newHolderID returns a random 128-bit holder id in hex. crypto/rand never fails (Go 1.24+).
func newHolderID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lock is a lock held on a quorum of nodes. It is safe for concurrent use. The lock is yours
// until [Lock.Until] at the latest; after that, or after a failed [Lock.Extend], another
// holder may acquire it, and only the fencing token ([Lock.Token]) protects your writes.
type Lock struct {
	c       *Client
	set     lockKeys // its key (or keys, for a MultiLock) and their fence counters
	key     string   // set.keys[0]
	id      string
	ttl     time.Duration // the TTL of the acquire, renewed by Do
	token   Token         // tokens[0]
	tokens  []Token       // per key of set
	outer   *Lock         // a joined hold (reentrant.go): the hold it joined; nil otherwise
	granted time.Time     // when the acquire returned, for the observer's hold time
	one     [1]Token      // tokens of a single-key lock, without an allocation of their own

	mu sync.Mutex
	// last holds, per node, the last call that may have set our keys there: the acquire,
	// then the heals (heal.go). Extends and releases go out after it, so that they cannot
	// overtake it.
	last      []*call
	until     time.Time
	released  bool          // a Release (or Close) succeeded
	byClose   bool          // that release was Close's
	releasing chan struct{} // non-nil while a release is in flight; closed when it ends
}

// Key returns the lock's key.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// ID returns the holder id stored under the key on the nodes: 128 random bits in hex, new
// for every acquisition. [Status.Holder] shows the same value.
func (l *Lock) ID() string {
	if l == nil {
		return ""
	}
	return l.id
}

// Token returns the fencing token of this acquisition. It does not change on Extend. It is
// 0 when the Client was made [WithoutFencing]; the fenced stores reject 0.
func (l *Lock) Token() Token {
	if l == nil {
		return 0
	}
	return l.token
}

// Until returns the validity deadline: the lock must not be relied on at or after this
// instant. It carries a monotonic clock reading (when the Client's clock is the system
// clock), so compare it with time.Now() or time.Until. A successful Extend moves it.
func (l *Lock) Until() time.Time {
	if l == nil {
		return time.Time{}
	}
	if l.outer != nil {
		return l.outer.Until()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend gives the lock a new TTL of ttl from now, on every node in parallel, with a
// compare-and-pexpire script that never re-creates an expired key and never touches another
// holder's key. The keys get ttl plus the lock-delay ([WithLockDelay]), as on acquire. It succeeds only if a quorum confirms while validity time is left
// (ttl − elapsed − drift > 0), and then moves Until to start + ttl − drift. The token stays.
//
// Errors: ErrInvalidArgument for a bad ttl, as for TryAcquire (nothing sent); a *QuorumError matching
// ErrNotHeld when a quorum did not confirm in time. After such a failure Until never moves
// later, and moves earlier when the new TTL was shorter than what was left (some nodes may
// have applied it); ErrReleased (which matches ErrNotHeld) after a successful Release; when
// ctx ends, an error matching ErrNotHeld and ctx.Err(); ErrInvalidArgument for a nil Lock
// or context.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return invalidf("extend of a nil *Lock")
	}
	if ctx == nil {
		return invalidf("context is nil")
	}
	ttl, err := l.c.checkKeyTTL(ttl)
	if err != nil {
		return err
	}
	if l.outer != nil {
		return l.extendJoined(ctx, ttl)
	}
	if l.isReleased() {
		return fmt.Errorf("%w: extend %s after release", ErrReleased, l.set)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	if err := l.c.begin(); err != nil {
		return err
	}
	defer l.c.end()
	start := l.c.cfg.clock.Now()
	if l.c.cfg.observer == nil {
		return l.c.runQuorumOp(ctx, l.extendOp(ctx, ttl, nil), l.extendOutcome(start, ttl))
	}
	octx, end := l.c.startOp(ctx, Op{Kind: OpExtend, Keys: l.set.keys, TTL: ttl})
	err = l.c.runQuorumOp(octx, l.extendOp(octx, ttl, nil), l.extendOutcome(start, ttl))
	end(End{Outcome: outcomeOf(err), Err: err})
	return err
}

// extendOp builds the op of an extend to ttl, with done (nil for runQuorumOp); ctx is for
// the observer's events only.
func (l *Lock) extendOp(ctx context.Context, ttl time.Duration, done func(error)) *quorumOp {
	o := l.c.newQuorumOp(ctx, "extend", l.set, done)
	o.after, o.cmd = l.lastCalls(), l.set.extendCommand(l.id, l.c.keyTTLMillis(ttl))
	if !l.c.cfg.noHealing {
		o.heal = l.heal
	}
	return o
}

// lastCalls returns a copy of last.
func (l *Lock) lastCalls() []*call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.last)
}

// extendOutcome settles an extend started at start: a quorum that came too late fails it,
// and Until moves as Extend's doc says.
func (l *Lock) extendOutcome(start time.Time, ttl time.Duration) func(error) error {
	until := start.Add(ttl - Drift(ttl, l.c.cfg.driftFactor))
	return func(err error) error {
		if err == nil && Validity(ttl, start, l.c.cfg.clock.Now(), l.c.cfg.driftFactor) <= 0 {
			err = &QuorumError{Op: "extend", Key: l.key, Keys: l.set.multi(), Quorum: l.c.quorum, Agreed: l.c.quorum,
				Total: len(l.c.nodes), Cause: errValidityExpired, sentinel: ErrNotHeld}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			// Some nodes may have taken the new TTL anyway. If it is shorter than what was
			// left, their keys now expire sooner, and another holder could reach a quorum
			// before the old deadline: the deadline can only move earlier on a failure.
			if until.Before(l.until) {
				l.until = until
			}
			return err
		}
		l.until = until
		return nil
	}
}

// Release deletes the lock's key on every node in parallel with a compare-and-delete script
// that never touches another holder's key. It returns once a quorum has confirmed the
// delete; nodes still answering finish in the background ([Client.Close] waits for them).
// Exactly one Release of a Lock returns nil: the one that released it. Every other call,
// concurrent or later, sends nothing more and returns an error matching ErrReleased (and
// ErrNotHeld); a concurrent call first waits for the one in flight, and tries again itself
// if that one failed.
//
// The release is sent even when ctx has already ended (a deferred Release with a request
// context that was cancelled must not leave the lock for its whole TTL): it then runs on
// context.WithoutCancel(ctx), waiting at most the node timeout for a quorum, and returns nil
// if a quorum confirmed in that time, else an error matching ErrNotHeld and ctx.Err().
//
// Errors: a *QuorumError matching ErrNotHeld when fewer than a quorum still held our key
// (it expired, or nodes failed; also when the lock was granted on exactly a quorum and one of
// those nodes fails before the release); keys left anywhere then expire with their TTL. When ctx
// ends while waiting, the calls still go out, and the error matches ErrNotHeld and
// ctx.Err(). After [Client.Close]: ErrReleased if Close released the lock, ErrClosed if it
// could not. ErrInvalidArgument for a nil Lock or context.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return invalidf("release of a nil *Lock")
	}
	if ctx == nil {
		return invalidf("context is nil")
	}
	if l.outer != nil {
		if l.c.cfg.observer == nil {
			return l.releaseJoined()
		}
		_, end := l.c.startOp(ctx, Op{Kind: OpRelease, Keys: l.set.keys})
		err := l.releaseJoined()
		end(End{Outcome: outcomeOf(err), Err: err, Joined: true})
		return err
	}
	if l.c.cfg.observer == nil {
		return l.release(ctx, false)
	}
	octx, end := l.c.startOp(ctx, Op{Kind: OpRelease, Keys: l.set.keys})
	err := l.release(octx, false)
	end(End{Outcome: outcomeOf(err), Err: err})
	return err
}

// release runs the state machine of Release: one release at a time, success once.
// byClose is Close releasing what was left: the client is closed, so it does not register.
func (l *Lock) release(ctx context.Context, byClose bool) error {
	l.mu.Lock()
	for l.releasing != nil {
		ch := l.releasing
		l.mu.Unlock()
		<-ch // bounded: a release waits at most the node timeout past its ctx
		l.mu.Lock()
	}
	if l.released {
		by := ""
		if l.byClose {
			by = " by Client.Close"
		}
		l.mu.Unlock()
		return fmt.Errorf("%w: release %s: already released%s", ErrReleased, l.set, by)
	}
	ch := make(chan struct{})
	l.releasing = ch
	l.mu.Unlock()

	err := l.send(ctx, byClose)

	l.mu.Lock()
	l.releasing = nil
	if err == nil {
		l.released, l.byClose = true, byClose
	}
	l.mu.Unlock()
	close(ch)
	if err == nil {
		if o := l.c.cfg.observer; o != nil {
			o.Event(ctx, Event{Kind: EventHoldEnded, Keys: l.set.keys, Token: l.token, Duration: l.c.cfg.clock.Now().Sub(l.granted)})
		}
		l.c.forget(l)
		// Wakes our own waiters now (those for any of the keys, and for sets that hold one);
		// the nodes' echo of this release is dropped.
		for _, k := range l.set.keys {
			l.c.wake.heardFrom(k, l.id, -1)
		}
	}
	return err
}

// send sends the release and waits for its outcome.
func (l *Lock) send(ctx context.Context, byClose bool) error {
	if !byClose {
		if err := l.c.begin(); err != nil {
			return err
		}
		defer l.c.end()
	}
	waitCtx := ctx
	if byClose || ctx.Err() != nil {
		// Sent anyway, on a context that ctx's end does not reach, waited for at most the
		// node timeout.
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.c.cfg.nodeTimeout)
		defer cancel()
	}
	// The script announces the release on the keys' wake-up channels for the waiters of other
	// processes (lua/release.lua, lua/release_multi.lua).
	o := l.c.newQuorumOp(ctx, "release", l.set, nil)
	// No copy of last: no heal changes it while a release is in flight (heal.go).
	l.mu.Lock()
	after := l.last
	l.mu.Unlock()
	o.after, o.cmd, o.release = after, l.set.releaseCommand(l.id, !l.c.cfg.noWakeups), true
	err := l.c.runQuorumOp(waitCtx, o, nil)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
}

func (l *Lock) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}
