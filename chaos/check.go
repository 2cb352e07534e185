package chaos

// The checkers of a recorded history: overlapping critical sections, the token claims,
// stale writes accepted and refused, lost writes, money conserved, and porcupine's
// linearizability check of the store; Check gathers them into a Verdict.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/quorumlock/redlock"
)

// Overlap is a pair of critical sections on one key that overlapped in time: a violation of
// mutual exclusion as the application sees it.
type Overlap struct {
	Key  string        `json:"key"`
	A    int           `json:"a"` // hold granted first
	B    int           `json:"b"`
	From time.Duration `json:"from_ns"`
	To   time.Duration `json:"to_ns"`
	// BothValid is true when B was granted while A's validity deadline had not passed: the
	// lock itself was handed out twice (a node lost state, or a node's clock jumped). When
	// false, A was still working past its own deadline (a pause) and the lock kept its word.
	BothValid bool `json:"both_valid"`
}

// Overlaps returns every pair of overlapping critical sections, per key, ordered by the
// start of the overlap. Two sections overlap when each began before the other ended.
func Overlaps(h *History) []Overlap {
	var out []Overlap
	for _, key := range keysOf(h) {
		hs := holdsOf(h, key)
		slices.SortFunc(hs, func(a, b Hold) int { return cmp.Compare(a.Granted, b.Granted) })
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if b.Granted >= a.End {
					break
				}
				out = append(out, Overlap{Key: key, A: a.ID, B: b.ID, From: b.Granted, To: min(a.End, b.End),
					BothValid: b.Granted < a.Until})
			}
		}
	}
	slices.SortFunc(out, func(x, y Overlap) int { return cmp.Compare(x.From, y.From) })
	return out
}

// TokenProblem is a broken token claim of docs/design.md §1: U (two acquisitions share a
// token) or O (an acquisition that began after another had returned got a smaller token).
type TokenProblem struct {
	Claim  string `json:"claim"`
	A      int    `json:"a"`
	B      int    `json:"b"`
	Detail string `json:"detail"`
}

// CheckTokens checks claims U and O on every pair of holds of a key. For O it uses Asked
// (before B's successful attempt began) and Granted (after A's acquire returned), so every
// pair it judges is one the claim covers.
func CheckTokens(h *History) []TokenProblem {
	var out []TokenProblem
	for _, key := range keysOf(h) {
		hs := holdsOf(h, key)
		seen := map[redlock.Token]int{}
		for _, b := range hs {
			if a, dup := seen[b.Token]; dup {
				out = append(out, TokenProblem{Claim: "U", A: a, B: b.ID,
					Detail: fmt.Sprintf("holds %d and %d of %q both got token %d", a, b.ID, key, b.Token)})
			}
			seen[b.Token] = b.ID
		}
		byGranted := slices.Clone(hs)
		slices.SortFunc(byGranted, func(x, y Hold) int { return cmp.Compare(x.Granted, y.Granted) })
		byAsked := slices.Clone(hs)
		slices.SortFunc(byAsked, func(x, y Hold) int { return cmp.Compare(x.Asked, y.Asked) })
		best := -1 // index in byGranted of the largest token granted so far
		next := 0
		for _, b := range byAsked {
			for next < len(byGranted) && byGranted[next].Granted < b.Asked {
				if best < 0 || byGranted[next].Token > byGranted[best].Token {
					best = next
				}
				next++
			}
			if best >= 0 && b.Token <= byGranted[best].Token {
				a := byGranted[best]
				out = append(out, TokenProblem{Claim: "O", A: a.ID, B: b.ID,
					Detail: fmt.Sprintf("hold %d of %q asked at %v, after hold %d (token %d) was granted at %v, and got the smaller token %d",
						b.ID, key, b.Asked, a.ID, a.Token, a.Granted, b.Token)})
			}
		}
	}
	return out
}

// StaleAccepted returns the IDs of writes the store accepted although it had already
// accepted, for the same key, a write of another hold whose token was at least as high.
// Such a write is the corruption fencing exists to prevent: a holder overwriting the work of
// a newer one. The check follows the store's own order of decisions.
func StaleAccepted(h *History) []int {
	ws := decided(h)
	type top struct {
		tok   redlock.Token
		holds map[int]bool
	}
	tops := map[string]*top{}
	var out []int
	for _, w := range ws {
		if !w.Accepted {
			continue
		}
		t := tops[w.Key]
		if t == nil {
			t = &top{holds: map[int]bool{}}
			tops[w.Key] = t
		}
		switch {
		case w.Token < t.tok, w.Token == t.tok && !t.holds[w.Hold] && len(t.holds) > 0:
			out = append(out, w.ID)
		case w.Token > t.tok:
			t.tok, t.holds = w.Token, map[int]bool{}
		}
		if w.Token == t.tok {
			t.holds[w.Hold] = true
		}
	}
	return out
}

// StaleRejected counts the writes the store refused because it had admitted a higher token
// for their key. A leg refused only with its atomic write (Vetoed) is not one of them.
func StaleRejected(h *History) int {
	n := 0
	for _, w := range h.Writes {
		if w.Applied >= 0 && !w.Accepted && !w.Vetoed {
			n++
		}
	}
	return n
}

// Transfer figures of a history: the writes over several keys, and those the store refused.
func transferCounts(h *History) (transfers, refused int) {
	for _, w := range h.Writes {
		if len(w.Legs) > 0 && w.Legs[0] == w.ID && w.Applied >= 0 {
			transfers++
			if !w.Accepted {
				refused++
			}
		}
	}
	return transfers, refused
}

// CheckConservation checks the money of a history with transfers (writes over several keys,
// each leg adding its Delta to its key's balance): every transfer that reached the store
// was applied whole or not at all; a refused one had a stale leg (a token below its key's
// highest), and an accepted one none; the legs of each transfer add up to 0; each key's
// final balance is the sum of the deltas of the accepted writes the store holds; and the
// balances add up to 0, what they started at. It returns what it found broken, in words;
// nothing for a history without deltas.
func CheckConservation(h *History) []string {
	var out []string
	for _, w := range h.Writes {
		if len(w.Legs) == 0 || w.Legs[0] != w.ID || w.Applied < 0 {
			continue
		}
		var accepted, stale int
		var sum int64
		for _, id := range w.Legs {
			l := h.Writes[id]
			if l.Accepted {
				accepted++
			}
			if l.Stale() {
				stale++
			}
			sum += l.Delta
		}
		switch {
		case accepted != 0 && accepted != len(w.Legs):
			out = append(out, fmt.Sprintf("transfer of writes %v half applied: %d of %d legs accepted", w.Legs, accepted, len(w.Legs)))
		case accepted == 0 && stale == 0:
			out = append(out, fmt.Sprintf("transfer of writes %v refused with no stale leg", w.Legs))
		case accepted > 0 && stale > 0:
			out = append(out, fmt.Sprintf("transfer of writes %v accepted with %d stale legs", w.Legs, stale))
		}
		if sum != 0 {
			out = append(out, fmt.Sprintf("transfer of writes %v: its legs add up to %d, not 0", w.Legs, sum))
		}
	}
	var total int64
	for _, k := range keysOf(h) {
		var want int64
		for _, id := range h.Stored[k] {
			want += h.Writes[id].Delta
		}
		if got := h.Balances[k]; got != want {
			out = append(out, fmt.Sprintf("%s: balance %d, the accepted writes add up to %d", k, got, want))
		}
		total += h.Balances[k]
	}
	if total != 0 {
		out = append(out, fmt.Sprintf("the balances add up to %d, not 0: money was made or destroyed", total))
	}
	return out
}

// LostWrites returns the IDs of writes acknowledged to their writer as accepted that the
// store does not hold at the end.
func LostWrites(h *History) []int {
	present := map[int]bool{}
	for _, ids := range h.Stored {
		for _, id := range ids {
			present[id] = true
		}
	}
	var out []int
	for _, w := range h.Writes {
		if w.Accepted && w.Acked >= 0 && !present[w.ID] {
			out = append(out, w.ID)
		}
	}
	return out
}

// Linearizability verdicts. Unknown means the checker ran out of time: it proves nothing and
// never counts as a pass.
const (
	LinOK      = "ok"
	LinIllegal = "illegal"
	LinUnknown = "unknown"
)

// DefaultLinTimeout bounds one porcupine check.
const DefaultLinTimeout = 30 * time.Second

// regInput and regOutput are the operations of the fenced-register model.
type regInput struct {
	Key   string
	Read  bool
	Token redlock.Token
	// Vetoed: a leg of an atomic write over several keys, refused with the write because
	// another leg was stale. Whether that was so is CheckConservation's business; for this
	// key it is a write with no effect.
	Vetoed bool
}

type regOutput struct {
	Accepted bool
	Highest  redlock.Token
}

// registerModel is the specification of a fenced register: per key, the state is the
// highest admitted token; a write is accepted iff its token is at least that, and then
// becomes it; a read returns it. A vetoed leg is refused and changes nothing.
var registerModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			k := op.Input.(regInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return redlock.Token(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(redlock.Token), input.(regInput), output.(regOutput)
		if in.Read {
			return out.Highest == s, s
		}
		if in.Vetoed {
			return !out.Accepted, s
		}
		if in.Token >= s {
			return out.Accepted, in.Token
		}
		return !out.Accepted, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.Read {
			return fmt.Sprintf("read %s -> %d", in.Key, out.Highest)
		}
		if in.Vetoed {
			return fmt.Sprintf("write %s token %d, refused with its transfer", in.Key, in.Token)
		}
		return fmt.Sprintf("write %s token %d -> accepted %v", in.Key, in.Token, out.Accepted)
	},
}

// registerOps turns the store's history into porcupine operations: one per write that
// reached the store, from when it was sent to when its outcome was known (the writer's ack,
// or the store's decision for a writer that had stopped waiting), and one final read of the
// highest token per key.
func registerOps(h *History) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, w := range h.Writes {
		if w.Applied < 0 {
			continue // never reached the store: no effect, nothing to check
		}
		ret := w.Applied
		if w.Acked >= 0 {
			ret = w.Acked
		}
		ops = append(ops, porcupine.Operation{ClientId: w.Client, Input: regInput{Key: w.Key, Token: w.Token, Vetoed: w.Vetoed},
			Call: int64(w.Sent), Output: regOutput{Accepted: w.Accepted}, Return: int64(ret)})
	}
	end := int64(h.Duration) + 1
	for _, k := range keysOf(h) {
		ops = append(ops, porcupine.Operation{ClientId: h.Clients, Input: regInput{Key: k, Read: true},
			Call: end, Output: regOutput{Highest: h.Highest[k]}, Return: end})
	}
	return ops
}

// CheckLinearizable checks the store's history against the fenced-register model with
// porcupine: LinOK, LinIllegal (some write was accepted or refused against the ≥ rule in
// every possible order, for example a stale write accepted after a newer one), or
// LinUnknown when the check did not finish within timeout.
func CheckLinearizable(h *History, timeout time.Duration) string {
	return checkLinearizable(registerModel, registerOps(h), timeout)
}

func checkLinearizable(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) string {
	switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
	case porcupine.Ok:
		return LinOK
	case porcupine.Illegal:
		return LinIllegal
	default:
		return LinUnknown
	}
}

// Violations counts mutual-exclusion violations: groups of critical sections linked by
// overlaps (the connected components of the overlap graph). A holder that pauses while three
// others come and go is one violation made of three overlapping pairs.
func Violations(overlaps []Overlap) int {
	parent := map[int]int{}
	var find func(int) int
	find = func(x int) int {
		if p, ok := parent[x]; ok && p != x {
			parent[x] = find(p)
			return parent[x]
		}
		parent[x] = x
		return x
	}
	for _, o := range overlaps {
		parent[find(o.A)] = find(o.B)
	}
	roots := map[int]bool{}
	for x := range parent {
		roots[find(x)] = true
	}
	return len(roots)
}

// Verdict is what the checkers found in one history.
type Verdict struct {
	// Violations counts mutual-exclusion violations; Overlaps lists their pairs.
	Violations    int            `json:"violations"`
	Overlaps      []Overlap      `json:"overlaps"`
	TokenProblems []TokenProblem `json:"token_problems"`
	StaleAccepted []int          `json:"stale_accepted"`
	StaleRejected int            `json:"stale_rejected"`
	Linearizable  string         `json:"linearizable"`
	LostWrites    []int          `json:"lost_writes"`
	// Transfers counts the writes over several keys that reached the store, and
	// TransfersRefused those it refused; Conservation lists the money checks that failed
	// (CheckConservation).
	Transfers        int      `json:"transfers,omitempty"`
	TransfersRefused int      `json:"transfers_refused,omitempty"`
	Conservation     []string `json:"conservation,omitempty"`
	// Acquisitions counts acquisitions: a lock over several keys is one (Hold.First).
	Acquisitions int           `json:"acquisitions"`
	Writes       int           `json:"writes"`
	AcqPerSec    float64       `json:"acquisitions_per_s"`
	WaitP50      time.Duration `json:"wait_p50_ns"`
	WaitP99      time.Duration `json:"wait_p99_ns"`
	WaitMax      time.Duration `json:"wait_max_ns"`
	// FaultAcqPerSec is the rate of acquisitions while a standing node fault held (a node
	// down, paused or slow); -1 when the run had none.
	FaultAcqPerSec float64 `json:"fault_acquisitions_per_s"`
	// PerClientMin and PerClientMax are the fewest and most critical sections a client had:
	// Redlock keeps no queue, so nothing makes it fair.
	PerClientMin int `json:"per_client_min"`
	PerClientMax int `json:"per_client_max"`
	// BiggestJump is the largest step between the tokens of two holds of a key granted one
	// after the other, with the later hold; it shows clock-seeded counters taking over.
	BiggestJump     redlock.Token `json:"biggest_jump"`
	BiggestJumpHold int           `json:"biggest_jump_hold"`
}

// Check runs every checker on h.
func Check(h *History, linTimeout time.Duration) Verdict {
	v := Verdict{
		Overlaps:      Overlaps(h),
		TokenProblems: CheckTokens(h),
		StaleAccepted: StaleAccepted(h),
		StaleRejected: StaleRejected(h),
		Linearizable:  CheckLinearizable(h, linTimeout),
		LostWrites:    LostWrites(h),
		Conservation:  CheckConservation(h),
		BiggestJump:   0, BiggestJumpHold: -1,
	}
	acqs := acquisitions(h)
	v.Acquisitions = len(acqs)
	v.Transfers, v.TransfersRefused = transferCounts(h)
	v.Violations = Violations(v.Overlaps)
	for _, w := range h.Writes {
		if w.Applied >= 0 {
			v.Writes++
		}
	}
	if h.Busy > 0 {
		v.AcqPerSec = float64(len(acqs)) / h.Busy.Seconds()
	}
	waits := make([]time.Duration, 0, len(acqs))
	for _, hd := range acqs {
		waits = append(waits, hd.Granted-hd.Asked)
	}
	v.WaitP50, v.WaitP99, v.WaitMax = percentile(waits, 0.50), percentile(waits, 0.99), percentile(waits, 1)
	v.FaultAcqPerSec = faultRate(h)
	if h.Clients > 0 {
		per := make([]int, h.Clients)
		for _, hd := range acqs {
			if hd.Client >= 0 && hd.Client < h.Clients {
				per[hd.Client]++
			}
		}
		v.PerClientMin, v.PerClientMax = slices.Min(per), slices.Max(per)
	}
	for _, key := range keysOf(h) {
		hs := holdsOf(h, key)
		slices.SortFunc(hs, func(a, b Hold) int { return cmp.Compare(a.Granted, b.Granted) })
		for i := 1; i < len(hs); i++ {
			if hs[i].Token > hs[i-1].Token && hs[i].Token-hs[i-1].Token > v.BiggestJump {
				v.BiggestJump, v.BiggestJumpHold = hs[i].Token-hs[i-1].Token, hs[i].ID
			}
		}
	}
	return v
}

// faultRate returns the acquisitions per second granted while some node fault held, over
// the union of those faults' intervals, or -1 when there were none.
func faultRate(h *History) float64 {
	n, total := faultAcquisitions(h)
	if total == 0 {
		return -1
	}
	return float64(n) / total.Seconds()
}

// standingNodeFaults are the fault kinds during which the workload keeps running: the
// acquisition rate while they hold says what they cost.
var standingNodeFaults = []string{"node down", "node paused", "slow node", "failover"}

// faultAcquisitions counts the acquisitions granted while a standing node fault held, and
// the total time such faults held.
func faultAcquisitions(h *History) (int, time.Duration) {
	type span struct{ from, to time.Duration }
	var spans []span
	for _, f := range h.Faults {
		if slices.Contains(standingNodeFaults, f.Kind) && f.End > f.At {
			spans = append(spans, span{f.At, f.End})
		}
	}
	if len(spans) == 0 {
		return 0, 0
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		if last := &merged[len(merged)-1]; s.from <= last.to {
			last.to = max(last.to, s.to)
		} else {
			merged = append(merged, s)
		}
	}
	var total time.Duration
	n := 0
	acqs := acquisitions(h)
	for _, s := range merged {
		total += s.to - s.from
		for _, hd := range acqs {
			if hd.Granted >= s.from && hd.Granted < s.to {
				n++
			}
		}
	}
	return n, total
}

// percentile returns the p-quantile (nearest rank) of d, 0 for none.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// decided returns the writes the store decided on, in the order it decided.
func decided(h *History) []Write {
	var ws []Write
	for _, w := range h.Writes {
		if w.Applied >= 0 {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b Write) int { return cmp.Compare(a.Order, b.Order) })
	return ws
}

// keysOf returns the keys of the history: its declared keys, then any other key a hold or
// write used, in first-seen order.
func keysOf(h *History) []string {
	seen := map[string]bool{}
	var keys []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range h.Keys {
		add(k)
	}
	for _, hd := range h.Holds {
		add(hd.Key)
	}
	for _, w := range h.Writes {
		add(w.Key)
	}
	return keys
}

func holdsOf(h *History, key string) []Hold {
	var hs []Hold
	for _, hd := range h.Holds {
		if hd.Key == key {
			hs = append(hs, hd)
		}
	}
	return hs
}
