package redlock

import (
	"context"
	"sync"
	"time"
)

// nodeReply is one node's answer to the acquire or the raise script.
type nodeReply struct {
	node  int
	raise bool // a reply to raise.lua rather than acquire.lua
	val   int64
	err   error
}

// acquire runs one attempt of the protocol in docs/design.md: the acquire script on every
// node in parallel, then, if the counters disagree, the raise script on the nodes below the
// chosen token. The caller has validated the arguments and registered the call.
func (c *Client) acquire(ctx context.Context, key, fence, id string, ttl time.Duration) (*Lock, error) {
	n := len(c.nodes)
	keys := []string{key, fence}
	start := c.cfg.clock.Now()
	drift := Drift(ttl, c.cfg.driftFactor)
	validityEnd := start.Add(ttl - drift)

	// Buffered for one acquire and one raise reply per node, so that no sender ever blocks
	// after the outcome is decided.
	replies := make(chan nodeReply, 2*n)
	var acq nodeCall
	if c.cfg.noFencing {
		acq = newSetNXCall(key, id, ttl.Milliseconds())
	} else {
		acq = newScriptCall(acquireScript, keys, id, ttl.Milliseconds(), counterSeed(start), c.counterIdleMillis(ttl))
	}
	// sent[i] is closed once node i's acquire call has returned. The lock's later extend and
	// release wait for it on that node alone, so they can never overtake a slow SET there.
	sent := make([]chan struct{}, n)
	calls := c.newBatch(ctx)
	for i := range c.nodes {
		sent[i] = make(chan struct{})
		c.bg.Add(1) // as spawn, without its second closure: this is the hot path
		go func() {
			defer c.bg.Done()
			v, err := acq.run(calls.ctx, c.nodes[i].client)
			calls.done()
			close(sent[i])
			replies <- nodeReply{node: i, val: v, err: err}
		}()
	}

	tally := newAcquireTally(n, c.quorum)
	nodeErrs := make([]error, n)
	deadline := make([]time.Time, n) // when a pending acquire or raise gives up
	answered := make([]bool, n)      // the acquire script's reply arrived
	held := make([]bool, n)          // the node answered that another holder has the key
	for i := range deadline {
		deadline[i] = start.Add(c.cfg.nodeTimeout)
	}
	sendRaise := func(i int, target int64, now time.Time) {
		deadline[i] = now.Add(c.cfg.nodeTimeout)
		c.cfg.logger.Debug("redlock: raising fence counter", "key", key, "node", i,
			"from", tally.counter[i], "to", target)
		c.spawn(func() {
			v, err := c.eval(ctx, i, newScriptCall(raiseScript, keys, id, target, c.counterIdleMillis(ttl)))
			replies <- nodeReply{node: i, raise: true, val: v, err: err}
		})
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var cause error
	for {
		v, token, raise := tally.decide()
		now := c.cfg.clock.Now()
		for _, i := range raise {
			sendRaise(i, tally.target, now)
		}
		if v == won {
			if Validity(ttl, start, now, c.cfg.driftFactor) > 0 {
				if c.cfg.noFencing {
					token = 0 // every node reported 1: there is no token
				}
				return &Lock{c: c, key: key, fence: fence, id: id, ttl: ttl, token: Token(token), until: validityEnd, sent: sent}, nil
			}
			cause = errValidityExpired
			break
		}
		if v == lost {
			break
		}
		if !now.Before(validityEnd) {
			cause = errValidityExpired
			break
		}
		next := validityEnd
		for i, s := range tally.state {
			if (s == statePending || s == stateRaising) && deadline[i].Before(next) {
				next = deadline[i]
			}
		}
		timer.Reset(next.Sub(now))
		select {
		case r := <-replies:
			c.applyAcquireReply(tally, r, nodeErrs, answered, held, sendRaise)
		case <-timer.C:
			now := c.cfg.clock.Now()
			for i, s := range tally.state {
				if (s == statePending || s == stateRaising) && !now.Before(deadline[i]) {
					tally.failed(i)
					nodeErrs[i] = c.nodeErr(i, errNodeTimeout)
				}
			}
		case <-ctx.Done():
			cause = ctx.Err()
		}
		if cause != nil {
			break
		}
	}

	// Failed: build the error, then undo on every node that may hold our key.
	err := &QuorumError{Op: "acquire", Key: key, Quorum: c.quorum, Agreed: tally.agreed(),
		Total: n, Cause: cause, sentinel: ErrNotAcquired}
	for i, s := range tally.state {
		if nodeErrs[i] == nil && (s == statePending || s == stateRaising) {
			nodeErrs[i] = c.nodeErr(i, errAbandoned)
		}
	}
	err.Nodes = collectNodeErrors(nodeErrs)
	c.undoAcquire(ctx, key, id, ttl, replies, answered, held)
	return nil, err
}

// applyAcquireReply feeds one reply into the tally.
func (c *Client) applyAcquireReply(t *acquireTally, r nodeReply, nodeErrs []error, answered, held []bool,
	sendRaise func(int, int64, time.Time)) {
	i := r.node
	if r.raise {
		switch {
		case r.err != nil:
			nodeErrs[i] = c.nodeErr(i, r.err)
			c.cfg.logger.Debug("redlock: raise failed", "node", i, "err", r.err)
			if t.state[i] == stateRaising {
				t.failed(i)
			}
		case r.val == 1:
			t.raiseDone(i, true)
		case r.val == 0:
			nodeErrs[i] = c.nodeErr(i, errNotOurs)
			t.raiseDone(i, false)
		default:
			nodeErrs[i] = c.nodeErr(i, errCounterAhead)
			t.raiseDone(i, false)
		}
		return
	}
	answered[i] = true
	switch {
	case r.err != nil:
		nodeErrs[i] = c.nodeErr(i, r.err)
		c.cfg.logger.Debug("redlock: acquire failed on node", "node", i, "err", r.err)
		t.failed(i)
	case r.val <= 0 && c.cfg.noFencing:
		// A plain SET NX cannot tell whose key is there: it may be ours, set by a call that
		// go-redis resent after losing the reply. Leave held[i] false so that an undo
		// releases it; the release only deletes a key holding our id.
		nodeErrs[i] = c.nodeErr(i, heldError{left: -1})
		t.refused(i)
	case r.val <= 0:
		nodeErrs[i] = c.nodeErr(i, heldError{left: -r.val})
		held[i] = true
		t.refused(i)
	default:
		nodeErrs[i] = nil
		if t.acquired(i, r.val) {
			sendRaise(i, t.target, c.cfg.clock.Now())
		}
	}
}

// undoAcquire releases our key on every node that may hold it, in the background, with a
// context that the caller's cancellation does not reach. A node whose acquire reply has not
// arrived is released only after it arrives, so the release cannot overtake the SET.
func (c *Client) undoAcquire(ctx context.Context, key, id string, ttl time.Duration, replies <-chan nodeReply, answered, held []bool) {
	// The undo runs in the background, so it can afford to wait longer than the node timeout
	// (a busy node that answers late still gets its key removed), but never past the TTL,
	// after which the key is gone anyway.
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl, max(4*c.cfg.nodeTimeout, time.Second)))
	pending := &sync.WaitGroup{}
	rel := newScriptCall(releaseScript, []string{key}, id)
	release := func(i int) {
		pending.Add(1)
		c.spawn(func() {
			defer pending.Done()
			if _, err := rel.run(undoCtx, c.nodes[i].client); err != nil {
				c.cfg.logger.Warn("redlock: undo of a failed acquire did not reach a node; the key expires with its TTL",
					"key", key, "node", i, "err", err)
			}
		})
	}
	waiting := 0
	for i, done := range answered {
		switch {
		case !done:
			waiting++
		case !held[i]:
			release(i)
		}
	}
	c.spawn(func() {
		for waiting > 0 {
			r := <-replies
			if r.raise || answered[r.node] {
				continue
			}
			answered[r.node] = true
			waiting--
			// Without fencing a "present" reply may be a resend of ours (see
			// applyAcquireReply), so it is released too.
			if r.err != nil || r.val > 0 || c.cfg.noFencing {
				release(r.node)
			}
		}
		pending.Wait()
		cancel()
	})
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
