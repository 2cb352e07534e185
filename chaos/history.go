package chaos

// What a run records: its history (critical sections, writes, faults, node spans) and the
// Recorder that the workload, the store and the scripts write it through.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// A History is what one run of a scenario did, as the harness saw it: every critical section,
// every write to the fenced store, every fault and, per node, who held the key over time.
// Every instant is an offset from the start of the run on Go's monotonic clock, so all of
// them compare correctly whatever the wall clock does.
type History struct {
	Scenario string        `json:"scenario"`
	Run      int           `json:"run"`
	Seed     uint64        `json:"seed"`
	Nodes    int           `json:"nodes"`
	Clients  int           `json:"clients"`
	Quorum   int           `json:"quorum"`
	TTL      time.Duration `json:"ttl_ns"`
	Keys     []string      `json:"keys"`
	Start    time.Time     `json:"start"`       // wall clock when the run began
	Duration time.Duration `json:"duration_ns"` // when the run ended
	// Busy is how long the workload ran: from the first client's start to the last one's stop.
	Busy   time.Duration `json:"busy_ns"`
	Holds  []Hold        `json:"holds"`
	Writes []Write       `json:"writes"`
	Faults []Fault       `json:"faults"`
	Spans  []NodeSpan    `json:"spans"`
	// Stored is what the store holds at the end: per key, the IDs of the writes it accepted,
	// in the order it accepted them. The lost-writes check compares it with the writes that
	// were acknowledged as accepted.
	Stored map[string][]int `json:"stored"`
	// Highest is the store's highest admitted token per key at the end.
	Highest map[string]redlock.Token `json:"highest"`
	// Balances is the store's balance per key at the end: the sum of the Delta of every
	// write it accepted there. Transfers keep their sum at 0.
	Balances map[string]int64 `json:"balances,omitempty"`
	Notes    []string         `json:"notes,omitempty"`

	decided int // writes decided so far
}

// Hold is one critical section: the client believed it held the lock on Key from Granted
// (its function started, right after the acquire returned) to End (its function returned).
// A lock over several keys (DoMulti) is recorded as one Hold per key, each with its key's
// own token and the same holder id and instants, linked by Set; the checkers that work per
// key (overlaps, tokens, stale writes, porcupine) see it as one critical section of each key.
type Hold struct {
	ID     int           `json:"id"`
	Client int           `json:"client"`
	Key    string        `json:"key"`
	Token  redlock.Token `json:"token"`
	LockID string        `json:"lock_id"` // the holder id stored on the nodes
	Role   string        `json:"role,omitempty"`
	// Asked is when the client called Do, so Granted − Asked is the wait for the lock.
	Asked   time.Duration `json:"asked_ns"`
	Granted time.Duration `json:"granted_ns"`
	// Until is the latest validity deadline the holder knew of (Lock.Until, moved by renewals).
	Until time.Duration `json:"until_ns"`
	End   time.Duration `json:"end_ns"`
	Open  bool          `json:"open,omitempty"` // still running when the history was taken
	Lost  bool          `json:"lost,omitempty"` // Do reported ErrLockLost
	// Set lists, for a lock over several keys, the IDs of the holds of all its keys in
	// the lock's key order (this one among them); nil for a lock over one key.
	Set []int `json:"set,omitempty"`
}

// First reports whether hd stands for its acquisition: a single-key hold, or the first hold
// of a multi-key lock. Counting acquisitions counts these.
func (hd *Hold) First() bool { return len(hd.Set) == 0 || hd.Set[0] == hd.ID }

// acquisitions returns one hold per acquisition (see Hold.First), in ID order.
func acquisitions(h *History) []Hold {
	out := make([]Hold, 0, len(h.Holds))
	for _, hd := range h.Holds {
		if hd.First() {
			out = append(out, hd)
		}
	}
	return out
}

// setOf returns the IDs of the holds of hd's acquisition: hd.Set, or hd alone.
func setOf(hd Hold) []int {
	if len(hd.Set) == 0 {
		return []int{hd.ID}
	}
	return hd.Set
}

// Write is one write to the fenced store, made under a hold's token.
type Write struct {
	ID     int           `json:"id"`
	Client int           `json:"client"`
	Hold   int           `json:"hold"`
	Key    string        `json:"key"`
	Token  redlock.Token `json:"token"`
	Seq    int           `json:"seq"` // position among the hold's writes
	Sent   time.Duration `json:"sent_ns"`
	// Applied is when the store decided; -1 if the write never reached it.
	Applied time.Duration `json:"applied_ns"`
	// Acked is when the writer learned the outcome; -1 if it had stopped waiting.
	Acked    time.Duration `json:"acked_ns"`
	Accepted bool          `json:"accepted"`
	// Order is the write's position in the store's sequence of decisions (-1 before one).
	Order int `json:"order"`
	// Highest is the highest token the store had admitted for Key just before deciding.
	Highest redlock.Token `json:"highest"`
	Delayed bool          `json:"delayed,omitempty"` // held in flight on purpose
	// Delta is what the write adds to Key's balance when it is accepted.
	Delta int64 `json:"delta,omitempty"`
	// Legs lists, for a leg of an atomic write over several keys (a transfer), the IDs of
	// all its legs (this one among them); nil for a write of one key. The store accepts
	// every leg or none.
	Legs []int `json:"legs,omitempty"`
	// Vetoed marks a leg that the store refused only because another leg of the same
	// atomic write was stale: its own token passed its key's check.
	Vetoed bool `json:"vetoed,omitempty"`
}

// Stale reports whether the store had already admitted a higher token for its key when
// this write arrived, which is what makes a write stale.
func (w *Write) Stale() bool { return w.Applied >= 0 && w.Token < w.Highest }

// Fault is an injected fault: a node or client event, or an interval during which a fault
// held (End > At).
type Fault struct {
	ID      int           `json:"id"`
	Kind    string        `json:"kind"`
	At      time.Duration `json:"at_ns"`
	End     time.Duration `json:"end_ns"`
	Nodes   []int         `json:"nodes,omitempty"`
	Clients []int         `json:"clients,omitempty"`
	Note    string        `json:"note,omitempty"`
	Open    bool          `json:"open,omitempty"` // not ended yet
}

// NodeSpan is what one node held under one key during an interval, sampled from outside the
// fault proxies with Client.Status: LockID "" and Down false means the key was free there.
type NodeSpan struct {
	Key    string        `json:"key"`
	Node   int           `json:"node"`
	From   time.Duration `json:"from_ns"`
	To     time.Duration `json:"to_ns"`
	LockID string        `json:"lock_id,omitempty"`
	Down   bool          `json:"down,omitempty"` // the node did not answer
}

// Recorder builds a History while a run goes on. It is safe for concurrent use. Await lets
// a fault script wait for something to show up in the history instead of sleeping.
type Recorder struct {
	base time.Time

	mu   sync.Mutex
	h    History
	wake chan struct{} // closed and replaced on every change
}

// NewRecorder starts a history whose instants count from now.
func NewRecorder(h History) *Recorder {
	h.Start = time.Now()
	r := &Recorder{base: h.Start, h: h, wake: make(chan struct{})}
	return r
}

// Now returns the current offset from the start of the run, on the monotonic clock.
func (r *Recorder) Now() time.Duration { return time.Since(r.base) }

// Offset converts an instant (for example Lock.Until, which carries a monotonic reading) to
// an offset from the start of the run.
func (r *Recorder) Offset(t time.Time) time.Duration { return t.Sub(r.base) }

// update applies f to the history under the lock and wakes every Await.
func (r *Recorder) update(f func(h *History)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.h)
	close(r.wake)
	r.wake = make(chan struct{})
}

// View calls f with the history under the lock. f must not keep references into it.
func (r *Recorder) View(f func(h *History)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.h)
}

// Await waits until cond holds on the history, ctx ends, or limit passes. It returns nil
// when cond held, and an error naming what it waited for otherwise.
func (r *Recorder) Await(ctx context.Context, limit time.Duration, what string, cond func(h *History) bool) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ok, wake := cond(&r.h), r.wake
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return fmt.Errorf("chaos: waited %v for %s", limit, what)
		case <-ctx.Done():
			return fmt.Errorf("chaos: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// Note adds a line to the history's notes.
func (r *Recorder) Note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.update(func(h *History) { h.Notes = append(h.Notes, fmt.Sprintf("%8.3fs  %s", r.Now().Seconds(), msg)) })
}

// BeginHold records the start of a critical section and returns its ID.
func (r *Recorder) BeginHold(hd Hold) int { return r.BeginHolds([]Hold{hd})[0] }

// BeginHolds records the start of a critical section under a lock over several keys, one
// Hold per key (hds, in the lock's key order, with the same client, holder id and
// instants), links them with Set, and returns their IDs. With one hold it is BeginHold.
func (r *Recorder) BeginHolds(hds []Hold) []int {
	ids := make([]int, len(hds))
	r.update(func(h *History) {
		for i := range hds {
			ids[i] = len(h.Holds) + i
		}
		set := slices.Clone(ids) // shared by the holds, never changed
		for i, hd := range hds {
			hd.ID, hd.Open, hd.End = ids[i], true, -1
			if len(hds) > 1 {
				hd.Set = set
			}
			h.Holds = append(h.Holds, hd)
		}
	})
	return ids
}

// SeeUntil records a validity deadline the holder of hold id has seen; Until only grows.
func (r *Recorder) SeeUntil(id int, until time.Duration) {
	r.update(func(h *History) { h.Holds[id].Until = max(h.Holds[id].Until, until) })
}

// EndHold records the end of a critical section.
func (r *Recorder) EndHold(id int, end time.Duration) {
	r.update(func(h *History) { h.Holds[id].End, h.Holds[id].Open = end, false })
}

// MarkLost records that Do reported the hold's lock lost.
func (r *Recorder) MarkLost(id int) {
	r.update(func(h *History) { h.Holds[id].Lost = true })
}

// BeginFault records a fault that starts now and returns its ID; EndFault closes it.
func (r *Recorder) BeginFault(kind string, nodes, clients []int, note string) int {
	var id int
	now := r.Now()
	r.update(func(h *History) {
		id = len(h.Faults)
		h.Faults = append(h.Faults, Fault{ID: id, Kind: kind, At: now, End: now, Nodes: nodes, Clients: clients,
			Note: note, Open: true})
	})
	return id
}

// EndFault records the end of fault id. Ending a fault twice changes nothing.
func (r *Recorder) EndFault(id int) {
	now := r.Now()
	r.update(func(h *History) {
		if f := &h.Faults[id]; f.Open {
			f.End, f.Open = now, false
		}
	})
}

// Event records an instantaneous fault.
func (r *Recorder) Event(kind string, nodes, clients []int, note string) {
	r.EndFault(r.BeginFault(kind, nodes, clients, note))
}

// sendWrites records a write as it leaves the writer, one Write per key (one for a plain
// write, one per leg of an atomic write over several keys, linked by Legs), and returns
// their IDs.
func (r *Recorder) sendWrites(ws []Write) []int {
	ids := make([]int, len(ws))
	r.update(func(h *History) {
		for i := range ws {
			ids[i] = len(h.Writes) + i
		}
		legs := slices.Clone(ids) // shared by the legs, never changed
		for i, w := range ws {
			w.ID, w.Applied, w.Acked, w.Order = ids[i], -1, -1, -1
			if len(ws) > 1 {
				w.Legs = legs
			}
			h.Writes = append(h.Writes, w)
		}
	})
	return ids
}

// decision is the store's decision on one write (or leg).
type decision struct {
	accepted, vetoed bool
	highest          redlock.Token
}

// applyWrites records the store's decisions on writes ids, made at one instant, in order.
func (r *Recorder) applyWrites(ids []int, at time.Duration, ds []decision) {
	r.update(func(h *History) {
		for i, id := range ids {
			w := &h.Writes[id]
			w.Applied, w.Accepted, w.Vetoed, w.Highest, w.Order = at, ds[i].accepted, ds[i].vetoed, ds[i].highest, h.decided
			h.decided++
		}
	})
}

// ackWrites records that the writer learned the outcome of writes ids.
func (r *Recorder) ackWrites(ids []int, at time.Duration) {
	r.update(func(h *History) {
		for _, id := range ids {
			h.Writes[id].Acked = at
		}
	})
}

// addSpan appends a finished node span.
func (r *Recorder) addSpan(s NodeSpan) {
	r.update(func(h *History) { h.Spans = append(h.Spans, s) })
}

// Finish closes the history at the current instant with what the store holds, and returns a
// copy of it. Holds still open end now, marked Open.
func (r *Recorder) Finish(c Contents) *History {
	end := r.Now()
	var out History
	r.update(func(h *History) {
		h.Duration = end
		for i := range h.Holds {
			if h.Holds[i].End < 0 {
				h.Holds[i].End = end
			}
		}
		for i := range h.Faults {
			if h.Faults[i].Open {
				h.Faults[i].End = end
			}
		}
		h.Stored, h.Highest, h.Balances = c.Stored, c.Highest, c.Balances
		out = cloneHistory(h)
	})
	return &out
}

// Snapshot returns a copy of the history as it stands.
func (r *Recorder) Snapshot() *History {
	var out History
	r.View(func(h *History) { out = cloneHistory(h) })
	return &out
}

func cloneHistory(h *History) History {
	out := *h
	out.Holds = append([]Hold(nil), h.Holds...)
	out.Writes = append([]Write(nil), h.Writes...)
	out.Faults = append([]Fault(nil), h.Faults...)
	out.Spans = append([]NodeSpan(nil), h.Spans...)
	out.Notes = append([]string(nil), h.Notes...)
	out.Keys = append([]string(nil), h.Keys...)
	return out
}
