package redlock

import (
	"context"
	"sync"

	"github.com/quorumlock/redlock/internal/transport"
)

// The fan-outs. Every command to a node goes through that node's queue in the transport
// (internal/transport, through sendTo and sendAfterTo), which reports each call's first outcome, within the
// node timeout, to the call's sink; no operation spawns a goroutine per node or keeps a
// timer per node. What differs per operation is only the sink that decides: quorumOp below
// (extend, release: done at a quorum), askAll (Status and New's run_id check: every node's
// view), and attempt in attempt.go (acquire: the tallies, raises and undo).

// quorumOp runs a compare-and-act script (release.lua, extend.lua) on every node and
// decides as soon as the outcome is known: nil once a quorum returned 1, a *QuorumError
// matching ErrNotHeld once a quorum became impossible. Every call gets an outcome from the
// transport (an answer, a timeout counted from its write, or "not sent"), so an op always
// decides. done runs exactly once, on a transport goroutine or on the caller's, without the
// op's lock held. The calls outlive the caller: once sent, a release or extend reaches
// every node even if nobody waits for it any more.
type quorumOp struct {
	c   *Client
	op  string
	set lockKeys
	ctx context.Context // for the observer's events
	obs Observer        // nil without one

	// Set before start.
	after   []*transport.Call // per node: the call this op's call goes out after (may be nil)
	cmd     *command          // sent to every node
	release bool              // a release: see start
	rel     *pendingRelease
	// heal, if not nil, is given the nodes that answered that our keys are not there, once
	// the op has succeeded (an extend: heal.go); later answers of that kind come one by one.
	heal func(ctx context.Context, nodes []int)

	// turn, if not nil (a queued release), is told of each node that answered 2: this
	// Client's next waiter for the key is the head of the key's queue there.
	turn func(node int)
	// tidyNeverSent: a queued release of a lock whose waiter had the Client's place in the
	// nodes' queue (Lock.placed), or whose Client has another waiter for the key, to whom
	// the release moves that place; see start.
	tidyNeverSent bool

	mu       sync.Mutex
	agreed   int
	refused  int
	answered []bool
	nodeErrs []error
	missing  []int // nodes that answered "not ours" before the op was decided
	decided  bool
	ok       bool // decided with a quorum
	done     func(error)
}

func (c *Client) newQuorumOp(ctx context.Context, op string, set lockKeys, done func(error)) *quorumOp {
	n := len(c.nodes)
	return &quorumOp{c: c, op: op, set: set, ctx: ctx, obs: c.cfg.observer, answered: make([]bool, n), nodeErrs: make([]error, n), done: done}
}

// start sends cmd to every node, each after the lock's last call there that may have set
// our keys (after[i], which may be nil), so that it cannot overtake a slow SET. For a
// release, a node where that call has not been written yet does not count: the call is
// cancelled instead (our keys will never be there), so a Release still returns only once a
// quorum of nodes deleted the keys. Such a node gets no call, except when the call was
// waiting in the node's queue (not refused there for a stalled node) and the Client's place
// in the nodes' queue may stand there (o.tidyNeverSent): then the release goes all
// the same, behind the Client's older release or undo of the key still on its way there,
// for that place (tidy).
func (o *quorumOp) start() {
	var older []*transport.Call
	if o.release {
		if o.tidyNeverSent && o.after != nil {
			older = o.c.pending.after(o.set.keys) // before begin: the releases before this one
		}
		o.rel = o.c.pending.begin(o.set.keys, len(o.c.nodes))
		defer o.c.pending.end(o.rel)
	}
	calls := o.cmd.newCalls(len(o.c.nodes), 0, o)
	for i := range o.c.nodes {
		var prev *transport.Call
		if o.after != nil {
			prev = o.after[i]
		}
		// Never written to this node: still queued (cancelled now), or dropped before (the
		// node was stalled, or the attempt failed). Our key is not there and never will be.
		if o.release && prev != nil {
			cancelledNow := prev.Cancel() // it was waiting in the node's queue
			if cancelledNow || prev.Cancelled() {
				o.Deliver(transport.Event{Node: i, Out: transport.NotSent, Err: errAcquireNotSent})
				if cancelledNow && o.tidyNeverSent {
					o.tidy(i, older)
				}
				continue
			}
		}
		cl := &calls[i]
		if o.release {
			cl.Keep = true                // a release is never dropped
			o.c.pending.add(o.rel, i, cl) // the next acquire of the keys goes after it
		}
		o.c.sendAfterTo(i, prev, cl)
	}
}

// tidy sends a queued release to node i, where the lock's acquire was never written, for
// the Client's place in the key's queue there: it stands for this lock's waiter (the
// Client's previous release put it there, or this waiter's earlier refused attempt), and
// without this call nothing of the Client would reach that node until its next acquire of
// the key, so the place would stay, at the head of a free key, until its liveness ran out.
// On a node where our key is not, the release script takes the place out or moves it to the
// Client's next waiter, and tells the next head if the place was the head of a free key
// (lua/queue.lua, qelsewhere; design.md §3.10). Its reply does not count towards the
// release's quorum (the node was counted as not sent), so nothing waits for it, but a 3 (the
// Client, still queued, is the head of the free key there) is a turn for the Client's next
// waiter (tidyReply): nobody else tells it. With several waiters of the Client for the key,
// the place there would otherwise keep the ticket of the waiter before, ahead of other
// Clients' places that stand behind it elsewhere, and the nodes' queues would disagree on
// their head with the key free everywhere (TestRealQueueHotKeyRollingLag). It is kept
// in the pending releases, so that the Client's next acquire of the key goes after it.
// Unlike the release's own calls it may be dropped, as the leave may: a node that stalls
// drops it unwritten (the place then expires), where a kept call would wait there for the
// node and hold back the Client's next acquire call to it, which an attempt split between
// the other nodes then waits for (TestRealHungNodeUnderContention: a 5 s stall).
func (o *quorumOp) tidy(i int, older []*transport.Call) {
	var prev *transport.Call
	if older != nil {
		prev = older[i]
	}
	cl := o.cmd.newCall(0, tidyReply{o.turn})
	o.c.pending.add(o.rel, i, cl)
	o.c.sendAfterTo(i, prev, cl)
}

// tidyReply hears the reply of a tidying release (quorumOp.tidy): a node where our next
// waiter is now the head of the free key (release.lua's 3) tells it its turn.
type tidyReply struct{ turn func(node int) }

func (t tidyReply) Deliver(ev transport.Event) {
	if t.turn != nil && nextWaiterTurn(ev) {
		t.turn(ev.Node)
	}
}

// nextWaiterTurn reports whether ev, the reply of a queued release or undo (release.lua),
// says that the Client's next waiter for the key is the head of the key's queue on that
// node with the key free: 2 where the key was ours and deleted, 3 where it was not ours.
func nextWaiterTurn(ev transport.Event) bool {
	return ev.Err == nil && (ev.Val == 2 || ev.Val == 3)
}

func (o *quorumOp) Deliver(ev transport.Event) {
	// Our next waiter is the head there now (2: the key deleted; 3: it was not ours there),
	// also when the node answered after its timeout: nobody else is told that turn.
	if o.turn != nil && nextWaiterTurn(ev) {
		o.turn(ev.Node)
	}
	if ev.Out == transport.Late {
		return // counted already as a timeout
	}
	i := ev.Node
	ok := ev.Val == 1 || (o.release && ev.Val == 2) // release.lua: 2 is 1 with our waiter first in the queue
	notOurs := ev.Out == transport.Replied && ev.Err == nil && !ok
	o.mu.Lock()
	if o.answered[i] {
		o.mu.Unlock()
		return
	}
	o.answered[i] = true
	if o.obs != nil {
		o.c.observeNode(o.obs, o.ctx, OpKind(o.op), ev, ev.Err == nil && ok)
	}
	if o.decided {
		healNow := o.ok && notOurs && o.heal != nil
		o.mu.Unlock()
		if healNow {
			o.heal(o.ctx, []int{i})
		}
		return
	}
	switch {
	case ev.Err != nil:
		o.nodeErrs[i] = o.c.nodeErr(i, ev.Err)
		o.c.cfg.logger.Debug("redlock: node failed", "op", o.op, "key", o.set.logKey(), "node", i, "err", ev.Err)
		o.refused++
	case ok:
		o.agreed++
	default:
		o.nodeErrs[i] = o.c.nodeErr(i, errNotOurs)
		o.refused++
		if notOurs {
			o.missing = append(o.missing, i)
		}
	}
	var err error
	switch {
	case o.agreed >= o.c.quorum:
		o.ok = true
	case len(o.c.nodes)-o.refused < o.c.quorum:
		err = o.errorLocked(nil)
	default:
		o.mu.Unlock()
		return
	}
	o.decided = true
	missing := o.missing
	o.mu.Unlock()
	o.done(err)
	if err == nil && o.heal != nil && len(missing) > 0 {
		o.heal(o.ctx, missing)
	}
}

// abandon decides the op as failed because the caller stopped waiting (cause), unless it
// was decided already. It reports whether it decided; done is not called then.
func (o *quorumOp) abandon(cause error) (error, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decided {
		return nil, false
	}
	o.decided = true
	return o.errorLocked(cause), true
}

func (o *quorumOp) errorLocked(cause error) error {
	errs := make([]error, len(o.nodeErrs))
	copy(errs, o.nodeErrs)
	for i, done := range o.answered {
		if !done {
			errs[i] = o.c.nodeErr(i, errAbandoned)
		}
	}
	return &QuorumError{Op: o.op, Key: o.set.keys[0], Keys: o.set.multi(), Quorum: o.c.quorum, Agreed: o.agreed,
		Total: len(o.c.nodes), Cause: cause, Nodes: collectNodeErrors(errs), sentinel: ErrNotHeld}
}

// runQuorumOp starts o, made with a nil done, and waits for its outcome or for ctx to end.
// then, if not nil, sees the outcome first and may replace it; it runs exactly once.
func (c *Client) runQuorumOp(ctx context.Context, o *quorumOp, then func(error) error) error {
	ch := make(chan error, 1)
	o.done = func(err error) {
		if then != nil {
			err = then(err)
		}
		ch <- err
	}
	o.start()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		if err, ok := o.abandon(ctx.Err()); ok {
			if then != nil {
				err = then(err)
			}
			return err
		}
		return <-ch
	}
}

// askAll sends cmd to every node and hands each node's first outcome (an answer, a timeout
// or "not sent") to each, on the calling goroutine, until every node has one or ctx ends, when
// it returns ctx.Err(). For reads that want every node's view (Status, New's run_id check).
func (cl *Client) askAll(ctx context.Context, cmd *command, each func(transport.Event)) error {
	n := len(cl.nodes)
	replies := make(chan transport.Event, 2*n) // a timeout and a late reply per node at most
	for i := range cl.nodes {
		cl.sendTo(i, cmd.newCall(0, chanSink(replies)))
	}
	for got := 0; got < n; {
		select {
		case ev := <-replies:
			if ev.Out == transport.Late {
				continue // reported as a timeout already
			}
			got++
			each(ev)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// sendTo enqueues c on node i.
func (cl *Client) sendTo(i int, c *transport.Call) {
	c.Node = i
	cl.nodes[i].q.Send(c)
}

// sendAfterTo enqueues c on node i once prev (a call to the same node, or nil) is final.
func (cl *Client) sendAfterTo(i int, prev, c *transport.Call) {
	c.Node = i
	cl.nodes[i].q.SendAfter(prev, c)
}

// chanSink delivers events into a channel that has room for all of them.
type chanSink chan transport.Event

func (s chanSink) Deliver(ev transport.Event) { s <- ev }
