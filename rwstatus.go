package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// MaxListedReaders is the most readers [RWLock.Status] lists per node ([RWNodeStatus.Places]);
// it counts them all ([RWNodeStatus.Readers]).
const MaxListedReaders = 1000

// ReaderPlace is one reader's place in a read/write lock's readers on one node.
type ReaderPlace struct {
	ID  string        // the reader's holder id ([Lock.ID] of its Lock)
	TTL time.Duration // what the place has left on the node's clock, > 0
}

// RWNodeStatus is what one node says about a read/write lock's readers and writer intent.
type RWNodeStatus struct {
	Node int    // index in the slice given to New
	Addr string // the node's address, when its client exposes one
	Err  error  // nil when the node answered; a *NodeError otherwise (as in the writer's NodeStatus)
	// Readers is the number of readers whose place has not expired on the node's clock. An
	// expired place lingers in the readers set until the lock's next script on the node
	// removes it; it is not counted. -1 when the node would not say (an ACL user without
	// ZRANGE) or did not answer.
	Readers int
	// Places are those readers, soonest to expire first, at most [MaxListedReaders] of them;
	// nil when Readers is -1.
	Places []ReaderPlace
	// Intent is the writer intent: the id of the Client (not a holder id) whose writer was
	// refused here because readers held, and which keeps new readers out of this node until
	// IntentTTL has passed; "" and 0 when there is none.
	Intent    string
	IntentTTL time.Duration
	// Phase is the reader phase (docs/design.md §3.13): "w" while readers refused because of
	// a writer are marked waiting, "r" during the read phase after that writer's release
	// (readers come in despite an intent, writers are refused, until the readers marked have
	// entered or PhaseTTL has passed), "" when neither; PhaseTTL is what the phase, or the
	// last reader's mark, has left. Waiting is the number of readers marked waiting (in a
	// read phase, those it still waits for).
	Phase    string
	PhaseTTL time.Duration
	Waiting  int
}

// RWStatus is a snapshot of a read/write lock across the nodes, for operators and tools. It
// is read without taking the lock and may be stale by the time it is printed.
type RWStatus struct {
	Name   string
	Quorum int
	// Writer is the writer key's status ([RWLock.Key]), as [Client.Status] reads a lock key:
	// its Holder is the writer's holder id when a writer holds a quorum.
	Writer *Status
	// Nodes has each node's readers and writer intent, in the order given to New, read in
	// the same atomic script as that node's Writer.Nodes entry.
	Nodes []RWNodeStatus
	// Readers are the ids, sorted, of the readers whose unexpired place is on at least a
	// quorum of nodes: as far as the nodes can tell, those hold the lock for reading. A
	// reader whose validity has ended on its own clock may still have places; one whose
	// acquire is under way or being undone may have places on fewer nodes and is not in it.
	// Only listed places count (MaxListedReaders per node).
	Readers []string
	// ReadersAnswered is how many nodes reported their readers (answered, with Readers ≥ 0):
	// when it is below Quorum, Readers cannot be told.
	ReadersAnswered int
}

// HeldForWriting reports whether a writer holds the writer key on a quorum of nodes.
func (s *RWStatus) HeldForWriting() bool { return s.Writer.HeldByQuorum() }

// HeldForReading reports whether some reader has an unexpired place on a quorum of nodes.
func (s *RWStatus) HeldForReading() bool { return len(s.Readers) > 0 }

// Status reads the read/write lock on every node in parallel, atomically per node, changing
// nothing: the writer key as [Client.Status] reads a lock key (holder, remaining TTL, fence
// counters, waiter queue), the readers whose place has not expired on the node's clock
// (expired places are left out of the reply, not removed), the writer intent and the reader
// phase. It waits
// for every node's answer, each bounded by the node timeout from the moment it is written; a
// node that fails or does not answer in time has its Err set in Writer.Nodes and in Nodes
// (and its Readers at -1). A node whose user may not run ZRANGE (an ACL user without the
// read/write lock's commands) reports Readers -1 rather than failing.
//
// Errors, for errors.Is: ErrInvalidArgument for a nil ctx or a bad name; ErrClosed after
// [Client.Close]; ctx.Err() when ctx has ended, before or during the read. Safe for
// concurrent use.
func (rw *RWLock) Status(ctx context.Context) (*RWStatus, error) {
	if ctx == nil {
		return nil, invalidf("context is nil")
	}
	if rw.err != nil {
		return nil, rw.err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: status of read/write lock %q not read: %w", quoteKey(rw.name), err)
	}
	c := rw.c
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()

	n := len(c.nodes)
	cmd := newRWStatusCommand(rw.set, rw.keys, KeyCounters, MaxListedReaders) // the per-key counter first, as for Status
	st := &RWStatus{Name: rw.name, Quorum: c.quorum, Nodes: make([]RWNodeStatus, n),
		Writer: &Status{Key: rw.keys.writer, Quorum: c.quorum, Nodes: make([]NodeStatus, n)}}
	err := c.askAll(ctx, cmd, func(ev transport.Event) {
		st.Writer.Nodes[ev.Node], st.Nodes[ev.Node] = c.rwNodeStatus(ev.Node, ev.Slice, ev.Err)
	})
	if err != nil {
		return nil, fmt.Errorf("redlock: status of read/write lock %q: %w", quoteKey(rw.name), err)
	}
	st.Writer.summarise(counterSeed(c.cfg.clock.Now()), c.cfg.layout)
	st.summarise()
	return st, nil
}

// rwNodeStatus decodes one node's rw_status.lua reply: status.lua's five values, the
// readers' count, the intent and its PTTL, the reader phase, its PTTL and the readers marked
// waiting, then an id and its remaining ms per listed reader.
func (c *Client) rwNodeStatus(i int, v []any, err error) (NodeStatus, RWNodeStatus) {
	rs := RWNodeStatus{Node: i, Addr: c.nodes[i].addr, Readers: -1}
	if err == nil && (len(v) < 11 || len(v)%2 != 1) {
		err = fmt.Errorf("unexpected read/write status reply of %d elements", len(v))
	}
	if err != nil {
		ns := c.nodeStatus(i, nil, err)
		rs.Err = ns.Err
		return ns, rs
	}
	ns := c.nodeStatus(i, v[:5], nil)
	if ns.Err != nil { // a fence counter that is not a number
		rs.Err = ns.Err
		return ns, rs
	}
	if k, ok := v[5].(int64); ok && k >= 0 {
		rs.Readers = int(k)
		rs.Places = make([]ReaderPlace, 0, (len(v)-11)/2)
		for j := 11; j < len(v); j += 2 {
			id, _ := v[j].(string)
			ms, _ := v[j+1].(int64)
			rs.Places = append(rs.Places, ReaderPlace{ID: id, TTL: time.Duration(ms) * time.Millisecond})
		}
	}
	if rs.Intent, _ = v[6].(string); rs.Intent != "" {
		if ms, _ := v[7].(int64); ms > 0 {
			rs.IntentTTL = time.Duration(ms) * time.Millisecond
		}
	}
	if rs.Phase, _ = v[8].(string); rs.Phase != "" {
		if ms, _ := v[9].(int64); ms > 0 {
			rs.PhaseTTL = time.Duration(ms) * time.Millisecond
		}
	}
	if k, ok := v[10].(int64); ok && k > 0 {
		rs.Waiting = int(k)
	}
	return ns, rs
}

// summarise fills Readers and ReadersAnswered from the nodes' places.
func (s *RWStatus) summarise() {
	on := map[string]int{}
	for _, ns := range s.Nodes {
		if ns.Err != nil || ns.Readers < 0 {
			continue
		}
		s.ReadersAnswered++
		for _, p := range ns.Places {
			on[p.ID]++
		}
	}
	for id, k := range on {
		if k >= s.Quorum {
			s.Readers = append(s.Readers, id)
		}
	}
	slices.Sort(s.Readers)
}
