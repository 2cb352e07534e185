package model

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"
)

// Result is the outcome of one run.
type Result struct {
	Config    Config
	States    int           // distinct states up to symmetry
	Depth     int           // the deepest level reached
	Elapsed   time.Duration //
	Truncated bool          // MaxStates was reached before the search ended
	Violation string        // empty when no invariant broke
	Trace     []string      // the shortest path to the violation, one step per line
}

// Check explores every state reachable under cfg, breadth first, and returns the first
// (hence shortest) violation of claim U, claim O or, with cfg.Exclusion, mutual exclusion.
func Check(cfg Config) Result {
	start := time.Now()
	k := &checker{cfg: cfg}
	k.perms = clientPerms(cfg.Clients)
	res := Result{Config: cfg}
	init := initial(cfg)
	seen := map[string]int32{}
	var encs []string
	var parent []int32
	visit := func(s *state, p int32) (int32, bool) {
		e := k.canon(s)
		if _, ok := seen[e]; ok {
			return 0, false
		}
		i := int32(len(encs))
		seen[e] = i
		encs = append(encs, e)
		parent = append(parent, p)
		return i, true
	}
	i0, _ := visit(init, -1)
	type item struct {
		s *state
		i int32
	}
	frontier := []item{{init, i0}}
	for depth := 0; len(frontier) > 0; depth++ {
		res.Depth = depth
		var next []item
		for _, it := range frontier {
			for _, st := range k.successors(it.s) {
				if st.next.violation != "" {
					res.Violation = st.next.violation
					res.Trace = k.replay(init, encs, parent, it.i, st.next.violation)
					res.States = len(encs)
					res.Elapsed = time.Since(start)
					return res
				}
				if j, ok := visit(st.next, it.i); ok {
					next = append(next, item{st.next, j})
				}
			}
			if cfg.MaxStates > 0 && len(encs) >= cfg.MaxStates {
				res.Truncated = true
				next = nil
				break
			}
		}
		frontier = next
	}
	res.States = len(encs)
	res.Elapsed = time.Since(start)
	return res
}

// replay rebuilds the path to state index last from the initial state with consistent
// names (the stored states are canonical, so their client and node names may be permuted
// from one to the next), then the step that breaks an invariant.
func (k *checker) replay(init *state, encs []string, parent []int32, last int32, violation string) []string {
	k.labels = true
	defer func() { k.labels = false }()
	var path []int32
	for i := last; i >= 0; i = parent[i] {
		path = append(path, i)
	}
	var trace []string
	s := init
	for j := len(path) - 2; j >= 0; j-- {
		want := encs[path[j]]
		for _, st := range k.successors(s) {
			if st.next.violation == "" && k.canon(st.next) == want {
				trace = append(trace, st.label)
				s = st.next
				break
			}
		}
	}
	for _, st := range k.successors(s) {
		if st.next.violation == violation {
			trace = append(trace, st.label, "=> "+violation)
			break
		}
	}
	return trace
}

// clientPerms lists the permutations of the clients that map each client to one with the
// same configuration: such clients run the same program, so renaming them maps runs to runs
// and keeps every invariant (they speak of tokens and keys, not of client names).
func clientPerms(cs []ClientConfig) [][]int {
	n := len(cs)
	var out [][]int
	p := make([]int, n)
	used := make([]bool, n)
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			out = append(out, append([]int(nil), p...))
			return
		}
		for j := 0; j < n; j++ {
			if !used[j] && cs[j] == cs[i] {
				used[j] = true
				p[i] = j
				rec(i + 1)
				used[j] = false
			}
		}
	}
	rec(0)
	return out
}

// canon is the state's encoding up to symmetry: for each client permutation of k.perms the
// state is encoded with clients and holder ids renamed, and with the nodes sorted by
// everything that names them (the node's store, each client's per-node state, the messages
// to and from it); the least of these encodings is the canonical one. Nodes are all alike in
// a configuration (faults may hit any of them, scripts and clients treat them the same), so
// permuting them also maps runs to runs.
func (k *checker) canon(s *state) string {
	var best []byte
	for _, p := range k.perms {
		e := k.encode(s, p, k.buf[:0])
		if best == nil || bytes.Compare(e, best) < 0 {
			best = append(k.best[:0], e...)
			k.best = best
		}
		k.buf = e
	}
	return string(best)
}

func (k *checker) encode(s *state, perm []int, b []byte) []byte {
	nc := len(k.cfg.Clients)
	var inv [maxClients]int
	for old, nw := range perm {
		inv[nw] = old
	}
	ren := func(h hid) byte {
		if h == 0 {
			return 0
		}
		return byte(holderOf(perm[h.client()], h.seq()))
	}
	i16 := func(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	for j := 0; j < nc; j++ {
		c := &s.cl[inv[j]]
		b = append(b, c.phase, c.seq, c.key)
		b = i16(b, c.floor)
		b = i16(b, c.target)
		b = i16(b, c.token)
		b = append(b, byte(c.epochs), byte(c.valid), byte(c.ended), c.extends, byte(c.extEpoch), c.wins)
	}
	b = append(b, s.amnesia, s.resends)
	b = i16(b, s.vmax)
	for key := 0; key < k.cfg.Keys; key++ {
		b = append(b, s.nwon[key])
		for i := 0; i < int(s.nwon[key]); i++ {
			b = i16(b, s.won[key][i])
		}
	}
	// The nodes' columns, built in k.col and sorted.
	col := k.col[:0]
	var start [maxN + 1]int
	var ms [64]uint64
	for i := 0; i < k.cfg.N; i++ {
		start[i] = len(col)
		n := &s.nodes[i]
		for key := 0; key < k.cfg.Keys; key++ {
			col = append(col, ren(n.holder[key]), byte(n.epoch[key]))
			col = i16(col, n.l[key])
		}
		col = i16(col, n.c)
		for j := 0; j < nc; j++ {
			c := &s.cl[inv[j]]
			mh := byte(0)
			if c.mayHold[i] {
				mh = 1
			}
			col = append(col, c.st[i], mh, c.ext[i])
			col = i16(col, c.cnt[i])
		}
		nm := 0
		for _, m := range s.msgs {
			if int(m.node) != i {
				continue
			}
			v := uint64(m.kind)<<56 | uint64(perm[m.client])<<48 | uint64(m.seq)<<40 | uint64(m.key)<<32 |
				uint64(uint16(m.arg))<<16 | uint64(uint16(m.arg2))
			j := nm
			for ; j > 0 && ms[j-1] > v; j-- {
				ms[j] = ms[j-1]
			}
			ms[j] = v
			nm++
		}
		col = append(col, byte(nm))
		for _, v := range ms[:nm] {
			col = binary.BigEndian.AppendUint64(col, v)
		}
	}
	start[k.cfg.N] = len(col)
	k.col = col
	var order [maxN]int
	for i := 0; i < k.cfg.N; i++ {
		j := i
		for ; j > 0 && bytes.Compare(col[start[order[j-1]]:start[order[j-1]+1]], col[start[i]:start[i+1]]) > 0; j-- {
			order[j] = order[j-1]
		}
		order[j] = i
	}
	for _, i := range order[:k.cfg.N] {
		b = append(b, byte(start[i+1]-start[i]))
		b = append(b, col[start[i]:start[i+1]]...)
	}
	return b
}

// Follow runs one schedule instead of a search: from the initial state it takes, for each
// entry of schedule, the first step whose label begins with that entry. It returns the
// labels taken, the first invariant broken (empty if none) and the entry that matched no
// step, if any. It checks a counterexample too deep for the breadth-first search.
func Follow(cfg Config, schedule []string) (trace []string, violation, unmatched string) {
	k := &checker{cfg: cfg, labels: true}
	s := initial(cfg)
	for _, want := range schedule {
		var next *state
		for _, st := range k.successors(s) {
			if strings.HasPrefix(st.label, want) {
				trace = append(trace, st.label)
				next = st.next
				break
			}
		}
		if next == nil {
			return trace, "", want
		}
		if next.violation != "" {
			return append(trace, "=> "+next.violation), next.violation, ""
		}
		s = next
	}
	return trace, "", ""
}
