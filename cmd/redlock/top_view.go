package main

// The view model of redlock top: what one lock's row says, derived from its status on
// every node, shared by the table and the JSON documents.

import "github.com/quorumlock/redlock"

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
