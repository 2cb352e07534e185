package model

import (
	"fmt"
	"slices"
	"strings"
)

// The read/write lock (design.md §3.13), as a search of its own: N nodes, each with a writer
// key, a set of readers and a writer intent, and clients that each make one acquisition as
// a reader or as a writer. The writer's key is a lock key of the main search (its tokens
// and counters are the lock's, checked there); this search checks what the read/write lock
// adds: no reader with validity left while a writer has validity left, and no two writers.
//
// Each script runs atomically on its node: a reader is granted where no writer holds and no
// writer waits (the intent) or a read phase is open, and a refused one marks that readers
// wait; a writer where no writer and no reader holds and no read phase is open, and where
// readers hold or the phase is open it marks the intent; a writer's release (or undo: the
// phase may end at once, which covers the undo that opens none) turns the readers' mark into
// a read phase. The intent, the mark and the phase may expire at any moment, as their TTLs
// do; the phase's ending at any moment also covers the ways the library ends it early (its
// last marked reader coming in, or that reader's mark removed once it holds elsewhere). The
// search keeps one mark per node where the nodes keep one per waiting reader; either way a
// mark only lets a release open a phase, and a phase only refuses writers and lets readers
// past an intent, never past the writer key. Requests and
// replies are delivered in any order; a client that got a quorum of grants holds; one whose
// quorum became impossible undoes on every node. A holder's validity may end at any moment;
// its entries may expire on a node only after that (design.md §5.5's assumptions), and its
// release removes them.

// RWConfig bounds one run of the read/write search.
type RWConfig struct {
	N, Q    int
	Readers int // clients that acquire once for reading
	Writers int // clients that acquire once for writing
	// IgnoreWriter is the mutation: a reader's script grants whatever the writer key and
	// the intent say.
	IgnoreWriter bool
}

// RWResult is the outcome of a read/write search.
type RWResult struct {
	States    int
	Violation string
	Trace     []string
}

const (
	rwIdle uint8 = iota
	rwAcquiring
	rwHolding
	rwEnded // the holder's validity ended (its entries may expire); or it released, or failed
)

const (
	rwReq uint8 = iota
	rwGrant
	rwRefuse
	rwRelease
)

type rwNode struct {
	writer  int8 // the writer holding here, -1 for none
	readers uint16
	intent  bool
	phase   uint8 // rwNoPhase, rwReadersWait or rwReadPhase (lua/read_acquire.lua)
}

const (
	rwNoPhase uint8 = iota
	rwReadersWait
	rwReadPhase
)

type rwClient struct {
	phase            uint8
	grants, refusals uint8 // nodes, as bit sets
}

type rwMsg struct{ kind, client, node uint8 }

type rwState struct {
	nodes []rwNode
	cl    []rwClient
	msgs  []rwMsg
}

func (s *rwState) clone() *rwState {
	return &rwState{nodes: slices.Clone(s.nodes), cl: slices.Clone(s.cl), msgs: slices.Clone(s.msgs)}
}

func (s *rwState) key() string {
	ms := make([]string, len(s.msgs))
	for i, m := range s.msgs {
		ms[i] = fmt.Sprint(m)
	}
	slices.Sort(ms) // the network is a multiset
	return fmt.Sprint(s.nodes, s.cl, ms)
}

// CheckRW searches every interleaving breadth first and returns the first violation found,
// with the steps that lead to it.
func CheckRW(cfg RWConfig) RWResult {
	n := cfg.Readers + cfg.Writers
	init := &rwState{nodes: make([]rwNode, cfg.N), cl: make([]rwClient, n)}
	for i := range init.nodes {
		init.nodes[i].writer = -1
	}
	type entry struct {
		s      *rwState
		parent int
		label  string
	}
	seen := map[string]bool{init.key(): true}
	queue := []entry{{init, -1, "start"}}
	for i := 0; i < len(queue); i++ {
		for _, st := range rwSuccessors(cfg, queue[i].s) {
			k := st.next.key()
			if seen[k] {
				continue
			}
			seen[k] = true
			queue = append(queue, entry{st.next, i, st.label})
			if v := rwViolation(cfg, st.next); v != "" {
				var trace []string
				for j := len(queue) - 1; j > 0; j = queue[j].parent {
					trace = append(trace, queue[j].label)
				}
				slices.Reverse(trace)
				return RWResult{States: len(seen), Violation: v, Trace: append(trace, "=> "+v)}
			}
		}
	}
	return RWResult{States: len(seen)}
}

func writerIdx(cfg RWConfig, c int) bool { return c >= cfg.Readers }

func rwName(cfg RWConfig, c int) string {
	if writerIdx(cfg, c) {
		return fmt.Sprintf("w%d", c-cfg.Readers)
	}
	return fmt.Sprintf("r%d", c)
}

type rwStep struct {
	label string
	next  *rwState
}

func rwSuccessors(cfg RWConfig, s *rwState) []rwStep {
	var out []rwStep
	add := func(label string, t *rwState) { out = append(out, rwStep{label, t}) }
	for c := range s.cl {
		name := rwName(cfg, c)
		switch s.cl[c].phase {
		case rwIdle:
			t := s.clone()
			t.cl[c].phase = rwAcquiring
			for i := range cfg.N {
				t.msgs = append(t.msgs, rwMsg{rwReq, uint8(c), uint8(i)})
			}
			add(name+": start", t)
		case rwHolding:
			t := s.clone()
			t.cl[c].phase = rwEnded
			add(name+": validity ends", t)
			t = s.clone()
			t.cl[c].phase = rwEnded
			for i := range cfg.N {
				t.msgs = append(t.msgs, rwMsg{rwRelease, uint8(c), uint8(i)})
			}
			add(name+": release", t)
		case rwEnded:
			for i := range cfg.N { // its entries may expire now
				if holdsOn(s, c, i, writerIdx(cfg, c)) {
					t := s.clone()
					drop(t, c, i)
					add(fmt.Sprintf("n%d: %s's entry expires", i, name), t)
				}
			}
		}
	}
	for i := range s.nodes {
		if s.nodes[i].intent {
			t := s.clone()
			t.nodes[i].intent = false
			add(fmt.Sprintf("n%d: the intent expires", i), t)
		}
		if s.nodes[i].phase != rwNoPhase {
			t := s.clone()
			t.nodes[i].phase = rwNoPhase
			add(fmt.Sprintf("n%d: the readers' mark or read phase expires", i), t)
		}
	}
	for j, m := range s.msgs {
		t := s.clone()
		t.msgs = slices.Delete(t.msgs, j, j+1)
		add(rwDeliver(cfg, t, m), t)
	}
	return out
}

func holdsOn(s *rwState, c, i int, writer bool) bool {
	if writer {
		return s.nodes[i].writer == int8(c)
	}
	return s.nodes[i].readers&(1<<c) != 0
}

func drop(s *rwState, c, i int) {
	if s.nodes[i].writer == int8(c) {
		s.nodes[i].writer = -1
	}
	s.nodes[i].readers &^= 1 << c
}

// rwDeliver delivers m in s (removed from the network already) and says what happened.
func rwDeliver(cfg RWConfig, s *rwState, m rwMsg) string {
	c, i := int(m.client), int(m.node)
	name, nd := rwName(cfg, c), &s.nodes[i]
	switch m.kind {
	case rwReq:
		ok := false
		if writerIdx(cfg, c) {
			switch {
			case nd.phase == rwReadPhase:
				nd.intent = true
			case nd.writer < 0 && nd.readers == 0:
				nd.writer, nd.intent, ok = int8(c), false, true
			case nd.writer < 0:
				nd.intent = true
			}
		} else if cfg.IgnoreWriter || (nd.writer < 0 && (!nd.intent || nd.phase == rwReadPhase)) {
			nd.readers |= 1 << c
			ok = true
		} else if nd.phase != rwReadPhase {
			nd.phase = rwReadersWait
		}
		kind := rwRefuse
		if ok {
			kind = rwGrant
		}
		s.msgs = append(s.msgs, rwMsg{kind, m.client, m.node})
		return fmt.Sprintf("n%d: %s's acquire -> %v", i, name, map[bool]string{true: "granted", false: "refused"}[ok])
	case rwRelease:
		if writerIdx(cfg, c) && nd.writer == int8(c) && nd.phase == rwReadersWait {
			nd.phase = rwReadPhase // lua/rw_release.lua
		}
		drop(s, c, i)
		return fmt.Sprintf("n%d: %s's release", i, name)
	}
	cl := &s.cl[c]
	lbl := fmt.Sprintf("%s: n%d answers %v", name, i, map[uint8]string{rwGrant: "granted", rwRefuse: "refused"}[m.kind])
	if cl.phase != rwAcquiring {
		return lbl + " (late)"
	}
	if m.kind == rwGrant {
		cl.grants |= 1 << i
	} else {
		cl.refusals |= 1 << i
	}
	switch {
	case popcount(cl.grants) >= cfg.Q:
		cl.phase = rwHolding
		return lbl + "; holds"
	case cfg.N-popcount(cl.refusals) < cfg.Q:
		cl.phase = rwEnded
		for j := range cfg.N { // undo everywhere
			s.msgs = append(s.msgs, rwMsg{rwRelease, m.client, uint8(j)})
		}
		return lbl + "; fails, undoes"
	}
	return lbl
}

func popcount(b uint8) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

func rwViolation(cfg RWConfig, s *rwState) string {
	var readers, writers []string
	for c := range s.cl {
		if s.cl[c].phase != rwHolding {
			continue
		}
		if writerIdx(cfg, c) {
			writers = append(writers, rwName(cfg, c))
		} else {
			readers = append(readers, rwName(cfg, c))
		}
	}
	switch {
	case len(writers) > 1:
		return "two writers hold: " + strings.Join(writers, ", ")
	case len(writers) == 1 && len(readers) > 0:
		return fmt.Sprintf("a reader overlaps the writer: %s with %s", strings.Join(readers, ", "), writers[0])
	}
	return ""
}
