package chaos

// What a scenario expects of its runs, and the judging of a run against it: the checks
// every run must pass, the roles of the scripted sections, liveness during a fault.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Expect is what a scenario must show in every run. Whatever the scenario, a run must also
// show no stale write accepted, unique and ordered tokens (claims U and O of
// docs/design.md), a linearizable store history (porcupine "ok": "unknown" fails too), no
// lost write, money conserved where the workload makes transfers (CheckConservation), and
// at least one acquisition.
type Expect struct {
	// Violation: mutual exclusion is expected to break, and the run must observe at least
	// one overlap (so the reproduction is real). Otherwise the run must observe none.
	Violation bool
	// Rejections: the store must refuse at least one stale write.
	Rejections bool
	// LiveDuringFault: locks must still be granted while the fault named here holds.
	LiveDuringFault string
	// Kept names the role of a scripted section that must run to its end without its lock
	// being lost; Lost one that must not: its lock is lost (Do reported ErrLockLost) or the
	// store refuses one of its writes (a newer holder got the lock first). A section under
	// a lock over several keys counts once, with the writes of all its keys.
	Kept, Lost string
	// MayOverlap: mutual exclusion may break in this scenario, and the run neither needs nor
	// forbids an overlap (the lab counts them).
	MayOverlap bool
	// Permits, for a semaphore scenario, is the semaphore's count: with Violation, some
	// moment must see more critical sections at once than Permits (the reproduction is
	// real); without, none may.
	Permits int
}

// Claim says in words what the scenario expects.
func (e Expect) Claim() string {
	s := "safe: no overlap"
	switch {
	case e.Violation:
		s = "mutual exclusion breaks"
	case e.MayOverlap:
		s = "mutual exclusion may break"
	}
	if e.Kept != "" {
		s += ", the " + e.Kept + " is kept"
	}
	if e.Lost != "" {
		s += ", the " + e.Lost + " is lost or fenced off"
	}
	if e.Rejections {
		s += ", fencing rejects the stale writes"
	}
	if e.LiveDuringFault != "" {
		s += ", locks granted during the fault"
	}
	if e.Permits > 0 && e.Violation {
		s += fmt.Sprintf(", more than %d holders of %d permits", e.Permits, e.Permits)
	} else if e.Permits > 0 {
		s += fmt.Sprintf(", at most %d holders", e.Permits)
	}
	return s
}

// The differences judge reports when a run did not reproduce an expected failure: a matter
// of timing (the fault has to land inside a window), not of safety.
const (
	problemNoViolation = "expected a mutual-exclusion violation, and the run observed none: the failure was not reproduced"
	problemNoRejection = "expected the store to reject a stale write, and it rejected none"
	problemNoCrowd     = "expected more critical sections at once than the semaphore's permits, and the run saw none: the failure was not reproduced"
)

// Unreproduced reports whether a run's only problems are that an expected failure did not
// happen (problemNoViolation, problemNoRejection): every safety check passed.
func (res *Result) Unreproduced() bool {
	for _, p := range res.Problems {
		if p != problemNoViolation && p != problemNoRejection && p != problemNoCrowd {
			return false
		}
	}
	return len(res.Problems) > 0
}

// judge compares a run with the expectation and returns the differences: the checks every
// run must pass, then the roles of the scripted sections, then liveness during the fault.
func (e Expect) judge(h *History, v Verdict) []string {
	p := e.judgeSafety(v)
	for _, want := range []struct {
		role string
		lost bool
	}{{e.Kept, false}, {e.Lost, true}} {
		if want.role != "" {
			p = append(p, judgeRole(h, want.role, want.lost)...)
		}
	}
	if e.LiveDuringFault != "" {
		p = append(p, judgeLive(h, e.LiveDuringFault)...)
	}
	if e.Permits > 0 {
		switch most := mostAtOnce(h); {
		case e.Violation && most <= e.Permits:
			p = append(p, problemNoCrowd)
		case !e.Violation && most > e.Permits:
			p = append(p, fmt.Sprintf("%d critical sections at once on a semaphore of %d permits", most, e.Permits))
		}
	}
	return p
}

// mostAtOnce is the largest number of critical sections that ran at one moment (a section
// still open runs to the end of the history).
func mostAtOnce(h *History) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	var es []edge
	for _, hd := range acquisitions(h) {
		end := hd.End
		if hd.Open {
			end = math.MaxInt64
		}
		es = append(es, edge{hd.Granted, 1}, edge{end, -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	at, most := 0, 0
	for _, e := range es {
		at += e.delta
		most = max(most, at)
	}
	return most
}

// judgeSafety returns the differences found by the checkers: overlaps against the expected
// violation, stale writes rejected and accepted, the token claims, the store's history,
// lost writes, money, and whether any lock was granted at all.
func (e Expect) judgeSafety(v Verdict) []string {
	var p []string
	switch {
	case e.Violation && len(v.Overlaps) == 0:
		p = append(p, problemNoViolation)
	case !e.Violation && !e.MayOverlap && len(v.Overlaps) > 0:
		p = append(p, fmt.Sprintf("%d overlapping critical sections where the lock claims mutual exclusion", len(v.Overlaps)))
	}
	if e.Rejections && v.StaleRejected == 0 {
		p = append(p, problemNoRejection)
	}
	if n := len(v.StaleAccepted); n > 0 {
		p = append(p, fmt.Sprintf("%d stale writes accepted (write IDs %v)", n, v.StaleAccepted))
	}
	for _, tp := range v.TokenProblems {
		p = append(p, fmt.Sprintf("token claim %s broken: %s", tp.Claim, tp.Detail))
	}
	if v.Linearizable != LinOK {
		p = append(p, fmt.Sprintf("porcupine check of the store history: %s (only %q passes)", v.Linearizable, LinOK))
	}
	if n := len(v.LostWrites); n > 0 {
		p = append(p, fmt.Sprintf("%d acknowledged writes missing from the store (write IDs %v)", n, v.LostWrites))
	}
	for _, c := range v.Conservation {
		p = append(p, "money not conserved: "+c)
	}
	if v.Acquisitions == 0 {
		p = append(p, "no lock was ever granted")
	}
	return p
}

// judgeRole checks every section of the role: one that must lose its lock (lost) must have
// been reported lost or had a write refused, one that must keep it neither, and must have
// ended. A role that no section played is a difference too.
func judgeRole(h *History, role string, lost bool) []string {
	var p []string
	found := false
	for _, hd := range acquisitions(h) {
		if hd.Role != role {
			continue
		}
		found = true
		set := setOf(hd)
		refused := false
		for _, w := range h.Writes {
			if slices.Contains(set, w.Hold) && w.Applied >= 0 && !w.Accepted {
				refused = true
			}
		}
		for _, id := range set {
			hd.Lost = hd.Lost || h.Holds[id].Lost
		}
		switch {
		case lost && !hd.Lost && !refused:
			p = append(p, fmt.Sprintf("the %s (hold %d) was expected to lose its lock, and kept it with every write admitted", role, hd.ID))
		case !lost && (hd.Lost || refused):
			p = append(p, fmt.Sprintf("the %s (hold %d) lost its lock (lost %v, a write refused %v)", role, hd.ID, hd.Lost, refused))
		case !lost && hd.Open:
			p = append(p, fmt.Sprintf("the %s (hold %d) did not end", role, hd.ID))
		}
	}
	if !found {
		p = append(p, fmt.Sprintf("no %s was recorded", role))
	}
	return p
}

// judgeLive checks that some lock was granted while a fault of the kind held.
func judgeLive(h *History, kind string) []string {
	granted, found := 0, false
	for _, f := range h.Faults {
		if f.Kind != kind {
			continue
		}
		found = true
		for _, hd := range acquisitions(h) {
			if hd.Granted >= f.At && hd.Granted < f.End {
				granted++
			}
		}
	}
	if !found {
		return []string{fmt.Sprintf("no %q fault was recorded", kind)}
	} else if granted == 0 {
		return []string{fmt.Sprintf("no lock was granted while the %q fault held", kind)}
	}
	return nil
}
