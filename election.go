package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// ElectionPrefix starts the lock key of every election ([Election.Key]): the key whose holder
// is the leader, in the election name's cluster hash slot.
const ElectionPrefix = "redlock:election:"

// LeaderPrefix starts the name of every election's leader record: the leader's holder id,
// term and value, written only by the leader (lua/proclaim.lua), in the same hash slot.
const LeaderPrefix = "redlock:leader:"

// MaxValueLen is the longest value a leader may proclaim, in bytes: it is stored on every
// node and read by every observer.
const MaxValueLen = 64 << 10

// ErrNoLeader is returned by [Election.Leader] when no leader holds the election on a
// quorum of nodes (none was elected, it resigned, or its leadership lapsed).
var ErrNoLeader = errors.New("redlock: no leader")

// Election elects one leader at a time among the candidates that campaign under one name.
// The leadership is a Redlock lock (the election's key, [Election.Key]) held by the leader
// and renewed while it leads; its fencing token is the leadership's term ([Leadership.Term]),
// strictly increasing from leader to leader, so a store that keeps the highest term it has
// seen (RedisFence, sqlfence) refuses a deposed leader's writes. The leader's value (an
// address, a host name) is stored on the nodes beside the key and changed only by the
// leader. Make one with [Client.Election]; it is safe for concurrent use.
//
// What an election promises is a lock's (docs/design.md §3.12): at most one leader with
// validity left at once, under the lock's assumptions; a leader that was paused or
// partitioned may still act after its term ended, which only the term, checked by the
// store, stops. [Leadership.Done] closes before the leadership can lapse, and also when
// called after a pause past that point.
type Election struct {
	c      *Client
	name   string
	err    error
	set    lockKeys // the election's lock key and its counters
	record string   // the leader record's key
}

// Election returns the election named name. It sends nothing; a bad name (the rules of a
// lock key, with the election's prefix) is returned, as an error matching
// ErrInvalidArgument, by every call on the Election. Safe for concurrent use.
func (c *Client) Election(name string) *Election {
	e := &Election{c: c, name: name}
	e.err = e.build()
	return e
}

func (e *Election) build() error {
	if err := checkName("election", e.name); err != nil {
		return err
	}
	key, err := slotKey(ElectionPrefix, e.name, true, namePrefixes...)
	if err != nil {
		return err
	}
	if e.record, err = slotKey(LeaderPrefix, e.name, true, namePrefixes...); err != nil {
		return err
	}
	if err := checkDerived("election", e.name, key, e.record); err != nil {
		return err
	}
	e.set, err = newDerivedLockKeys(key)
	return err
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Key returns the election's lock key ("" for an invalid election): [Client.Status] on it
// shows the leader's holder id, and its fencing tokens are the terms.
func (e *Election) Key() string {
	if e.err != nil {
		return ""
	}
	return e.set.keys[0]
}

// LeaderInfo is a leader as observers see it. The zero value means no leader.
type LeaderInfo struct {
	Value string // the value the leader proclaimed last, as a quorum of nodes store it
	Term  Token  // the leadership's term: its fencing token
	ID    string // the leader's holder id ([Lock.ID] of its lock)
	// Unknown is set only in [Election.Observe]'s reports, with the other fields empty: its
	// last read failed (fewer than a quorum of nodes answered), so whatever it reported
	// before may no longer hold. The next read that succeeds is reported, even if it finds
	// what was reported before the failure.
	Unknown bool
}

// Leadership is a won election: this process leads until [Leadership.Resign], or until the
// leadership is lost, which [Leadership.Done] reports before the validity can lapse. It is
// renewed in the background (as [Client.Do] renews its lock) while it lasts. Safe for
// concurrent use.
type Leadership struct {
	e      *Election
	l      *Lock
	h      *hold
	ctx    context.Context // ended when the leadership is lost or resigned
	cancel context.CancelCauseFunc
	margin time.Duration

	mu       sync.Mutex
	value    string
	seq      int64
	resigned bool
}

// Campaign waits until this process is elected, then proclaims value and returns the
// Leadership: it acquires the election's key for ttl as [Client.Acquire] does (waiting in
// the key's queue, first come first served across processes, woken when the leader
// resigns), starts renewing it every renew fraction × ttl, and stores value on a quorum of
// nodes. ttl must be at least [Client.MinDoTTL]; value at most [MaxValueLen] bytes. ctx
// bounds the campaign only: the leadership lasts until Resign or its loss.
//
// Errors: ErrInvalidArgument for a nil ctx, a bad name, ttl or value; an error matching
// ErrNotAcquired and ctx.Err() when ctx ends first (or the retry limit is reached); also
// ErrInvalidArgument for a Client made [WithoutFencing] (the term is the token) and under a
// context that carries this election's leadership ([Leadership.Context]);
// ErrClosed after [Client.Close]; a *QuorumError matching ErrNotHeld when the value could
// not be stored on a quorum (the leadership is then resigned). Safe for concurrent use.
func (e *Election) Campaign(ctx context.Context, value string, ttl time.Duration) (*Leadership, error) {
	ttl, err := e.args(ctx, value, ttl)
	if err != nil {
		return nil, err
	}
	l, err := observed(e.c, ctx, e.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		l, r, attempts, err := e.c.acquireRetrying(ctx, e.set, ttl)
		return l, acquireEnd(l, r, attempts, err), err
	})
	if err != nil {
		return nil, err
	}
	if l.outer != nil { // a context that carries the election's own lock: not a new leadership
		_ = l.Release(ctx)
		return nil, invalidf("election %q: the context already carries this election's leadership", quoteKey(e.name))
	}
	return e.lead(ctx, l, value)
}

// lead makes the Leadership of a won election: renewals, then the first proclamation.
func (e *Election) lead(ctx context.Context, l *Lock, value string) (*Leadership, error) {
	c := e.c
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	ld := &Leadership{e: e, l: l, ctx: lctx, cancel: cancel, margin: time.Duration(float64(l.ttl) * c.cfg.cancelMargin)}
	if err := c.begin(); err != nil { // the renewer's start needs the Client held
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	ld.h = c.renewer.add(context.WithoutCancel(ctx), l, cancel)
	c.heldMu.Lock()
	if c.leaders == nil {
		c.leaders = map[*Leadership]struct{}{}
	}
	c.leaders[ld] = struct{}{} // Close ends it
	c.heldMu.Unlock()
	c.end()
	if c.isClosed() {
		// Close may have looked at the leaderships before this one was there: end it here,
		// or its renewals would keep Close waiting.
		ld.stop(ErrClosed)
		return nil, ErrClosed
	}
	if err := ld.Proclaim(ctx, value); err != nil {
		_ = ld.Resign(context.WithoutCancel(ctx))
		return nil, err
	}
	return ld, nil
}

func (e *Election) args(ctx context.Context, value string, ttl time.Duration) (time.Duration, error) {
	if ctx == nil {
		return 0, invalidf("context is nil")
	}
	if e.err != nil {
		return 0, e.err
	}
	if e.c.cfg.noFencing {
		return 0, invalidf("election %q: a Client made WithoutFencing cannot campaign: a leadership's term is its fencing token", quoteKey(e.name))
	}
	if err := checkValue(value); err != nil {
		return 0, err
	}
	ttl, err := e.c.checkKeyTTL(ttl)
	if err != nil {
		return 0, err
	}
	return ttl, e.c.checkDoTTL(ttl)
}

func checkValue(v string) error {
	if len(v) > MaxValueLen {
		return invalidf("value of %d bytes, longer than MaxValueLen (%d)", len(v), MaxValueLen)
	}
	return nil
}

func (e *Election) op(kind OpKind, ttl time.Duration) Op {
	return Op{Kind: kind, Keys: e.set.keys, TTL: ttl, Election: e.name}
}

// Term returns the leadership's term: the fencing token of the election's lock, larger than
// the term of every earlier leader of the election.
func (ld *Leadership) Term() Token { return ld.l.Token() }

// ID returns the leader's holder id (as [LeaderInfo.ID] shows it to observers).
func (ld *Leadership) ID() string { return ld.l.ID() }

// Value returns the value this leader proclaimed last with success.
func (ld *Leadership) Value() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.value
}

// Until returns the end of the leadership's validity as the last confirmed renewal left it.
func (ld *Leadership) Until() time.Time { return ld.l.Until() }

// Done returns a channel that is closed when the leadership ends: lost (renewals failed, or
// the key is gone), resigned, or the Client closed. It is closed before the validity can
// lapse, cancel margin × ttl before it ([WithCancelMargin]). Each call also checks the clock:
// a leader that was paused past that point finds Done closed when it calls Done after the
// pause, even before the renewer has run, so check it by calling Done (or Err), not by
// keeping the channel, before each action that needs the leadership.
func (ld *Leadership) Done() <-chan struct{} {
	ld.check()
	return ld.ctx.Done()
}

// Err returns nil while the leadership lasts; after it ended, an error that matches
// ErrLockLost (a *LockLostError, lost), ErrReleased (resigned) or ErrClosed (the Client
// closed), as Done reports it, with the same check of the clock.
func (ld *Leadership) Err() error {
	ld.check()
	if ld.ctx.Err() == nil {
		return nil
	}
	return context.Cause(ld.ctx)
}

// Context returns a context that ends with the leadership (its cause is Err's error) or with
// parent. It carries the leadership's lock ([Lock.Context]): a Campaign of the same election
// under it is refused instead of waiting for itself.
func (ld *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ld.l.Context(parent))
	stop := context.AfterFunc(ld.ctx, func() { cancel(context.Cause(ld.ctx)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// errLeaderLate is the cause of a leadership found lapsed by Done's check of the clock.
var errLeaderLate = errors.New("the leadership's cancel point passed before a renewal was confirmed (the process was paused or starved)")

// check ends the leadership when the clock has passed its cancel point (Until − margin).
func (ld *Leadership) check() {
	if ld.ctx.Err() != nil {
		return
	}
	if ld.e.c.cfg.clock.Now().Before(ld.l.Until().Add(-ld.margin)) {
		return
	}
	ld.cancel(&LockLostError{Keys: ld.l.set.keys, Margin: ld.margin, Late: LateRenewerLate, Cause: errLeaderLate})
}

// Proclaim stores value as the leader's on every node, in parallel, only where the
// election's key is still this leader's; it succeeds once a quorum stored it, and Value
// then returns it. Errors: ErrInvalidArgument for a nil ctx or a value over [MaxValueLen];
// an error matching ErrLockLost once the leadership ended; a *QuorumError matching
// ErrNotHeld when fewer than a quorum stored it (some nodes may have: observers may see
// either value until a later Proclaim succeeds); when ctx ends, that error with ctx.Err().
// Safe for concurrent use; concurrent Proclaims store the one numbered last.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if ctx == nil {
		return invalidf("context is nil")
	}
	if err := checkValue(value); err != nil {
		return err
	}
	if err := ld.Err(); err != nil {
		return fmt.Errorf("proclaim %q: %w", quoteKey(ld.e.name), err)
	}
	ld.mu.Lock()
	ld.seq++
	seq := ld.seq
	ld.mu.Unlock()
	c, l := ld.e.c, ld.l
	o := c.newQuorumOp(ctx, "proclaim", l.set, nil)
	l.mu.Lock()
	o.after = l.last
	l.mu.Unlock()
	channel := ""
	if !c.cfg.noWakeups {
		channel = wakeChannel(l.key)
	}
	o.cmd = newProclaimCommand(l.key, ld.e.record, l.id, seq, l.token, value, channel)
	if err := c.runQuorumOp(ctx, o, nil); err != nil {
		return err
	}
	ld.mu.Lock()
	if seq >= ld.seq || ld.value == "" {
		ld.value = value
	}
	ld.mu.Unlock()
	return nil
}

// Resign ends the leadership: the renewals stop, Done closes (Err matches ErrReleased), and
// the election's key is released as [Lock.Release] does, so that the next candidate, woken
// by the release, is elected at once. Errors: those of Lock.Release; ErrReleased for a
// second Resign. A Resign after the leadership was lost still releases whatever is left of
// the key. Safe for concurrent use.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.mu.Lock()
	first := !ld.resigned
	ld.resigned = true
	ld.mu.Unlock()
	if !first {
		return fmt.Errorf("%w: resign %q: already resigned", ErrReleased, quoteKey(ld.e.name))
	}
	ld.stop(fmt.Errorf("%w: resigned", ErrReleased))
	if ctx == nil {
		ctx = context.Background()
	}
	return ld.l.Release(ctx)
}

// stop ends the leadership's renewals and Done with cause (unless it ended before).
func (ld *Leadership) stop(cause error) {
	c := ld.e.c
	c.renewer.remove(ld.h)
	ld.cancel(cause)
	c.heldMu.Lock()
	delete(c.leaders, ld)
	c.heldMu.Unlock()
}

// Do campaigns with value as [Election.Campaign] does, runs fn while this process leads and
// resigns when fn returns, whatever the path (an error, a panic, the end of ctx). fn's
// context is cancelled, with a cause matching ErrLockLost, before the leadership can lapse
// when renewals fail, exactly as [Client.Do] cancels its function. Do returns fn's error when
// the leadership lasted throughout; an error matching ErrLockLost, joined with fn's, when it
// was lost; Campaign's errors when it was never won. Safe for concurrent use.
func (e *Election) Do(ctx context.Context, value string, ttl time.Duration, fn func(ctx context.Context, l *Leadership) error) (err error) {
	if fn == nil {
		return invalidf("fn is nil")
	}
	ttl, err = e.args(ctx, value, ttl)
	if err != nil {
		return err
	}
	_, err = observed(e.c, ctx, e.op(OpDo, ttl), func(ctx context.Context) (struct{}, End, error) {
		return struct{}{}, End{}, e.runLeader(ctx, value, ttl, fn)
	})
	return err
}

// runLeader is Do once the arguments are valid: campaign, run fn, resign.
func (e *Election) runLeader(ctx context.Context, value string, ttl time.Duration, fn func(ctx context.Context, l *Leadership) error) (err error) {
	ld, err := e.Campaign(ctx, value, ttl)
	if err != nil {
		return err
	}
	fctx, cancel := ld.Context(ctx)
	defer func() {
		p := recover()
		cancel()
		lost := ld.Err()
		if !errors.Is(lost, ErrLockLost) {
			lost = nil
		}
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.nodeTimeout+time.Second)
		_ = ld.Resign(rctx)
		rcancel()
		if p != nil {
			panic(p)
		}
		if lost != nil {
			err = errors.Join(lost, err)
		}
	}()
	return fn(fctx, ld)
}

// Leader reads the election on every node (leader.lua) and returns the leader that a quorum
// of nodes agree on: the same holder id in the election's key, and a leader record of that
// holder. It changes nothing and waits for every node (each bounded by the node timeout).
// What it reports may lag (the leader may have resigned or lost since), but it never reports
// a term that was not won: only a winner writes a record, and only while its key is on the
// node. While a Proclaim is under way, nodes may hold the old or the new value; Leader
// reports the newest that a quorum stores, or, when none has a quorum, the newest any node
// of the quorum stores.
//
// Errors: ErrNoLeader when no holder has a quorum with its record (among a quorum of nodes
// that answered); an error wrapping the first node's failure when fewer than a quorum
// answered (the leader is unknown); ErrInvalidArgument for a nil ctx or a bad name; ErrClosed after Close; ctx.Err() when ctx ends first. Safe for
// concurrent use.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	if ctx == nil {
		return LeaderInfo{}, invalidf("context is nil")
	}
	if e.err != nil {
		return LeaderInfo{}, e.err
	}
	c := e.c
	if err := c.begin(); err != nil {
		return LeaderInfo{}, err
	}
	defer c.end()
	recs := make([]leaderRecord, 0, len(c.nodes))
	answered := 0
	var firstErr error
	err := c.askAll(ctx, newLeaderCommand(e.set.keys[0], e.record), func(ev transport.Event) {
		if ev.Err != nil || len(ev.Slice) != 3 {
			if firstErr == nil {
				firstErr = c.nodeErr(ev.Node, cmp.Or(ev.Err, errors.New("unexpected reply")))
			}
			return
		}
		answered++
		holder, _ := ev.Slice[0].(string)
		raw, _ := ev.Slice[2].(string)
		if r, ok := parseLeaderRecord(raw); ok && holder != "" && r.id == holder {
			recs = append(recs, r)
		}
	})
	if err != nil {
		return LeaderInfo{}, err
	}
	if answered < c.quorum { // too few to tell whether anyone leads
		return LeaderInfo{}, fmt.Errorf("redlock: election %q: only %d of %d nodes answered, quorum is %d: the leader is unknown; first failure: %w",
			quoteKey(e.name), answered, len(c.nodes), c.quorum, firstErr)
	}
	return chooseLeader(recs, c.quorum, e.name)
}

// leaderRecord is one node's leader record whose holder id matches the election's key there.
type leaderRecord struct {
	id    string
	seq   int64
	term  Token
	value string
}

// parseLeaderRecord reads "id seq term value" (proclaim.lua).
func parseLeaderRecord(s string) (leaderRecord, bool) {
	parts := strings.SplitN(s, " ", 4)
	if len(parts) != 4 || !IsHolderID(parts[0]) {
		return leaderRecord{}, false
	}
	seq, err1 := strconv.ParseInt(parts[1], 10, 64)
	term, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || seq < 1 || term < 1 {
		return leaderRecord{}, false
	}
	return leaderRecord{id: parts[0], seq: seq, term: Token(term), value: parts[3]}, true
}

// chooseLeader picks the leader from the nodes' matching records: the holder id on at least
// q of them, with the newest value on q (or, if none is, the newest of its records).
func chooseLeader(recs []leaderRecord, q int, name string) (LeaderInfo, error) {
	byID := map[string][]leaderRecord{}
	for _, r := range recs {
		byID[r.id] = append(byID[r.id], r)
	}
	for id, rs := range byID {
		if len(rs) < q {
			continue
		}
		best, newest := leaderRecord{}, leaderRecord{}
		for _, r := range rs {
			if r.seq > newest.seq {
				newest = r
			}
			at := 0 // nodes that store this proclamation or a newer one
			for _, o := range rs {
				if o.seq >= r.seq {
					at++
				}
			}
			if at >= q && r.seq > best.seq {
				best = r
			}
		}
		if best.seq == 0 {
			best = newest
		}
		return LeaderInfo{Value: best.value, Term: best.term, ID: id}, nil
	}
	return LeaderInfo{}, fmt.Errorf("%w: election %q", ErrNoLeader, quoteKey(name))
}

// Observe reports the election's leader as it changes: a LeaderInfo on the channel for
// every new term or value, and LeaderInfo{} when the election has no leader (after one had
// been seen, or at the start). It reads the election as [Election.Leader] does: once at
// once, again each time a quorum of nodes announces a release or a proclamation of the
// election's key (the wake-ups: a new leader's first value, a Proclaim, a Resign), and every
// [observePoll] (1 s with the default retry delay) for what nobody announces, a leader whose
// key expired. So a change that is announced is reported about one read after a quorum has
// it, a leadership that lapses unannounced within observePoll of the lapse, and with
// [WithoutWakeups], or while fewer than a quorum of nodes have confirmed the subscription (a
// node down, an ACL without SUBSCRIBE), every change within a retry delay ([WithRetryDelay],
// 50 ms by default), as the reads then come that often. It may skip a
// leadership or value that lasted less than one read; it never reports a term that was not
// won. A read that fails (too few nodes answer in time) is reported once, as
// LeaderInfo{Unknown: true}, until a read succeeds again. The channel is closed when
// ctx ends or the Client closes; a receiver that falls behind sees only the latest change
// (the channel holds one). A bad name or nil ctx gives a closed channel. Safe for
// concurrent use; each call has its own reads.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo, 1)
	if ctx == nil || e.err != nil || e.c.begin() != nil {
		close(ch)
		return ch
	}
	go e.observe(ctx, ch) // owned by the Client: Close waits for it (begin above)
	return ch
}

// observePoll is how often an Observe with wake-ups reads the election when nothing is
// announced: twenty retry delays, at least a second. Only a leadership that ends without a
// release (its holder died or was cut off, and its key expired) is seen by these reads
// alone; everything else is announced.
func observePoll(d time.Duration) time.Duration { return max(20*d, time.Second) }

func (e *Election) observe(ctx context.Context, ch chan LeaderInfo) {
	c := e.c
	defer c.end()
	defer close(ch)
	key := e.set.keys[0]
	changed, stop, announced := c.wake.watch(key)
	if announced {
		defer stop()
	}
	closing := c.wait.closing()
	var last LeaderInfo
	first := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-closing:
			return
		case <-changed: // nil without wake-ups: never ready
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.nodeTimeout+time.Second)
		info, err := e.Leader(rctx)
		cancel()
		switch {
		case err != nil && (ctx.Err() != nil || errors.Is(err, ErrClosed)):
			return // ended, or the Client closed, during the read
		case err != nil && !errors.Is(err, ErrNoLeader):
			info = LeaderInfo{Unknown: true}
			fallthrough
		default:
			if first || info != last {
				first, last = false, info
				select { // keep only the latest
				case <-ch:
				default:
				}
				ch <- info
			}
		}
		if announced && c.wake.listening(key) {
			t.Reset(observePoll(c.cfg.retryDelay))
		} else {
			t.Reset(c.cfg.retryDelay) // nothing would be heard: poll
		}
	}
}

// ParseElectionKey reports whether key is an election's key ([Election.Key]) and returns the
// election's name, for tools that list lock keys (redlock top).
func ParseElectionKey(key string) (name string, ok bool) {
	rest, found := strings.CutPrefix(key, ElectionPrefix)
	if !found {
		return "", false
	}
	return nameOf(ElectionPrefix, rest, key)
}
