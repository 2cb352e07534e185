package redlock

import (
	"context"
	"sync"

	"github.com/hashicorp/go-multierror"
)

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
	key string

	mu       sync.Mutex
	agreed   int
	refused  int
	answered []bool
	nodeErrs []error
	decided  bool
	done     func(error)
}

func (c *Client) newQuorumOp(op, key string, done func(error)) *quorumOp {
	n := len(c.nodes)
	return &quorumOp{c: c, op: op, key: key, answered: make([]bool, n), nodeErrs: make([]error, n), done: done}
}

// start sends cmd to every node, each after the lock's acquire call there (acq[i], which
// may be nil), so that it cannot overtake a slow SET. With cancelQueued, a node whose
// acquire call has not been written yet gets no call at all: the acquire is cancelled
// instead (a release: our key will never be there). Such a node does not count towards the
// quorum, so a Release still returns only once a quorum of nodes deleted the key.
func (o *quorumOp) start(acq []*call, cmd *command, cancelQueued bool) {
	for i := range o.c.nodes {
		var prev *call
		if acq != nil {
			prev = acq[i]
		}
		// Never written to this node: still queued (cancelled now), or dropped before (the
		// node was stalled, or the attempt failed). Our key is not there and never will be.
		if cancelQueued && prev != nil && (prev.cancel() || prev.state.Load() == callCancelled) {
			o.deliver(event{node: i, out: notSent, err: errAcquireNotSent})
			continue
		}
		cl := cmd.newCall(0, o)
		cl.keep = cancelQueued // a release is never dropped
		o.c.sendAfterTo(i, prev, cl)
	}
}

func (o *quorumOp) deliver(ev event) {
	if ev.out == late {
		return // counted already as a timeout
	}
	o.mu.Lock()
	i := ev.node
	if o.decided || o.answered[i] {
		o.mu.Unlock()
		return
	}
	o.answered[i] = true
	switch {
	case ev.err != nil:
		o.nodeErrs[i] = o.c.nodeErr(i, ev.err)
		o.c.cfg.logger.Debug("redlock: node failed", "op", o.op, "key", quoteKey(o.key), "node", i, "err", ev.err)
		o.refused++
	case ev.val == 1:
		o.agreed++
	default:
		o.nodeErrs[i] = o.c.nodeErr(i, errNotOurs)
		o.refused++
	}
	var err error
	switch {
	case o.agreed >= o.c.quorum:
	case len(o.c.nodes)-o.refused < o.c.quorum:
		err = o.errorLocked(nil)
	default:
		o.mu.Unlock()
		return
	}
	o.decided = true
	o.mu.Unlock()
	o.done(err)
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
	return &QuorumError{Op: o.op, Key: o.key, Quorum: o.c.quorum, Agreed: o.agreed, Total: len(o.c.nodes),
		Cause: cause, Nodes: collectNodeErrors(errs), sentinel: ErrNotHeld}
}

// runQuorumOp starts an op and waits for its outcome or for ctx to end. then, if not nil,
// sees the outcome first and may replace it; it runs exactly once.
func (c *Client) runQuorumOp(ctx context.Context, op, key string, acq []*call, cmd *command, release bool, then func(error) error) error {
	ch := make(chan error, 1)
	o := c.newQuorumOp(op, key, func(err error) {
		if then != nil {
			err = then(err)
		}
		ch <- err
	})
	o.start(acq, cmd, release)
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

// collectNodeErrors aggregates the non-nil per-node errors, or returns nil.
func collectNodeErrors(errs []error) *multierror.Error {
	var m *multierror.Error
	for _, e := range errs {
		if e != nil {
			m = multierror.Append(m, e)
		}
	}
	return m
}
