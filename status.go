package redlock

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// NodeStatus is what one node says about a lock key.
type NodeStatus struct {
	Node   int    // index in the slice given to New
	Addr   string // the node's address, when its client exposes one
	Err    error  // nil when the node answered; a *NodeError otherwise
	Holder string // the holder id stored under the key, "" when the key is absent
	// TTL is the key's remaining time on the node, 0 when absent. A key set by a client
	// made [WithLockDelay] lives ttl + delay, so this includes the delay: after the
	// holder's Until has passed, the key may still be here, and the lock still refused to
	// others, for up to the delay.
	TTL time.Duration
	// Counter is the larger of the key's two fence counters here, 0 when it has neither:
	// every token this node issued for the key is at most Counter. SlotCounter and
	// KeyCounter are the two (docs/design.md §5.11), 0 when absent; the slot counter is shared
	// by every key of the key's hash slot.
	Counter     Token
	SlotCounter Token
	KeyCounter  Token
	// Waiters is the number of places in the key's waiter queue on this node (the Acquire
	// calls of other processes, one per Client, waiting their turn; docs/design.md §3.10). A
	// waiter that died keeps its place until it expires. -1 when the node would not say (an
	// ACL user without ZCARD).
	Waiters int
}

// Status is a snapshot of a lock key across the nodes, for operators and tools. It is read
// without taking the lock and may be stale by the time it is printed.
type Status struct {
	Key    string
	Quorum int
	Nodes  []NodeStatus
	// Holder is the holder id found on at least a quorum of nodes, "" when no holder has a
	// quorum (free, expired on too many nodes, or split). With [WithLockDelay] it also names
	// a holder whose validity has ended but whose keys are still serving the delay; Status
	// cannot tell the two apart, since a node knows only the key's remaining time.
	Holder string
	// NextTokenAtLeast is a lower bound on the token the next successful acquire can get:
	// an acquire needs a quorum of nodes, each of which increments its counter (or seeds a
	// missing one from the clock), so the token is at least the Q-th smallest of those next
	// values; nodes that did not answer count as unknown (as low as possible), and a node
	// whose counter is at the maximum (2^63 − 1) cannot take part. 0 when too few nodes
	// answered to say, or too few can mint another token. It bounds the next fenced
	// acquire; a Client made
	// [WithoutFencing] gets token 0 and leaves the counters alone.
	NextTokenAtLeast Token
}

// HeldByQuorum reports whether one holder's key is present on at least a quorum of nodes.
func (s *Status) HeldByQuorum() bool { return s.Holder != "" }

// Status reads the lock key, its remaining TTL and its fence counter on every node in
// parallel, atomically per node, changing nothing. It waits for every node's answer, each
// bounded by the node timeout from the moment it is written; a node that fails or does not
// answer in time has its Err set. Status returns an
// error only for an invalid key (ErrInvalidArgument), a closed client (ErrClosed) or a
// context that has already ended. Safe for concurrent use.
func (c *Client) Status(ctx context.Context, key string) (*Status, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	set, err := newDerivedLockKeys(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: status %q not read: %w", quoteKey(key), err)
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()

	n := len(c.nodes)
	cmd := newStatusCommand(set, KeyCounters) // the reply lists the per-key counter first
	st := &Status{Key: key, Quorum: c.quorum, Nodes: make([]NodeStatus, n)}
	err = c.askAll(ctx, cmd, func(ev transport.Event) { st.Nodes[ev.Node] = c.nodeStatus(ev.Node, ev.Slice, ev.Err) })
	if err != nil {
		return nil, fmt.Errorf("redlock: status %q: %w", quoteKey(key), err)
	}
	st.summarise(counterSeed(c.cfg.clock.Now()), c.cfg.layout)
	return st, nil
}

func (c *Client) nodeStatus(i int, v []any, err error) NodeStatus {
	ns := NodeStatus{Node: i, Addr: c.nodes[i].addr, Waiters: -1}
	if err == nil && len(v) != 5 {
		err = fmt.Errorf("unexpected status reply %v", v)
	}
	if err != nil {
		ns.Err = c.nodeErr(i, err)
		return ns
	}
	ns.Holder, _ = v[0].(string)
	if n, ok := v[4].(int64); ok {
		ns.Waiters = int(n)
	} else {
		ns.Waiters = -1
	}
	if ms, _ := v[1].(int64); ms > 0 {
		ns.TTL = time.Duration(ms) * time.Millisecond
	}
	for j, dst := range []*Token{&ns.KeyCounter, &ns.SlotCounter} {
		s, _ := v[2+j].(string)
		if s == "" {
			continue
		}
		u, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			ns.Err = c.nodeErr(i, fmt.Errorf("fence counter %q is not a number", s))
			return ns
		}
		*dst = Token(u)
	}
	ns.Counter = max(ns.KeyCounter, ns.SlotCounter)
	return ns
}

// nextToken is the least token an acquire with layout l could mint on this node now, by the
// rules of lua/counters.lua, with seed the acquiring client's clock; ok is false when the
// node mints no more tokens (a counter at the maximum: the acquire fails there).
func (ns *NodeStatus) nextToken(seed Token, l CounterLayout) (t Token, ok bool) {
	own, other := ns.SlotCounter, ns.KeyCounter
	if l == KeyCounters {
		own, other = other, own
	}
	if own >= math.MaxInt64 || other >= math.MaxInt64 {
		return 0, false
	}
	if own != 0 {
		t = own + 1
	}
	if other != 0 {
		t = max(t, other+1)
	}
	if l == SlotCounters || own == 0 {
		t = max(t, seed)
	}
	return t, true
}

// summarise fills Holder and NextTokenAtLeast; seed is the clock's reading an acquire made
// now would carry, l the layout of its client.
func (s *Status) summarise(seed int64, l CounterLayout) {
	holders := map[string]int{}
	var next []Token
	unknown := 0
	for _, ns := range s.Nodes {
		if ns.Err != nil {
			unknown++
			continue
		}
		if ns.Holder != "" {
			holders[ns.Holder]++
		}
		if t, ok := ns.nextToken(Token(seed), l); ok {
			next = append(next, t)
		}
	}
	for h, k := range holders {
		if k >= s.Quorum {
			s.Holder = h
		}
	}
	// The next holder's quorum may include every unknown node, which could be as low as
	// anything; the rest of it comes from the known nodes, lowest first.
	if need := s.Quorum - unknown; need > 0 && need <= len(next) {
		slices.Sort(next)
		s.NextTokenAtLeast = next[need-1]
	}
}
