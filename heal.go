package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// Healing: a long hold on nodes that restart one after another. A node that restarts
// without persistence (or evicts the key) answers an extend with "not ours"; without help,
// every such restart leaves the hold on one node fewer, and after n − q + 1 of them no extend
// can reach a quorum although no other holder ever took the key. So when an extend has been
// confirmed by a quorum, the nodes that answered "not ours" get heal.lua: our keys are set
// there again with SET NX (never over another holder's key), for at most the validity time
// left, and their fence counters are lifted to at least our tokens (a missing counter to at
// least the clock seed too, as an acquire would seed it). docs/design.md §5.9 gives
// the argument that mutual exclusion and the token claims still hold.

// heal sends heal.lua to the given nodes. It runs after a successful extend, on the
// transport's goroutine or the caller's, and never blocks.
func (l *Lock) heal(ctx context.Context, nodes []int) {
	c := l.c
	left := l.Until().Sub(c.cfg.clock.Now())
	if left < time.Millisecond {
		return // no validity left to give the keys: the next extend fails or succeeds without them
	}
	cmd := newHealCommand(l.set, healArgs{id: l.id, px: c.keyTTLMillis(left), idleMillis: c.counterIdleMillis(l.ttl),
		fenced: !c.cfg.noFencing, seed: counterSeed(c.cfg.clock.Now()), layout: c.cfg.layout, tokens: l.tokens})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.releasing != nil {
		// A release has taken (or is taking) its snapshot of l.last: a heal now could land
		// after the delete and leave our keys behind until they expire.
		return
	}
	for _, i := range nodes {
		c.cfg.logger.Debug("redlock: healing a node that lost the lock's keys", "key", l.set.logKey(), "node", i)
		cl := cmd.newCall(0, healLog{l: l, ctx: ctx})
		c.sendAfterTo(i, l.last[i], cl)
		l.last[i] = cl
	}
}

// healLog reports the outcome of heals.
type healLog struct {
	l   *Lock
	ctx context.Context
}

func (h healLog) Deliver(ev transport.Event) {
	if o := h.l.c.cfg.observer; o != nil && transport.FirstOutcome(ev) {
		h.l.c.observeNode(o, h.ctx, OpHeal, ev, ev.Err == nil && ev.Val == 1)
	}
	if !ev.Final() {
		return
	}
	log := h.l.c.cfg.logger
	switch {
	case ev.Err != nil:
		log.Debug("redlock: heal did not reach the node", "key", h.l.set.logKey(), "node", ev.Node, "err", ev.Err)
	case ev.Val == 1:
		log.Debug("redlock: node healed", "key", h.l.set.logKey(), "node", ev.Node)
	default:
		log.Debug("redlock: node not healed: another holder has the key there", "key", h.l.set.logKey(), "node", ev.Node)
	}
}
