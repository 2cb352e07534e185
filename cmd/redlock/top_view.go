package main

// The view model of redlock top: what one lock's row says, derived from its status on
// every node (and what a read/write lock's readers row says), shared by the table and the
// JSON documents.

import (
	"cmp"
	"slices"
	"time"

	"github.com/quorumlock/redlock"
)

// topView is what top derives from one lock's status.
type topView struct {
	state    string // "held", "partial", "free" or "unknown"
	disagree bool   // some holder has its key on fewer than a quorum of nodes
	holder   string // the quorum holder, else the holder on the most nodes ("" for none)
	on       int    // how many nodes have holder's key
}

// viewOf derives the row of one lock from its status: its state, its main holder and on
// how many nodes that holder has its key, and whether the nodes disagree.
func viewOf(st *redlock.Status) topView {
	counts := map[string]int{}
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Holder != "" {
			counts[ns.Holder]++
		}
	}
	var v topView
	for h, k := range counts {
		if k < st.Quorum {
			v.disagree = true
		}
		if k > v.on || (k == v.on && h < v.holder) {
			v.holder, v.on = h, k
		}
	}
	switch {
	case answered(st) < st.Quorum:
		v.state = "unknown"
	case st.HeldByQuorum():
		v.state = "held"
	case len(counts) > 0:
		v.state = "partial"
	default:
		v.state = "free"
	}
	return v
}

// readersView is what top derives from a read/write lock's readers on every node.
type readersView struct {
	state    string        // "read" (a reader on a quorum), "partial", "free" or "unknown"
	disagree bool          // some node lists a reader that is not on a quorum of nodes, or readers and a writer both hold a quorum
	on       int           // how many nodes count a reader
	ttl      time.Duration // how long some reader keeps a quorum if none renews, 0 for none
}

// readersViewOf derives a read/write lock's readers row from its status: its state, on how
// many nodes readers are, whether the nodes disagree about a reader, and the longest of the
// quorum readers' TTLs (each reader's the Q-th longest of its places', as quorumTTL is for a
// lock; only listed places count, MaxListedReaders per node).
func readersViewOf(rw *redlock.RWStatus) readersView {
	var v readersView
	quorumReader := map[string]bool{}
	for _, id := range rw.Readers {
		quorumReader[id] = true
	}
	ttls := map[string][]time.Duration{}
	for _, ns := range rw.Nodes {
		if ns.Err != nil || ns.Readers <= 0 {
			continue
		}
		v.on++
		for _, p := range ns.Places {
			if !quorumReader[p.ID] {
				v.disagree = true
			}
			ttls[p.ID] = append(ttls[p.ID], p.TTL)
		}
	}
	for _, id := range rw.Readers {
		if d := ttls[id]; len(d) >= rw.Quorum {
			slices.SortFunc(d, func(a, b time.Duration) int { return cmp.Compare(b, a) })
			v.ttl = max(v.ttl, d[rw.Quorum-1])
		}
	}
	if rw.HeldForReading() && rw.HeldForWriting() {
		v.disagree = true // the lock never lets both in: a node lost its data, or keys were written by hand
	}
	switch {
	case rw.ReadersAnswered < rw.Quorum:
		v.state = "unknown"
	case rw.HeldForReading():
		v.state = "read"
	case v.on > 0:
		v.state = "partial"
	default:
		v.state = "free"
	}
	return v
}
