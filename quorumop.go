package redlock

import (
	"context"
	"time"

	"github.com/hashicorp/go-multierror"
)

// quorumOp runs a compare-and-act script (release.lua, extend.lua) on every node in
// parallel. A node agrees when the script returns 1. quorumOp returns nil as soon as a
// quorum agreed, and a *QuorumError matching ErrNotHeld as soon as a quorum became
// impossible, a node timeout passed or ctx ended. Nodes that have not answered by then
// finish in the background, owned by the client, and are not cut short by ctx. The script
// goes to node i only once after[i] is closed (the lock's acquire call there has returned),
// so it cannot overtake that call; after has one channel per node.
func (c *Client) quorumOp(ctx context.Context, op, key string, after []chan struct{}, sc *scriptCall) error {
	n := len(c.nodes)
	replies := make(chan nodeReply, n)
	// The calls themselves outlive ctx: once sent, a release or extend should reach every
	// node even if the caller stops waiting (returns at quorum, or its context ends). Each is
	// still bounded by the node timeout.
	calls := c.newBatch(context.WithoutCancel(ctx))
	for i := range c.nodes {
		c.bg.Add(1) // as spawn, without its second closure: this is the hot path
		go func() {
			defer c.bg.Done()
			var v int64
			var err error
			select {
			case <-after[i]: // closed: the lock's acquire call on this node has returned
				v, err = sc.run(calls.ctx, c.nodes[i].client)
			default:
				<-after[i] // a slow acquire there: wait for it, then take a full node timeout
				v, err = c.eval(context.WithoutCancel(ctx), i, sc)
			}
			calls.done()
			replies <- nodeReply{node: i, val: v, err: err}
		}()
	}
	timer := time.NewTimer(c.cfg.nodeTimeout)
	defer timer.Stop()
	nodeErrs := make([]error, n)
	answered := make([]bool, n)
	agreed, refused := 0, 0
	var cause error
	for agreed < c.quorum && n-refused >= c.quorum && cause == nil {
		select {
		case r := <-replies:
			answered[r.node] = true
			switch {
			case r.err != nil:
				nodeErrs[r.node] = c.nodeErr(r.node, r.err)
				c.cfg.logger.Debug("redlock: node failed", "op", op, "key", key, "node", r.node, "err", r.err)
				refused++
			case r.val == 1:
				agreed++
			default:
				nodeErrs[r.node] = c.nodeErr(r.node, errNotOurs)
				refused++
			}
		case <-timer.C:
			cause = errNodeTimeout
		case <-ctx.Done():
			cause = ctx.Err()
		}
	}
	if agreed >= c.quorum {
		return nil
	}
	missing := errAbandoned
	if cause == errNodeTimeout {
		cause, missing = nil, errNodeTimeout // reported per node
	}
	for i, done := range answered {
		if !done {
			nodeErrs[i] = c.nodeErr(i, missing)
		}
	}
	return &QuorumError{Op: op, Key: key, Quorum: c.quorum, Agreed: agreed, Total: n,
		Cause: cause, Nodes: collectNodeErrors(nodeErrs), sentinel: ErrNotHeld}
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
