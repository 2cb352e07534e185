package redlock

// quorumSize returns the number of nodes that must agree among n when up to f nodes may
// lose their state: the smallest q with 2q − n ≥ f + 1, so that any two quorums share at
// least f + 1 nodes. f = 0 gives a majority. It fails when q would exceed n.
func quorumSize(n, f int) (int, error) {
	if n < 1 {
		return 0, invalidf("no nodes")
	}
	if f < 0 {
		return 0, invalidf("amnesia tolerance %d is negative", f)
	}
	q := (n + f + 2) / 2 // ceil((n + f + 1) / 2)
	if q > n {
		return 0, invalidf("amnesia tolerance %d needs a quorum of %d, more than the %d nodes", f, q, n)
	}
	return q, nil
}

// nodeState is where one node stands in one acquire.
type nodeState uint8

const (
	statePending  nodeState = iota // no reply to the acquire script yet
	stateAcquired                  // our key was set; counter holds the value it returned
	stateRaising                   // our key was set with a lower counter; raise sent
	stateRaised                    // raise confirmed: the counter equals the target
	stateRefused                   // held by another holder, counter ahead, or key gone
	stateFailed                    // error or no reply in time
)

// verdict is the outcome of an acquire so far.
type verdict uint8

const (
	undecided verdict = iota
	won
	lost
)

// acquireTally decides an acquire from the nodes' replies. It is pure bookkeeping: no I/O
// and no clock. See docs/design.md for the protocol and its proof.
//
// S is the set of nodes where our key was set; the token is a value t such that at least q
// nodes of S hold counter t while our key is present there (the set M). On the fast path t
// is any counter value returned by q nodes of S (at most one value can be, as 2q > n). Once
// |S| ≥ q but no value has q nodes, the slow path fixes t as the largest counter in S and
// raises every node of S below t to t; nodes that answer later join M or are raised too.
type acquireTally struct {
	q       int
	state   []nodeState
	counter []int64
	target  int64 // 0 until the slow path fixes t
}

func newAcquireTally(n, q int) *acquireTally {
	return &acquireTally{q: q, state: make([]nodeState, n), counter: make([]int64, n)}
}

// acquired records that node i set our key and returned counter c. It returns true when
// node i must now be raised to the target.
func (t *acquireTally) acquired(i int, c int64) (raise bool) {
	t.counter[i] = c
	t.state[i] = stateAcquired
	if t.target != 0 && c < t.target {
		t.state[i] = stateRaising
		return true
	}
	return false
}

// took returns, per node, whether our key was set there (its counter raised or not).
func (t *acquireTally) took() []bool {
	took := make([]bool, len(t.state))
	for i, s := range t.state {
		took[i] = s == stateAcquired || s == stateRaising || s == stateRaised
	}
	return took
}

// refused records that node i did not set our key (held by another holder).
func (t *acquireTally) refused(i int) { t.state[i] = stateRefused }

// failed records an error or a missing reply from node i.
func (t *acquireTally) failed(i int) { t.state[i] = stateFailed }

// raiseDone records the reply to a raise sent to node i.
func (t *acquireTally) raiseDone(i int, ok bool) {
	if t.state[i] != stateRaising {
		return // the node was already given up on
	}
	if ok {
		t.state[i] = stateRaised
		t.counter[i] = t.target
	} else {
		t.state[i] = stateRefused
	}
}

// decide returns the verdict and the token so far. When the slow path has to start, it
// fixes the target and returns the nodes to raise; the caller sends them the raise script.
func (t *acquireTally) decide() (v verdict, token int64, raise []int) {
	if t.target == 0 {
		var max, best int64
		inS, pending, inM := 0, 0, 0
		for i, s := range t.state {
			switch s {
			case stateAcquired:
				inS++
				c := t.counter[i]
				if c > max {
					max = c
				}
				if m := t.count(c); m > inM {
					inM, best = m, c
				}
			case statePending:
				pending++
			}
		}
		switch {
		case inM >= t.q:
			t.target = best
			return won, best, nil
		case inS+pending < t.q:
			return lost, 0, nil
		case inS < t.q:
			return undecided, 0, nil
		}
		// |S| ≥ q but |M| < q: the slow path. Fix t and raise the nodes below it.
		t.target = max
		for i, s := range t.state {
			if s == stateAcquired && t.counter[i] < max {
				t.state[i] = stateRaising
				raise = append(raise, i)
			}
		}
	}
	inM, possible := 0, 0
	for i, s := range t.state {
		switch {
		case (s == stateAcquired && t.counter[i] == t.target) || s == stateRaised:
			inM++
			possible++
		case s == stateRaising || s == statePending:
			possible++
		}
	}
	switch {
	case inM >= t.q:
		return won, t.target, raise
	case possible < t.q:
		return lost, 0, raise
	}
	return undecided, 0, raise
}

// count returns how many nodes set our key and returned counter c.
func (t *acquireTally) count(c int64) int {
	n := 0
	for i, s := range t.state {
		if s == stateAcquired && t.counter[i] == c {
			n++
		}
	}
	return n
}

// agreed counts the nodes that granted the acquire: our key was set there (the set S),
// whether or not their counter joined the token's quorum M.
func (t *acquireTally) agreed() int {
	n := 0
	for _, s := range t.state {
		if s == stateAcquired || s == stateRaising || s == stateRaised {
			n++
		}
	}
	return n
}
