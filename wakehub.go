package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeLinger is how long a key's subscription outlives its last waiter. A key that is
// contended again within it needs no new SUBSCRIBE (and no catch-up attempt, see
// wakeHub.subscribed); a key wanted once costs one SUBSCRIBE and one UNSUBSCRIBE per node.
const wakeLinger = 2 * time.Second

// Bounds of the pause between two failed reads of a node's subscription connection (node
// down, connection refused): doubled from the first to the last.
const (
	wakeBackoffMin = 50 * time.Millisecond
	wakeBackoffMax = 5 * time.Second
)

// wakeHub delivers the releases that other processes announce (release.lua publishes on
// wakeChannel(key) when it deleted the key) to this Client's waiters: at most one go-redis
// PubSub per node, made on the first subscription, subscribed to the channels of the keys
// that have waiters here (reference counted, so that one waiter may watch several keys),
// each kept for wakeLinger after its last waiter left. Once a quorum of nodes has announced
// a release, the key's head waiter is kicked (waitQueues.released) and makes an attempt at
// once.
//
// A wake-up only makes a waiter try now instead of after its pause; it never decides
// anything, so a lost, late, duplicated or forged message costs at most one retry pause or
// one extra attempt, never mutual exclusion (docs/design.md, "Wake-ups"). Every failure
// here (a node down, SUBSCRIBE refused by an ACL) is logged at Debug and means polling.
type wakeHub struct {
	c      *Client
	linger time.Duration // wakeLinger; tests shorten it before the first subscription

	mu      sync.Mutex
	subs    map[string]*wakeSub // per key with waiters or lingering
	stamp   uint64              // wake events so far, all keys: orders them for since
	nodes   []*wakeNode         // per node; nil until the first subscription
	closed  bool
	ctx     context.Context // ends at close: stops dials and the goroutines
	cancel  context.CancelFunc
	sweepCh chan struct{} // closed at close, for the sweeper's sleep
	wg      sync.WaitGroup
}

// wakeSub is one key's subscription.
type wakeSub struct {
	refs  int       // waiters (subscribe calls) not yet unsubscribed
	idle  time.Time // when refs fell to 0
	stamp uint64    // hub stamp of the key's last wake event, 0 for none
	heard []heard   // the latest releases heard, newest last, at most wakeHeard
	// crowded: a woken attempt on the key lost to another contender lately, so several
	// waiters answer each release (see seniorityDelay).
	crowded bool
	caught  bool // the catch-up kick of subscribed was given
}

// heard is one release of a key (one holder id) as the nodes announce it.
type heard struct {
	id     string
	nodes  []bool // the nodes whose announcement arrived
	count  int
	kicked bool // counted as a wake event already
}

// wakeHeard is how many releases of one key a wakeSub remembers, so that a late
// announcement of an older release does not restart the count of the newest one.
const wakeHeard = 4

// wakeNode is the subscription connection to one node, with its two goroutines: sync
// brings the node's subscriptions in line with the hub's keys, read takes the messages.
type wakeNode struct {
	h     *wakeHub
	i     int
	ps    *redis.PubSub
	dirty chan struct{} // buffered 1: the hub's key set changed
}

// wakeChannel is the pub/sub channel on which a release of key is announced.
func wakeChannel(key string) string { return WakeChannelPrefix + key }

// subscribe registers a waiter for key: the key's channel is subscribed on every node
// (asynchronously: nothing here waits for a node). No-op when wake-ups are off or the
// client is closed. Every subscribe needs one unsubscribe.
func (h *wakeHub) subscribe(key string) {
	if h.c.cfg.noWakeups {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if h.nodes == nil {
		h.startLocked()
	}
	if h.subs == nil {
		h.subs = map[string]*wakeSub{}
	}
	s := h.subs[key]
	if s == nil {
		s = &wakeSub{}
		h.subs[key] = s
		h.dirtyLocked()
	}
	s.refs++
}

// unsubscribe ends a subscribe; the key's channel stays subscribed for the linger time
// after its last waiter left.
func (h *wakeHub) unsubscribe(key string) {
	if h.c.cfg.noWakeups {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[key]; s != nil && s.refs > 0 {
		s.refs--
		if s.refs == 0 {
			s.idle = time.Now()
		}
	}
}

// mark returns the current stamp: a later since(key, mark) reports the wake events of key
// after this call.
func (h *wakeHub) mark() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stamp
}

// since reports whether key had a wake event after mark was taken.
func (h *wakeHub) since(key string, mark uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	return s != nil && s.stamp > mark
}

// heardFrom records node's announcement of a release of key by holder id. The head is
// kicked once a quorum of nodes has announced it: only then has the key gone from a
// quorum, so that an attempt can succeed; one woken by the first node alone could reach the
// others before the release does, fail, and then wait its whole pause. With node -1 the
// release is this client's own, confirmed by a quorum already: kicked at once, and the
// nodes' announcements of it are dropped.
func (h *wakeHub) heardFrom(key, id string, node int) {
	h.mu.Lock()
	s := h.subs[key]
	if s == nil {
		h.mu.Unlock()
		if node < 0 {
			h.c.wait.released(key)
		}
		return
	}
	var r *heard
	for i := range s.heard {
		if s.heard[i].id == id {
			r = &s.heard[i]
		}
	}
	if r == nil {
		if len(s.heard) == wakeHeard {
			s.heard = append(s.heard[:0], s.heard[1:]...)
		}
		s.heard = append(s.heard, heard{id: id, nodes: make([]bool, len(h.c.nodes))})
		r = &s.heard[len(s.heard)-1]
	}
	if node >= 0 && !r.nodes[node] {
		r.nodes[node] = true
		r.count++
	}
	if r.kicked || (node >= 0 && r.count < h.c.quorum) {
		h.mu.Unlock()
		return
	}
	r.kicked = true
	h.stamp++
	s.stamp = h.stamp
	h.mu.Unlock()
	h.c.wait.released(key)
}

// subscribed records that key's subscription became active on a node, and kicks the head:
// a release between its last attempt and the subscription would otherwise be missed, so
// it tries once more.
func (h *wakeHub) subscribed(key string) {
	h.mu.Lock()
	s := h.subs[key]
	first := s != nil && !s.caught
	if first {
		s.caught = true
	}
	h.mu.Unlock()
	if first {
		// Once per subscription, when its first node is listening: the head tries once more,
		// for a release announced before that. It is not a wake-up by a release.
		h.c.wait.catchUp(key)
	}
}

// crowded reports whether attempts made on a wake-up lately lost to other contenders:
// several waiters answer each release of key (see seniorityDelay).
func (h *wakeHub) crowded(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	return s != nil && s.crowded
}

// wokenAttempt records the outcome of an attempt made on a wake-up by a waiter that had
// lost losses such attempts before: a loss (to another contender) marks the key crowded, a
// win by a waiter that never lost shows that nobody older was waiting and clears the mark.
func (h *wakeHub) wokenAttempt(key string, won bool, losses int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[key]; s != nil && (!won || losses == 0) {
		s.crowded = !won
	}
}

// startLocked makes the per-node PubSubs (no I/O until the first SUBSCRIBE) and starts
// their goroutines and the sweeper.
func (h *wakeHub) startLocked() {
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.sweepCh = make(chan struct{})
	h.nodes = make([]*wakeNode, len(h.c.nodes))
	for i, nd := range h.c.nodes {
		n := &wakeNode{h: h, i: i, ps: nd.client.Subscribe(h.ctx), dirty: make(chan struct{}, 1)}
		h.nodes[i] = n
		h.wg.Add(2)
		go n.sync()
		go n.read()
	}
	h.wg.Add(1)
	go h.sweep()
}

func (h *wakeHub) dirtyLocked() {
	for _, n := range h.nodes {
		select {
		case n.dirty <- struct{}{}:
		default:
		}
	}
}

// sweep drops the subscriptions whose last waiter left more than the linger time ago.
func (h *wakeHub) sweep() {
	defer h.wg.Done()
	h.mu.Lock()
	every := max(h.linger/2, time.Millisecond)
	h.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.sweepCh:
			return
		}
		h.mu.Lock()
		dropped := false
		for k, s := range h.subs {
			if s.refs == 0 && time.Since(s.idle) >= h.linger {
				delete(h.subs, k)
				dropped = true
			}
		}
		if dropped {
			h.dirtyLocked()
		}
		h.mu.Unlock()
	}
}

// channels returns the channels the nodes should be subscribed to now.
func (h *wakeHub) channels() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.subs))
	for k := range h.subs {
		out[wakeChannel(k)] = true
	}
	return out
}

// close stops every subscription and waits for the goroutines. Idempotent; later
// subscribes are no-ops.
func (h *wakeHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	nodes := h.nodes
	h.mu.Unlock()
	if nodes == nil {
		return
	}
	h.cancel() // a dial under way gives up, so the PubSubs' locks come free
	close(h.sweepCh)
	for _, n := range nodes {
		_ = n.ps.Close() // a blocked read fails, so read returns
	}
	h.wg.Wait()
}

// sync keeps the node's subscriptions equal to the hub's channel set. go-redis remembers
// what was asked even when the node cannot be reached, and subscribes again on every
// reconnection, so what was asked is what the node will have.
func (n *wakeNode) sync() {
	defer n.h.wg.Done()
	have := map[string]bool{}
	for {
		select {
		case <-n.dirty:
		case <-n.h.ctx.Done():
			return
		}
		want := n.h.channels()
		var add, drop []string
		for ch := range want {
			if !have[ch] {
				add = append(add, ch)
				have[ch] = true
			}
		}
		for ch := range have {
			if !want[ch] {
				drop = append(drop, ch)
				delete(have, ch)
			}
		}
		if len(add) > 0 {
			if err := n.ps.Subscribe(n.h.ctx, add...); err != nil && n.h.ctx.Err() == nil {
				n.h.c.cfg.logger.Debug("redlock: wake-up subscribe failed; waiters poll this node", "node", n.i, "err", err)
			}
		}
		if len(drop) > 0 {
			if err := n.ps.Unsubscribe(n.h.ctx, drop...); err != nil && n.h.ctx.Err() == nil {
				n.h.c.cfg.logger.Debug("redlock: wake-up unsubscribe failed", "node", n.i, "err", err)
			}
		}
	}
}

// read takes the node's pub/sub traffic: a message is a release (wakeHub.heardFrom), a
// subscribe confirmation an active subscription (wakeHub.subscribed). A connection that fails is dialled again by
// go-redis at the next read, after a pause that doubles while the node stays unreachable.
func (n *wakeNode) read() {
	defer n.h.wg.Done()
	var backoff time.Duration
	for {
		msg, err := n.ps.Receive(n.h.ctx)
		if n.h.ctx.Err() != nil {
			return
		}
		if err != nil {
			n.h.c.cfg.logger.Debug("redlock: wake-up subscription failed; waiters poll this node", "node", n.i, "err", err)
			var rerr redis.Error
			if errors.As(err, &rerr) {
				continue // an error reply (NOPERM, say): the connection itself is fine
			}
			backoff = min(max(2*backoff, wakeBackoffMin), wakeBackoffMax)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-n.h.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Message:
			if key, ok := strings.CutPrefix(m.Channel, WakeChannelPrefix); ok {
				n.h.heardFrom(key, m.Payload, n.i)
			}
		case *redis.Subscription:
			if key, ok := strings.CutPrefix(m.Channel, WakeChannelPrefix); ok && m.Kind == "subscribe" {
				n.h.subscribed(key)
			}
		}
	}
}
