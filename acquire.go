package redlock

import (
	"context"
	"time"
)

// Tags of an attempt's calls.
const (
	tagAcquire uint8 = iota
	tagRaise
)

// attempt is one run of the acquire protocol of docs/design.md: the acquire script on every
// node, then, if the counters disagree, the raise script on the nodes below the chosen
// token; on failure, the undo. It owns its replies and per-node state.
type attempt struct {
	c           *Client
	key, fence  string
	id          string
	ttl         time.Duration
	start       time.Time
	validityEnd time.Time

	events   chan event
	acq      []*call // per node: the acquire call (a Lock keeps them for ordering)
	tally    *acquireTally
	nodeErrs []error
	returned []bool // the acquire call's real fate is known: answered, or never written
	mayHold  []bool // our key may be on the node: set, resent, or an error hid the answer
}

// deliver receives the transport's events; the channel has room for every event the
// attempt's calls can produce, so it never blocks.
func (a *attempt) deliver(ev event) { a.events <- ev }

// acquire runs one attempt. The caller has validated the arguments and registered the call.
func (c *Client) acquire(ctx context.Context, key, fence, id string, ttl time.Duration) (*Lock, error) {
	n := len(c.nodes)
	a := &attempt{
		c: c, key: key, fence: fence, id: id, ttl: ttl,
		start: c.cfg.clock.Now(),
		// Per node at most: acquire (timeout + late) and raise (timeout + late).
		events:   make(chan event, 4*n),
		acq:      make([]*call, n),
		tally:    newAcquireTally(n, c.quorum),
		nodeErrs: make([]error, n),
		returned: make([]bool, n),
		mayHold:  make([]bool, n),
	}
	a.validityEnd = a.start.Add(ttl - Drift(ttl, c.cfg.driftFactor))
	var cmd *command
	if c.cfg.noFencing {
		cmd = newSetNXCall(key, id, c.keyTTLMillis(ttl))
	} else {
		cmd = newScriptCall(acquireScript, []string{key, fence}, id, c.keyTTLMillis(ttl), counterSeed(a.start), c.counterIdleMillis(ttl))
	}
	for i := range c.nodes {
		a.acq[i] = cmd.newCall(tagAcquire, a)
	}
	for i, call := range a.acq {
		c.sendTo(i, call)
	}
	return a.run(ctx)
}

// run waits for the replies until the attempt is decided.
func (a *attempt) run(ctx context.Context) (*Lock, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var cause error
	for {
		v, token, raise := a.tally.decide()
		now := a.c.cfg.clock.Now()
		for _, i := range raise {
			a.sendRaise(i)
		}
		if v == won {
			if Validity(a.ttl, a.start, now, a.c.cfg.driftFactor) > 0 {
				return a.lock(token), nil
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
		timer.Reset(a.validityEnd.Sub(now))
		select {
		case ev := <-a.events:
			a.apply(ev)
		case <-timer.C:
		case <-ctx.Done():
			cause = ctx.Err()
		}
		if cause != nil {
			break
		}
	}
	return nil, a.fail(ctx, cause)
}

func (a *attempt) lock(token int64) *Lock {
	if a.c.cfg.noFencing {
		token = 0 // every node reported 1: there is no token
	}
	l := &Lock{c: a.c, key: a.key, fence: a.fence, id: a.id, ttl: a.ttl, token: Token(token),
		until: a.validityEnd, acq: a.acq}
	a.c.remember(l)
	return l
}

// sendRaise sends raise.lua to node i, after its acquire call there (which has answered).
func (a *attempt) sendRaise(i int) {
	t := a.tally
	a.c.cfg.logger.Debug("redlock: raising fence counter", "key", quoteKey(a.key), "node", i,
		"from", t.counter[i], "to", t.target)
	cmd := newScriptCall(raiseScript, []string{a.key, a.fence}, a.id, t.target, a.c.counterIdleMillis(a.ttl))
	a.c.sendTo(i, cmd.newCall(tagRaise, a))
}

// apply feeds one event into the tally.
func (a *attempt) apply(ev event) {
	i, t := ev.node, a.tally
	if ev.tag == tagRaise {
		switch {
		case ev.out == late:
			// The node timed out already; raise never creates our key, so nothing to undo.
		case ev.err != nil:
			a.nodeErrs[i] = a.c.nodeErr(i, ev.err)
			a.c.cfg.logger.Debug("redlock: raise failed", "node", i, "err", ev.err)
			if t.state[i] == stateRaising {
				t.failed(i)
			}
		case ev.val == 1:
			t.raiseDone(i, true)
		case ev.val == 0:
			a.nodeErrs[i] = a.c.nodeErr(i, errNotOurs)
			t.raiseDone(i, false)
		default:
			a.nodeErrs[i] = a.c.nodeErr(i, errCounterAhead)
			t.raiseDone(i, false)
		}
		return
	}
	switch ev.out {
	case timedOut:
		a.nodeErrs[i] = a.c.nodeErr(i, ev.err)
		t.failed(i)
		return
	case notSent:
		a.returned[i] = true
		a.nodeErrs[i] = a.c.nodeErr(i, ev.err)
		t.failed(i)
		return
	case late:
		// The node was counted as failed at its timeout; only the undo needs to know.
		a.returned[i] = true
		a.mayHold[i] = ev.err != nil || ev.val > 0 || a.c.cfg.noFencing
		return
	}
	a.returned[i] = true
	switch {
	case ev.err != nil:
		a.mayHold[i] = true // the SET may have been applied and the reply lost
		a.nodeErrs[i] = a.c.nodeErr(i, ev.err)
		a.c.cfg.logger.Debug("redlock: acquire failed on node", "node", i, "err", ev.err)
		t.failed(i)
	case ev.val <= 0 && a.c.cfg.noFencing:
		// A plain SET NX cannot tell whose key is there: it may be ours, set by a call that
		// go-redis resent after losing the reply. The undo releases it; the release only
		// deletes a key holding our id.
		a.mayHold[i] = true
		a.nodeErrs[i] = a.c.nodeErr(i, heldError{left: -1})
		t.refused(i)
	case ev.val <= 0:
		a.nodeErrs[i] = a.c.nodeErr(i, heldError{left: -ev.val})
		t.refused(i)
	default:
		a.mayHold[i] = true
		a.nodeErrs[i] = nil
		if t.acquired(i, ev.val) {
			a.sendRaise(i)
		}
	}
}

// fail builds the error of a failed attempt and undoes it on every node that may hold our
// key: at once where the acquire call has returned with our key (or an error), after it
// returns where it is still in flight, and not at all where it was never written (it is
// cancelled first if it is still queued).
func (a *attempt) fail(ctx context.Context, cause error) error {
	err := &QuorumError{Op: "acquire", Key: a.key, Quorum: a.c.quorum, Agreed: a.tally.agreed(),
		Total: len(a.c.nodes), Cause: cause, sentinel: ErrNotAcquired}
	// Events that are already in tell the undo what it need not do.
	for drained := false; !drained; {
		select {
		case ev := <-a.events:
			a.apply(ev)
		default:
			drained = true
		}
	}
	for i, s := range a.tally.state {
		if a.nodeErrs[i] == nil && (s == statePending || s == stateRaising) {
			a.nodeErrs[i] = a.c.nodeErr(i, errAbandoned)
		}
	}
	err.Nodes = collectNodeErrors(a.nodeErrs)
	// No wake-up channel: the undo frees the key silently. The contenders it would wake are
	// mostly the ones whose simultaneous attempts split the vote; their jittered retry pauses
	// spread them out again, where a wake-up would send them all back at the same moment
	// (docs/design.md, "Wake-ups").
	rel := newScriptCall(releaseScript, []string{a.key}, a.id)
	undo := &undoLog{c: a.c, key: a.key}
	for i, acq := range a.acq {
		switch {
		case a.returned[i]:
			if a.mayHold[i] {
				a.c.sendTo(i, a.undoCall(rel, undo))
			}
		case acq.cancel():
			// Still queued: it will never be written, so there is nothing to undo.
		default:
			// In flight: release once it has returned, whatever it answers (compare-and-
			// delete leaves another holder's key alone), so the release cannot overtake it.
			a.c.sendAfterTo(i, acq, a.undoCall(rel, undo))
		}
	}
	return err
}

func (a *attempt) undoCall(rel *command, undo *undoLog) *call {
	cl := rel.newCall(0, undo)
	cl.keep = true // an undo is never dropped
	return cl
}

// undoLog reports undos that did not reach their node.
type undoLog struct {
	c   *Client
	key string
}

func (u *undoLog) deliver(ev event) {
	if ev.final() && ev.err != nil {
		u.c.cfg.logger.Warn("redlock: undo of a failed acquire did not reach a node; the key expires with its TTL",
			"key", quoteKey(u.key), "node", ev.node, "err", ev.err)
	}
}

// keyTTLMillis is the PX, in milliseconds, that a lock key of a lock with the given TTL
// gets on a node when it is set or extended. The holder's validity is always computed from
// ttl itself; the key may live longer than that, never shorter.
func (c *Client) keyTTLMillis(ttl time.Duration) int64 {
	return ttl.Milliseconds()
}

// counterIdleMillis is the idle TTL given to a fence counter, in milliseconds: the configured
// idle TTL, but never shorter than the lock's own TTL, so a counter cannot expire while a
// lock that has just used it may still be held. 0 means no expiry.
func (c *Client) counterIdleMillis(ttl time.Duration) int64 {
	if c.cfg.counterIdleTTL == 0 {
		return 0
	}
	return max(c.cfg.counterIdleTTL, ttl).Milliseconds()
}
