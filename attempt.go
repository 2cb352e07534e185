package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// Tags of an attempt's calls: the acquire, and the raise of key k's counter (tagRaise + k).
const (
	tagAcquire uint8 = iota
	tagRaise
)

// attempt is one run of the acquire protocol of docs/design.md: the acquire script on every
// node, then, if the counters of a key disagree, the raise script on the nodes below that
// key's chosen token; on failure, the undo. It owns its replies and per-node state. A
// multi-key lock (AcquireMulti) is the same run with one tally per key: every node takes all
// the keys or none, so the nodes' acquired, refused and failed states are shared, and only
// the tokens (and their raises) are per key.
type attempt struct {
	c           *Client
	set         lockKeys
	id          string
	ttl         time.Duration
	start       time.Time
	validityEnd time.Time

	events   chan transport.Event
	acq      []*transport.Call // per node: the acquire call (a Lock keeps them for ordering)
	tallies  []*acquireTally   // per key
	nodeErrs []error
	returned []bool   // the acquire call's real fate is known: answered, or never written
	replied  bool     // some node answered the acquire before the attempt was decided
	mayHold  []bool   // our keys may be on the node: set, resent, or an error hid the answer
	tokens   [1]Token // a single key's token, decided without an allocation
	held     bool     // some node refused: another holder's key, or waiters ahead in its queue
	notOurs  bool     // some node answered a raise that the key is not ours

	obs    Observer        // nil without WithObserver
	ctx    context.Context // the acquire's context, for the observer's events
	raised bool            // a raise was sent

	queue  *queueArgs // a queued Acquire (queue.go); nil otherwise
	writer *rwKeys    // a read/write lock's writer (rwlock.go); nil otherwise
	setnx  bool       // the command is a plain SET NX (WithoutFencing, not queued)
	ahead  int        // the fewest waiters ahead of us that a queued node reported; -1 for none
	left   int64      // the most milliseconds left that a refusing node reported (its holder's PTTL)
}

// attemptKind is how an attempt ended, as the attempt itself tells it.
type attemptKind uint8

const (
	attemptWon        attemptKind = iota // the lock is ours (or joined, for a reentrant acquire)
	attemptContended                     // some node refused: another holder's key, or waiters ahead in its queue
	attemptOverloaded                    // no node refused: it failed on timeouts and errors only
	attemptFailed                        // not to be retried: the Client closed, or the arguments were refused
)

// attemptResult is what an attempt reports to the retry loop and to the observer, so that
// neither reads it back out of the error.
type attemptResult struct {
	kind    attemptKind
	ahead   int          // a queued attempt: the fewest waiters ahead of us that a node reported; 0 for none
	refused bool         // some node refused it (held, or a raise found the key not ours)
	expired bool         // the validity ran out before a quorum agreed
	left    int64        // the most milliseconds left that a refusing node reported; 0 for none
	detail  *QuorumError // the error of an attempt that reached the nodes and failed
	// took: a queued attempt that won, the nodes where it had set the key when it was
	// decided (wakeHub.turnDone); nil otherwise.
	took []bool
	// cancelled: the caller's context ended the attempt before it was decided, and before
	// any node had answered it.
	cancelled bool
	// here: refused by this Client without asking the nodes, for it holds or is attempting
	// what the attempt wanted (a semaphore's every permit). An observer hears "refused",
	// but it lost to no other contender (turn.tried).
	here bool
}

// outcome is the observer's Outcome of an acquire that ended with err after r.
func (r attemptResult) outcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	case r.expired:
		return OutcomeExpired
	case r.refused, r.here:
		return OutcomeRefused
	}
	return OutcomeError
}

// acquireEnd is the observer's End of an acquire operation.
func acquireEnd(l *Lock, r attemptResult, attempts int, err error) End {
	e := End{Outcome: r.outcome(err), Attempts: attempts}
	if l != nil {
		e.Token, e.Joined = l.token, l.outer != nil
		if e.Joined {
			e.Attempts = 0
		}
	}
	return e
}

// Deliver receives the transport's events; the channel has room for every event the
// attempt's calls can produce, so it never blocks. The observer hears of every call's first
// outcome here, also of those that come after the attempt was decided. The channel carries
// the bare event, and the attempt decodes an acquire's reply when it applies it: a channel
// of decoded events took twice the memory, allocated with every attempt.
func (a *attempt) Deliver(ev transport.Event) {
	if a.obs != nil && transport.FirstOutcome(ev) {
		a.observeNode(ev)
	}
	a.events <- ev
}

// reply decodes an acquire call's reply (Replied or Late).
func (a *attempt) reply(ev transport.Event) acquireReply {
	return decodeAcquire(ev, a.set, a.queue != nil, a.writer != nil, a.setnx)
}

// observeNode reports one call's first outcome to the observer.
func (a *attempt) observeNode(ev transport.Event) {
	if ev.Tag >= tagRaise {
		a.c.observeNode(a.obs, a.ctx, OpRaise, ev, ev.Err == nil && ev.Val == 1)
		return
	}
	ok := false
	if ev.Out == transport.Replied || ev.Out == transport.Late {
		r := a.reply(ev)
		ok = r.err == nil && r.granted
	}
	a.c.observeNode(a.obs, a.ctx, OpAcquire, ev, ok)
}

// runAttempt runs one attempt, queued when qa is not nil, with a holder id of its own. The
// caller has validated the arguments and registered the call.
func (c *Client) runAttempt(ctx context.Context, set lockKeys, ttl time.Duration, qa *queueArgs) (*Lock, attemptResult, error) {
	a := c.newAttempt(ctx, set, newHolderID(), ttl, qa, nil)
	a.send()
	return a.run(ctx)
}

// newAttempt prepares an attempt: its state, and its acquire call per node.
func (c *Client) newAttempt(ctx context.Context, set lockKeys, id string, ttl time.Duration, qa *queueArgs, w *writerArgs) *attempt {
	n, k := len(c.nodes), len(set.keys)
	a := &attempt{
		c: c, set: set, id: id, ttl: ttl, queue: qa, ahead: -1,
		start: c.cfg.clock.Now(),
		// Per node at most: acquire (timeout + late) and one raise per key (timeout + late).
		events:   make(chan transport.Event, 2*n*(1+k)),
		acq:      make([]*transport.Call, n),
		tallies:  make([]*acquireTally, k),
		nodeErrs: make([]error, n),
		returned: make([]bool, n),
		mayHold:  make([]bool, n),
	}
	for i := range a.tallies {
		a.tallies[i] = newAcquireTally(n, c.quorum)
	}
	if w != nil {
		a.writer = &w.keys
	}
	a.validityEnd = a.start.Add(ttl - Drift(ttl, c.cfg.driftFactor))
	if a.obs = c.cfg.observer; a.obs != nil {
		a.ctx = ctx
	}
	var cmd *command
	if k == 1 && c.cfg.noFencing && qa == nil && w == nil {
		a.setnx = true
		cmd = newSetNXCall(set.keys[0], id, c.keyTTLMillis(ttl))
	} else {
		cmd = newAcquireCommand(set, acquireArgs{id: id, px: c.keyTTLMillis(ttl), seed: counterSeed(a.start),
			idleMillis: c.counterIdleMillis(ttl), fenced: !c.cfg.noFencing, layout: c.cfg.layout, queue: qa, writer: w})
	}
	cmd.patience = patienceFor(ttl)
	calls := cmd.newCalls(n, tagAcquire, a)
	for i := range calls {
		a.acq[i] = &calls[i]
	}
	return a
}

// send enqueues the acquire calls, each behind our own release of the keys still on its
// way to that node, if any.
func (a *attempt) send() {
	after := a.c.pending.after(a.set.keys)
	for i, cl := range a.acq {
		var prev *transport.Call
		if after != nil {
			prev = after[i]
		}
		a.c.sendAfterTo(i, prev, cl)
	}
}

// run waits for the replies until the attempt is decided.
func (a *attempt) run(ctx context.Context) (*Lock, attemptResult, error) {
	var timer *time.Timer // set to the validity end at the first wait, and reset only once it fired
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var cause error
	for {
		v, tokens := a.decide()
		now := a.c.cfg.clock.Now()
		if v == won {
			if Validity(a.ttl, a.start, now, a.c.cfg.driftFactor) > 0 {
				a.observe(OutcomeOK, now)
				r := attemptResult{kind: attemptWon}
				if a.queue != nil {
					r.took = a.tallies[0].took()
				}
				return a.lock(tokens, now), r, nil
			}
			cause = errValidityExpired
			break
		}
		if v == lost {
			break
		}
		if !now.Before(a.validityEnd) {
			cause = errValidityExpired
			break
		}
		// Per-node timeouts arrive as events from the transport; here only the validity
		// end and ctx bound the wait.
		if timer == nil {
			timer = time.NewTimer(a.validityEnd.Sub(now))
		}
		select {
		case ev := <-a.events:
			a.apply(ev)
		case <-timer.C:
			// Early by the Client's clock (a test's clock): wait for the rest.
			timer.Reset(a.validityEnd.Sub(a.c.cfg.clock.Now()))
		case <-ctx.Done():
			cause = ctx.Err()
		}
		if cause != nil {
			break
		}
	}
	err := a.fail(ctx, cause)
	r := attemptResult{kind: attemptOverloaded, ahead: max(a.ahead, 0), refused: a.held || a.notOurs,
		expired: cause == errValidityExpired, left: a.left, detail: err, cancelled: cause != nil && cause == ctx.Err() && !a.replied}
	if a.held {
		r.kind = attemptContended
	}
	a.observe(r.outcome(err), a.c.cfg.clock.Now())
	return nil, r, err
}

// observe reports the decided attempt to the observer, if any.
func (a *attempt) observe(out Outcome, now time.Time) {
	if a.obs == nil {
		return
	}
	a.obs.Attempt(a.ctx, Attempt{Outcome: out, Raised: a.raised, Agreed: a.tallies[0].agreed(), Duration: now.Sub(a.start)})
}

// decide combines the keys' tallies: won when every key has its token, lost as soon as one
// key cannot get one. It sends the raises the tallies ask for.
func (a *attempt) decide() (verdict, []Token) {
	v := won
	tokens := a.tokens[:0]
	for k, t := range a.tallies {
		kv, token, raise := t.decide()
		for _, i := range raise {
			a.sendRaise(i, k)
		}
		switch {
		case kv == lost:
			return lost, nil
		case kv != won:
			v = undecided
		case v == won:
			if a.c.cfg.noFencing {
				token = 0 // every node reported 1: there is no token
			}
			tokens = append(tokens, Token(token))
		}
	}
	if v != won {
		return v, nil
	}
	return won, tokens
}

func (a *attempt) lock(tokens []Token, now time.Time) *Lock {
	l := &Lock{c: a.c, set: a.set, key: a.set.keys[0], id: a.id, ttl: a.ttl,
		token: tokens[0], tokens: tokens, until: a.validityEnd, last: a.acq, granted: now, writer: a.writer}
	if len(tokens) == 1 {
		l.one[0] = tokens[0]
		l.tokens = l.one[:] // the decision's slice is not kept
	}
	a.c.remember(l)
	return l
}

// sendRaise sends raise.lua for key k to node i, after its acquire call there (which has
// answered).
func (a *attempt) sendRaise(i, k int) {
	t := a.tallies[k]
	a.c.cfg.logger.Debug("redlock: raising fence counter", "key", quoteKey(a.set.keys[k]), "node", i,
		"from", t.counter[i], "to", t.target)
	a.raised = true
	cmd := newRaiseCommand(a.set, k, raiseArgs{id: a.id, target: t.target, idleMillis: a.c.counterIdleMillis(a.ttl),
		layout: a.c.cfg.layout})
	cmd.patience = patienceFor(a.ttl)
	a.c.sendTo(i, cmd.newCall(tagRaise+uint8(k), a))
}

// apply feeds one event into the tallies.
func (a *attempt) apply(ev transport.Event) {
	i := ev.Node
	if ev.Tag >= tagRaise {
		a.applyRaise(ev)
		return
	}
	switch ev.Out {
	case transport.TimedOut:
		a.nodeErrs[i] = a.c.nodeErr(i, ev.Err)
		a.each(func(t *acquireTally) { t.failed(i) })
		return
	case transport.NotSent:
		a.returned[i] = true
		a.nodeErrs[i] = a.c.nodeErr(i, ev.Err)
		a.each(func(t *acquireTally) { t.failed(i) })
		return
	}
	r := a.reply(ev)
	a.returned[i] = true
	if ev.Out == transport.Replied {
		a.replied = true
	}
	if ev.Out == transport.Late {
		// The node was counted as failed at its timeout; only the undo needs to know.
		a.mayHold[i] = r.err != nil || r.granted || a.setnx
		return
	}
	switch {
	case r.err != nil:
		a.mayHold[i] = true // the SET may have been applied and the reply lost
		a.nodeErrs[i] = a.c.nodeErr(i, r.err)
		a.c.cfg.logger.Debug("redlock: acquire failed on node", "node", i, "err", r.err)
		a.each(func(t *acquireTally) { t.failed(i) })
	case !r.granted:
		// A plain SET NX cannot tell whose key is there: it may be ours, set by a call that
		// go-redis resent after losing the reply. The undo releases it; the release only
		// deletes a key holding our id.
		a.mayHold[i] = a.setnx
		a.held = true
		if r.ahead >= 0 && (a.ahead < 0 || r.ahead < a.ahead) {
			a.ahead = r.ahead
		}
		a.left = max(a.left, r.left)
		a.nodeErrs[i] = a.c.nodeErr(i, heldError{left: r.left, key: r.heldKey, ahead: r.ahead, why: r.why})
		a.each(func(t *acquireTally) { t.refused(i) })
	default:
		a.mayHold[i] = true
		a.nodeErrs[i] = nil
		for k, t := range a.tallies {
			if t.acquired(i, r.counter(k)) {
				a.sendRaise(i, k)
			}
		}
	}
}

// applyRaise feeds a raise's event into its key's tally.
func (a *attempt) applyRaise(ev transport.Event) {
	i, t := ev.Node, a.tallies[ev.Tag-tagRaise]
	switch {
	case ev.Out == transport.Late:
		// The node timed out already; raise never creates our key, so nothing to undo.
	case ev.Err != nil:
		a.nodeErrs[i] = a.c.nodeErr(i, ev.Err)
		a.c.cfg.logger.Debug("redlock: raise failed", "node", i, "err", ev.Err)
		if t.state[i] == stateRaising {
			t.failed(i)
		}
	case ev.Val == 1:
		t.raiseDone(i, true)
	case ev.Val == 0:
		a.notOurs = true
		a.nodeErrs[i] = a.c.nodeErr(i, errNotOurs)
		t.raiseDone(i, false)
	default:
		a.nodeErrs[i] = a.c.nodeErr(i, errCounterAhead)
		t.raiseDone(i, false)
	}
}

func (a *attempt) each(f func(*acquireTally)) {
	for _, t := range a.tallies {
		f(t)
	}
}

// acquireReply is a node's answer to the acquire script (or SET NX), decoded by the attempt
// as it applies the event (and for the observer, if any, as the event is delivered):
// whether our keys were set, with their counters; otherwise the
// remaining milliseconds of the other holder's key (-1 when SET NX cannot tell), for a
// multi-key lock which key that is, and for a queued acquire the waiters ahead of ours.
type acquireReply struct {
	granted  bool
	one      int64   // a single key's counter
	counters []int64 // a multi-key lock's counters, one per key
	left     int64
	heldKey  string
	ahead    int     // -1 when the acquire was not queued
	why      refusal // a read/write lock's writer: what refused it
	err      error
}

// counter is key k's counter in a granted reply.
func (r *acquireReply) counter(k int) int64 {
	if r.counters == nil {
		return r.one
	}
	return r.counters[k]
}

// decodeAcquire decodes an acquire call's reply. A single key's script returns its counter
// when the key was set, else minus the other key's remaining milliseconds (for a queued
// acquire, that times 65536 plus the waiters ahead of us, as acquire.lua encodes it; for a
// read/write lock's writer, that times 65536 plus why it was refused, as lua/rw_gate.lua
// encodes it); SET NX returns 1 or 0; acquire_multi.lua returns {1, counters...} or {0,
// left, held key's index}.
func decodeAcquire(ev transport.Event, set lockKeys, queued, writer, setnx bool) acquireReply {
	r := acquireReply{ahead: -1, err: ev.Err}
	switch {
	case ev.Err != nil:
	case len(set.keys) > 1:
		r.decodeMulti(ev.Slice, set)
	case ev.Val > 0:
		r.granted, r.one = true, ev.Val
	case setnx:
		r.left = -1
	case queued:
		r.left, r.ahead = -ev.Val>>16, int(-ev.Val&0xffff)
	case writer:
		r.left, r.why = -ev.Val>>16, refusal(-ev.Val&0xffff)
	default:
		r.left = -ev.Val
	}
	return r
}

// decodeMulti decodes acquire_multi.lua's reply.
func (r *acquireReply) decodeMulti(reply []any, set lockKeys) {
	vals := make([]int64, len(reply))
	for j, x := range reply {
		v, ok := x.(int64)
		if s, isStr := x.(string); isStr { // a token, in decimal: exact above 2^53
			n, err := strconv.ParseInt(s, 10, 64)
			v, ok = n, err == nil
		}
		if !ok {
			r.err = fmt.Errorf("acquire_multi.lua: unexpected reply element %T", x)
			return
		}
		vals[j] = v
	}
	switch {
	case len(vals) == 3 && vals[0] == 0:
		if k := vals[2]; k >= 1 && int(k) <= len(set.keys) {
			r.heldKey = set.keys[k-1]
		}
		r.left = vals[1]
	case len(vals) == 1+len(set.keys) && vals[0] == 1:
		r.granted, r.counters = true, vals[1:]
	default:
		r.err = fmt.Errorf("acquire_multi.lua: unexpected reply of %d elements", len(vals))
	}
}

// fail builds the error of a failed attempt and undoes it on every node that may hold our
// key: at once where the acquire call has returned with our key (or an error), after it
// returns where it is still in flight, and not at all where it was never written (it is
// cancelled first if it is still queued).
func (a *attempt) fail(ctx context.Context, cause error) *QuorumError {
	err := &QuorumError{Op: "acquire", Key: a.set.keys[0], Keys: a.set.multi(), Quorum: a.c.quorum,
		Agreed: a.tallies[0].agreed(), Total: len(a.c.nodes), Cause: cause, sentinel: ErrNotAcquired}
	// Events that are already in tell the undo what it need not do.
	for drained := false; !drained; {
		select {
		case ev := <-a.events:
			a.apply(ev)
		default:
			drained = true
		}
	}
	for _, t := range a.tallies {
		for i, s := range t.state {
			if a.nodeErrs[i] == nil && (s == statePending || s == stateRaising) {
				a.nodeErrs[i] = a.c.nodeErr(i, errAbandoned)
			}
		}
	}
	err.Nodes = collectNodeErrors(a.nodeErrs)
	// A queued attempt's undo puts its place back where its key was set (acquire.lua took it
	// out there), with the same ticket, so the place stays where it was, and tells the head
	// of the queue there that the key is free: after a split vote, the contenders' undos
	// together tell the one that is first everywhere, which is the only one to try again at
	// once (design.md §3.10). Nothing is announced on the key's channel: the contenders it
	// would wake are mostly the ones whose simultaneous attempts split the vote.
	ra := releaseArgs{}
	if q := a.queue; q != nil {
		ra = releaseArgs{turn: true, member: q.member, ticket: q.ticket, live: q.live}
	}
	rel := newReleaseCommand(a.set, a.id, ra)
	undo := &undoLog{c: a.c, key: a.set.keys[0], id: a.id, obs: a.obs, ctx: a.ctx, queued: a.queue != nil}
	// A queued attempt that the nodes refused (the key held, or waiters ahead) keeps its
	// calls not yet written, say behind our own release to a slow node: they put the waiter's
	// place on that node, without which the nodes' queues disagree on their head and no
	// waiter is told its turn by a quorum (design.md §3.10, "A place on fewer than every
	// node"). Any other failure (timeouts, ctx, validity) drops them, so that a failed
	// attempt costs loaded nodes nothing more.
	place := a.queue != nil && a.held && cause == nil
	pr := a.c.pending.begin(a.set.keys, len(a.acq))
	for i, acq := range a.acq {
		switch {
		case a.returned[i]:
			if a.mayHold[i] {
				a.c.sendTo(i, a.undoCall(pr, i, rel, undo))
			}
		case !place && acq.Cancel():
			// Still queued: it will never be written, so there is nothing to undo.
		default:
			// In flight: release once it has returned, whatever it answers (compare-and-
			// delete leaves another holder's key alone), so the release cannot overtake it.
			a.c.sendAfterTo(i, acq, a.undoCall(pr, i, rel, undo))
		}
	}
	a.c.pending.end(pr)
	return err
}

func (a *attempt) undoCall(pr *pendingRelease, i int, rel *command, undo *undoLog) *transport.Call {
	cl := rel.newCall(0, undo)
	cl.Keep = true             // an undo is never dropped
	a.c.pending.add(pr, i, cl) // the next attempt's acquire goes after it
	return cl
}

// undoLog reports undos that did not reach their node.
type undoLog struct {
	c      *Client
	key    string
	id     string   // the failed attempt's holder id
	obs    Observer // nil without one
	ctx    context.Context
	queued bool // a queued attempt: a reply of 2 says our waiter is the head there now
}

func (u *undoLog) Deliver(ev transport.Event) {
	if u.queued && nextWaiterTurn(ev) {
		u.c.wake.turnFrom(u.key, u.id, ev.Node)
	}
	if u.obs != nil && transport.FirstOutcome(ev) {
		u.c.observeNode(u.obs, u.ctx, OpUndo, ev, ev.Err == nil && ev.Val == 1)
	}
	if !ev.Final() {
		return
	}
	// Logged when undos start failing on a node and when they reach it again, not once per
	// failed attempt: with a node down, every attempt's undo fails there.
	n := &u.c.nodes[ev.Node]
	switch {
	case ev.Err != nil && !n.undoFailing.Swap(true):
		u.c.cfg.logger.Warn("redlock: undos of failed acquires do not reach a node; their keys there expire with their TTL",
			"key", quoteKey(u.key), "node", ev.Node, "err", ev.Err)
	case ev.Err == nil && n.undoFailing.Swap(false):
		u.c.cfg.logger.Info("redlock: undos reach the node again", "node", ev.Node)
	}
}
