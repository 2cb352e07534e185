package redlock

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// SemaphorePrefix starts the name of every permit key: permit i of the semaphore named name
// is the lock key [Semaphore.PermitKey](i), SemaphorePrefix + i + ":" + name in the usual
// case, in name's cluster hash slot. A permit key is an ordinary lock key: [Client.Status]
// reads it, and its fencing tokens come from its own counters.
const SemaphorePrefix = "redlock:permit:"

// MaxPermits is the most permits one semaphore may have. Each permit is a lock key of its
// own, and an acquire that finds its first choice taken reads every permit key on every
// node in one script, so the cost of that read grows with the permits.
const MaxPermits = 64

// Semaphore lets up to a fixed number of holders in at once: each holder holds one permit,
// and each permit is a Redlock lock of its own (its own key, quorum and fencing tokens).
// Make one with [Client.Semaphore]; it is safe for concurrent use, and cheap: several values
// for the same name and permits share everything that matters (the nodes' keys, and this
// Client's local state and queue of waiters).
//
// Why one lock per permit, and not a count of holders per node: with 2 permits on 3 nodes,
// holders A on nodes {1,2}, B on {2,3} and C on {1,3} each have a majority while no node
// counts more than 2, so 3 hold at once. Permits as locks cannot do that: two holders of
// one permit would be two holders of one lock, which the lock's argument excludes
// (docs/design.md §3.11 and §5.13). The price is that a holder's [Lock.Token] fences only
// what its permit guards: the token sequence is per permit ([Lock.Key] names the permit),
// not one sequence for the whole semaphore. Give each permit its own resource (a connection
// slot, a worker lane), or fence a shared store per permit key.
//
// Choosing a permit costs one round trip when the first choice is free (the usual case:
// each Client starts from its own permit, and skips the permits it holds itself), and at
// most three otherwise: the first choice, one read of every permit on every node
// (lua/permits.lua), then an attempt on a permit that the read found free on a quorum. A
// waiting [Semaphore.Acquire] woken by the release of a permit makes that permit its first
// choice. The nodes never choose: every attempt asks every node for the same permit, so
// nodes that disagree about which permits are free cannot split the vote over different
// permits.
type Semaphore struct {
	c       *Client
	name    string
	permits int
	err     error      // a bad name or permit count: returned by every call
	keys    []lockKeys // per permit: its lock key and fence counters
	all     lockKeys   // every permit key: what the waiters wait for
	waitKey string     // the name of this semaphore's queue in the Client's waitQueues
	first   int        // the permit this Client tries first
}

// Semaphore returns the semaphore named name with permits permits. It sends nothing; a bad
// name (the rules of a lock key: not empty, at most [MaxKeyLen] bytes with the permit
// prefix, no reserved prefix) or permits outside 1 to [MaxPermits] is returned, as an error
// matching ErrInvalidArgument, by every call on the Semaphore. Every process must use the
// same permits for one name: a semaphore made with 8 by one process and 4 by another lets
// 8 in. Safe for concurrent use.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	s := &Semaphore{c: c, name: name, permits: permits}
	s.err = s.build()
	return s
}

// build derives the permit keys, or returns why the name or permits are refused.
func (s *Semaphore) build() error {
	if s.permits < 1 || s.permits > MaxPermits {
		return invalidf("semaphore %q: %d permits, want 1 to MaxPermits (%d)", quoteKey(s.name), s.permits, MaxPermits)
	}
	if err := checkName("semaphore", s.name); err != nil {
		return err
	}
	keys := make([]string, s.permits)
	s.keys = make([]lockKeys, s.permits)
	for i := range keys {
		k, err := permitKey(s.name, i)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	if err := checkDerived("semaphore", s.name, keys...); err != nil {
		return err
	}
	for i, k := range keys {
		set, err := newDerivedLockKeys(k)
		if err != nil {
			return err
		}
		keys[i], s.keys[i] = k, set
	}
	all, err := newDerivedLockKeys(keys...)
	if err != nil {
		return err
	}
	s.all = all
	// Apart from every lock's queue: a single-key lock queues under its key, a multi-key
	// lock under its length-prefixed keys, neither of which starts with a NUL.
	s.waitKey = "\x00semaphore\x00" + strconv.Itoa(s.permits) + "\x00" + s.name
	h := fnv.New32a()
	h.Write([]byte(s.c.id))
	s.first = int(h.Sum32() % uint32(s.permits))
	return nil
}

// permitKey names permit i of semaphore name: a key in name's cluster hash slot (slotKey),
// so that permits.lua can read them all in one script on a node that is a Redis Cluster.
func permitKey(name string, i int) (string, error) {
	return slotKey(SemaphorePrefix+strconv.Itoa(i)+":", name, true, namePrefixes...)
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns how many holders the semaphore lets in at once.
func (s *Semaphore) Permits() int { return s.permits }

// PermitKey returns the lock key of permit i (0 ≤ i < Permits), "" when i is out of range or
// the semaphore is invalid. [Lock.Key] of a permit is one of these.
func (s *Semaphore) PermitKey(i int) string {
	if s.err != nil || i < 0 || i >= s.permits {
		return ""
	}
	return s.keys[i].keys[0]
}

// args checks a call's context and ttl; it returns the ttl in whole milliseconds.
func (s *Semaphore) args(ctx context.Context, ttl time.Duration) (time.Duration, error) {
	if ctx == nil {
		return 0, invalidf("context is nil")
	}
	if s.err != nil {
		return 0, s.err
	}
	return s.c.checkKeyTTL(ttl)
}

// TryAcquire makes one attempt to take a permit for ttl, as [Client.TryAcquire] does for a
// lock: it returns a *Lock on one permit key, with that permit's fencing token. It tries
// the permit this Client starts from (or the next one it does not hold itself); when that
// one is held elsewhere, it reads every permit on every node and tries one that a quorum
// has free: at most three round trips, and one when the first choice is free. It neither
// queues behind this Client's waiting Acquire calls nor waits.
//
// ttl follows the lock's rules ([Client.TryAcquire]). Errors: ErrInvalidArgument (nothing
// sent) for a nil ctx, a bad name, bad permits or a bad ttl; an error matching
// ErrNotAcquired when every permit is held (this Client's own holds count without a round
// trip), or when the attempt failed (a *QuorumError, as for a lock); when ctx ends, an
// error matching ErrNotAcquired and ctx.Err(); ErrClosed after [Client.Close]. A failed
// attempt is undone on every node. A permit is never reentrant: a context that carries a
// held permit gets another permit, or none. Safe for concurrent use.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := s.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return observed(s.c, ctx, s.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		l, r, err := s.c.attemptHeld(ctx, ttl, func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return s.attempt(ctx, ttl, "")
		})
		return l, acquireEnd(l, r, 1, err), err
	})
}

// Acquire takes a permit for ttl, waiting and retrying until one is free, the retry limit
// is reached ([WithRetryLimit]) or ctx ends, with the errors of [Semaphore.TryAcquire];
// when ctx ends, the error matches ErrNotAcquired and ctx.Err(). After [Client.Close] it
// returns ErrClosed, at once also for calls that were waiting.
//
// This Client's Acquire calls for one semaphore wait in arrival order and only the first
// makes attempts, as for a lock's key. It is woken at once when this Client releases a
// permit of the semaphore, and when another process does (the permit keys' wake-up
// channels, [WakeChannelPrefix]); a wake-up that is lost costs at most a retry delay
// ([WithRetryDelay]). There is no queue across processes: between processes, the waiter
// whose attempt reaches a quorum first after a release wins the permit. A waiter woken by
// a release tries the released permit first, so every process's waiter races for it in
// one round trip, the releasing process's own included. Safe for concurrent use.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := s.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return observed(s.c, ctx, s.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		t := &turn{c: s.c, set: s.all, key: s.waitKey, eager: true}
		t.attempt = func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return s.attempt(ctx, ttl, t.released())
		}
		l, r, attempts, err := s.c.retryTurn(ctx, ttl, t)
		return l, acquireEnd(l, r, attempts, err), err
	})
}

// Do takes a permit as [Semaphore.Acquire] does, runs fn while holding it and releases it,
// exactly as [Client.Do] does for a lock: the permit is renewed while fn runs, fn's context
// is cancelled with a [*LockLostError] cause (matching ErrLockLost) before the permit can
// lapse when renewals fail, and ttl must be at least [Client.MinDoTTL]. fn's *Lock is the
// permit: send its Token with every write to what the permit guards. Errors are those of
// [Client.Do] and [Semaphore.Acquire]. Safe for concurrent use.
func (s *Semaphore) Do(ctx context.Context, ttl time.Duration, fn func(ctx context.Context, l *Lock) error) error {
	if fn == nil {
		return invalidf("fn is nil")
	}
	ttl, err := s.args(ctx, ttl)
	if err != nil {
		return err
	}
	if err := s.c.checkDoTTL(ttl); err != nil {
		return err
	}
	return s.c.doWith(ctx, s.op(OpDo, ttl), func(ctx context.Context) (*Lock, error) { return s.Acquire(ctx, ttl) }, fn)
}

func (s *Semaphore) op(kind OpKind, ttl time.Duration) Op {
	return Op{Kind: kind, Keys: s.all.keys, TTL: ttl, Semaphore: s.name}
}

// attempt is one attempt of the semaphore: the permit whose release woke it (released, a
// permit key, or "" when it was not woken by a release), else the first permit this Client
// does not hold; when that one is held elsewhere, a read of every permit and one attempt on
// a permit that a quorum of nodes has free.
//
// The released permit first: every process woken by one release then races for it in one
// round trip, where each one's own first choice would let the process that released it
// (for which that permit is often the first one it does not hold) win it in one round trip
// while the others, whose first choices are held, need three; its share of the permits
// would stick (TestRealSemaphoreLoad's fairness).
func (s *Semaphore) attempt(ctx context.Context, ttl time.Duration, released string) (*Lock, attemptResult, error) {
	mine := s.c.permitsHeld(s.all.keys)
	i := s.preferred(mine)
	if j := slices.Index(s.all.keys, released); j >= 0 && !mine[j] {
		i = j
	}
	if i < 0 {
		return nil, attemptResult{kind: attemptContended, here: true}, s.allHeld(0)
	}
	l, r, err := s.try(ctx, i, ttl)
	if r.kind != attemptContended || ctx.Err() != nil {
		return l, r, err
	}
	free, err := s.read(ctx)
	if err != nil {
		return nil, attemptResult{kind: attemptContended}, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	mine = s.c.permitsHeld(s.all.keys) // ours may have changed during the round trips
	cands := make([]int, 0, s.permits)
	for i, f := range free {
		if f && !mine[i] {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		// Refused as the first choice was: by the nodes, for another contender holds it, or
		// here, for another call of this Client claimed it after it was chosen.
		return nil, attemptResult{kind: attemptContended, refused: r.refused, here: r.here}, s.allHeld(1)
	}
	// At random among the free ones: contenders of other processes that read the same
	// permits free spread over them instead of all trying the first.
	return s.try(ctx, cands[rand.N(len(cands))], ttl)
}

// allHeld is the error of an attempt that found no free permit; reads is 0 when this
// Client holds every permit itself (nothing was sent).
func (s *Semaphore) allHeld(reads int) error {
	if reads == 0 {
		return fmt.Errorf("%w: semaphore %q: this Client holds all %d permits", ErrNotAcquired, quoteKey(s.name), s.permits)
	}
	return fmt.Errorf("%w: semaphore %q: all %d permits are held (none is free on a quorum of nodes)", ErrNotAcquired, quoteKey(s.name), s.permits)
}

// preferred returns the permit to try first: this Client's own starting permit, or the
// next one after it that this Client does not hold; -1 when it holds them all.
func (s *Semaphore) preferred(mine []bool) int {
	for j := range s.permits {
		if i := (s.first + j) % s.permits; !mine[i] {
			return i
		}
	}
	return -1
}

// try is one lock attempt on permit i; a permit won is recorded as this Client's until it
// is released (permitsHeld).
func (s *Semaphore) try(ctx context.Context, i int, ttl time.Duration) (*Lock, attemptResult, error) {
	if !s.c.claimPermit(s.keys[i].keys[0]) {
		// Another call of this Client is trying it right now: as if held.
		return nil, attemptResult{kind: attemptContended, here: true}, s.allHeld(1)
	}
	l, r, err := s.c.runAttempt(ctx, s.keys[i], ttl, nil)
	s.c.settlePermit(s.keys[i].keys[0], l)
	return l, r, err
}

// read asks every node which permits it has free (permits.lua) and returns, per permit,
// whether a quorum of nodes has it free. A node that fails counts as having none free.
func (s *Semaphore) read(ctx context.Context) ([]bool, error) {
	counts := make([]int, s.permits)
	err := s.c.askAll(ctx, newPermitsCommand(s.all.keys), func(ev transport.Event) {
		if ev.Err != nil || len(ev.Slice) != s.permits {
			return
		}
		for i, v := range ev.Slice {
			if ms, ok := v.(int64); ok && ms == -2 {
				counts[i]++
			}
		}
	})
	if err != nil {
		return nil, err
	}
	free := make([]bool, s.permits)
	for i, n := range counts {
		free[i] = n >= s.c.quorum
	}
	return free, nil
}

// trying marks, in Client.permits, a permit that a call of this Client is attempting.
var trying = new(Lock)

// permitsHeld reports, per key, whether this Client holds that permit (with validity
// left) or is attempting it.
func (c *Client) permitsHeld(keys []string) []bool {
	now := c.cfg.clock.Now()
	out := make([]bool, len(keys))
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	for i, k := range keys {
		if l := c.permits[k]; l != nil {
			out[i] = l == trying || now.Before(l.Until())
		}
	}
	return out
}

// claimPermit marks key as being attempted by this Client; false when another call of this
// Client holds it with validity left or is attempting it.
func (c *Client) claimPermit(key string) bool {
	now := c.cfg.clock.Now()
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if l := c.permits[key]; l == trying || l != nil && now.Before(l.Until()) {
		return false
	}
	if c.permits == nil {
		c.permits = map[string]*Lock{}
	}
	c.permits[key] = trying
	return true
}

// settlePermit ends claimPermit: key is held by l, or (l nil) free again here.
func (c *Client) settlePermit(key string, l *Lock) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if l != nil { // not released yet: nobody else has it
		c.permits[key] = l
	} else if c.permits[key] == trying {
		delete(c.permits, key)
	}
}

// ParsePermitKey reports whether key is a permit key of a semaphore ([Semaphore.PermitKey])
// and returns the semaphore's name and the permit's number, for tools that list lock keys
// (redlock top).
func ParsePermitKey(key string) (name string, permit int, ok bool) {
	rest, found := strings.CutPrefix(key, SemaphorePrefix)
	if !found {
		return "", 0, false
	}
	digits, rest, found := strings.Cut(rest, ":")
	i, err := strconv.Atoi(digits)
	if !found || err != nil || i < 0 || i >= MaxPermits || strconv.Itoa(i) != digits {
		return "", 0, false
	}
	name, ok = nameOf(SemaphorePrefix+digits+":", rest, key)
	return name, i, ok
}

// SemaphoreStatus is a snapshot of a semaphore's permits across the nodes, for operators
// and tools; it may be stale by the time it is printed.
type SemaphoreStatus struct {
	Name    string
	Permits int
	// Held is how many permits have a holder on a quorum of nodes (Status.HeldByQuorum).
	Held int
	// Permit is the status of each permit key, in order ([Semaphore.PermitKey]).
	Permit []*Status
}

// Status reads every permit key on every node as [Client.Status] does (in parallel, each
// node bounded by the node timeout), changing nothing. Errors: ErrInvalidArgument for a nil
// ctx or an invalid semaphore, ErrClosed after Close, and the first error of a permit's
// read (a context that has ended). Safe for concurrent use.
func (s *Semaphore) Status(ctx context.Context) (*SemaphoreStatus, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	if s.err != nil {
		return nil, s.err
	}
	out := &SemaphoreStatus{Name: s.name, Permits: s.permits, Permit: make([]*Status, s.permits)}
	errs := make([]error, s.permits)
	var wg sync.WaitGroup
	for i := range s.permits {
		wg.Go(func() { out.Permit[i], errs[i] = s.c.Status(ctx, s.keys[i].keys[0]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("semaphore %q, permit %d: %w", quoteKey(s.name), i, err)
		}
		if out.Permit[i].HeldByQuorum() {
			out.Held++
		}
	}
	return out, nil
}
