package chaos

// The workload: clients looping on Do (DoMulti for transfers) and writing to the store
// under their locks, the plans that scripts give them, and the gates that park them.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// Plan is what a client does while it holds the lock: Writes writes to the store, Gap
// apart (the work between two writes), each preceded by the validity check a careful holder
// makes (its context is live and Lock.Until has not passed). A refused write ends the
// section: the store has told the holder that a newer one exists.
//
// A section over several keys (a lock taken with DoMulti) makes each of its writes a
// transfer: one atomic write with a leg per key (Register.WriteAll), each leg under its own
// key's token, the first key paying the others a random amount.
type Plan struct {
	Role   string // "" for the plain workload; a scripted section is named
	Writes int
	Gap    time.Duration
	// Keys are the keys the section locks: one for Do, several for DoMulti (in this
	// order: the first is the one that pays). Nil for the workload's own choice: one key
	// at random, or, in a transfer workload, two distinct accounts at random.
	Keys []string
	// Before, if set, runs after the validity check of write seq and before the write: where
	// a scripted holder pauses. hold is the ID of the section's hold of its first key.
	Before func(ctx context.Context, hold, seq int)
	// Send, if set, sends write seq instead of the plain store write: where a scripted write
	// is held in flight. For sections over one key only.
	Send func(ctx context.Context, req WriteReq) (bool, error)
	// Stop, if set, ends the section when it is closed: the section returns, releasing its
	// lock, instead of making its next write. Writes still bounds the section.
	Stop <-chan struct{}
}

// errPastValidity ends a critical section whose validity deadline passed.
var errPastValidity = errors.New("chaos: validity deadline passed before the write")

// worker is one workload client's loop.
type worker struct {
	id   int
	rng  *rand.Rand // only the worker's goroutine uses it
	gate *gate

	mu   sync.Mutex
	plan *Plan // the scripted plan for the next critical section
}

func (w *worker) takePlan(def Plan) Plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.plan == nil {
		return def
	}
	p := *w.plan
	w.plan = nil
	return p
}

func (w *worker) setPlan(p Plan) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.plan = &p
}

// held is the lock of one critical section, over one key (Do) or several (DoMulti).
type held struct {
	keys   []string
	tokens []redlock.Token
	id     string
	until  func() time.Time
	holds  []int // the section's hold IDs, one per key
}

func heldLock(l *redlock.Lock) *held {
	return &held{keys: []string{l.Key()}, tokens: []redlock.Token{l.Token()}, id: l.ID(), until: l.Until}
}

func heldMulti(m *redlock.MultiLock) *held {
	return &held{keys: m.Keys(), tokens: m.Tokens(), id: m.ID(), until: m.Until}
}

// pickKeys is the workload's choice of keys for a section without Plan.Keys, among the keys
// not reserved for scripted sections: one key at random, or, in a transfer workload, two
// distinct accounts at random, the first paying.
func (r *Run) pickKeys(w *worker) []string {
	keys := r.keys[r.Scenario.setup.reserved:]
	n := len(keys)
	a := w.rng.IntN(n)
	if !r.Scenario.setup.transfers {
		return []string{keys[a]}
	}
	b := (a + 1 + w.rng.IntN(n-1)) % n
	return []string{keys[a], keys[b]}
}

// work loops on Do (DoMulti for a section over several keys) until ctx ends: acquire, run
// the critical section, release.
func (r *Run) work(ctx context.Context, w *worker) {
	for {
		if !w.gate.pass(ctx) {
			return
		}
		p := w.takePlan(r.defPlan)
		keys := p.Keys
		if len(keys) == 0 {
			keys = r.pickKeys(w)
		}
		asked := r.rec.Now()
		var holds []int
		section := func(fctx context.Context, l *held) error {
			now := r.rec.Now()
			hds := make([]Hold, len(l.keys))
			for i, k := range l.keys {
				hds[i] = Hold{Client: w.id, Key: k, Token: l.tokens[i], LockID: l.id, Role: p.Role,
					Asked: asked, Granted: now, Until: r.rec.Offset(l.until())}
			}
			holds = r.rec.BeginHolds(hds)
			l.holds = holds
			defer func() {
				end := r.rec.Now()
				for _, id := range holds {
					r.rec.EndHold(id, end)
				}
			}()
			return r.critical(fctx, w, l, p)
		}
		var err error
		c, su := r.clients[w.id], r.Scenario.setup
		switch {
		case len(keys) == 1 && su.election:
			err = c.Election(keys[0]).Do(ctx, fmt.Sprintf("client-%d", w.id), r.ttl, func(fctx context.Context, l *redlock.Leadership) error {
				// The election's name is the section's key; its term is the token.
				return section(fctx, &held{keys: keys, tokens: []redlock.Token{l.Term()}, id: l.ID(), until: l.Until})
			})
		case len(keys) == 1 && su.rwlock:
			err = c.RWLock(keys[0]).DoWrite(ctx, r.ttl, func(fctx context.Context, l *redlock.Lock) error {
				return section(fctx, heldLock(l)) // the writer key, the writer's token
			})
		case len(keys) == 1 && su.permits > 0:
			err = c.Semaphore(keys[0], su.permits).Do(ctx, r.ttl, func(fctx context.Context, l *redlock.Lock) error {
				return section(fctx, heldLock(l)) // the permit's key, its token
			})
		case len(keys) == 1:
			err = c.Do(ctx, keys[0], r.ttl, func(fctx context.Context, l *redlock.Lock) error {
				return section(fctx, heldLock(l))
			})
		default:
			err = r.clients[w.id].DoMulti(ctx, keys, r.ttl, func(fctx context.Context, m *redlock.MultiLock) error {
				return section(fctx, heldMulti(m))
			})
		}
		if len(holds) > 0 && errors.Is(err, redlock.ErrLockLost) {
			for _, id := range holds {
				r.rec.MarkLost(id)
			}
		}
		if ctx.Err() != nil {
			return
		}
		if len(holds) == 0 && p.Role != "" {
			w.setPlan(p) // not acquired: the scripted plan is for the next section
		}
	}
}

// critical is one critical section under lock l.
func (r *Run) critical(fctx context.Context, w *worker, l *held, p Plan) error {
	if p.Send != nil && len(l.keys) > 1 {
		return errors.New("chaos: Plan.Send is for sections over one key")
	}
	for seq := 0; seq < p.Writes; seq++ {
		if seq > 0 && p.Gap > 0 {
			t := time.NewTimer(p.Gap) // the work between two writes
			select {
			case <-t.C:
			case <-fctx.Done():
				t.Stop()
				return context.Cause(fctx)
			case <-p.Stop: // a nil Stop never fires
				t.Stop()
				return nil
			}
		}
		select {
		case <-p.Stop:
			return nil
		default:
		}
		until := l.until()
		for _, id := range l.holds {
			r.rec.SeeUntil(id, r.rec.Offset(until))
		}
		if fctx.Err() != nil {
			return context.Cause(fctx)
		}
		if !time.Now().Before(until) {
			return errPastValidity
		}
		if p.Before != nil {
			p.Before(fctx, l.holds[0], seq)
		}
		reqs := make([]WriteReq, len(l.keys))
		amount := 1 + w.rng.Int64N(100)
		for i, k := range l.keys {
			reqs[i] = WriteReq{Client: w.id, Hold: l.holds[i], Key: k, Token: l.tokens[i], Seq: seq}
			if len(l.keys) > 1 {
				reqs[i].Delta = amount
				if i == 0 {
					reqs[i].Delta = -amount * int64(len(l.keys)-1)
				}
			}
		}
		ok := false
		if p.Send != nil {
			var err error
			if ok, err = p.Send(fctx, reqs[0]); err != nil {
				return err
			}
		} else {
			ok = r.reg.WriteAll(reqs)
		}
		if !ok {
			return &redlock.StaleTokenError{Resource: strings.Join(l.keys, ","), Got: l.tokens[0]}
		}
	}
	return nil
}

// gate lets a fault script park workers between two critical sections.
type gate struct {
	mu      sync.Mutex
	shut    bool
	waiting bool
	wake    chan struct{} // closed and replaced on every change
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

func (g *gate) changed() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// pass returns once the gate is open, or false when ctx ends.
func (g *gate) pass(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.shut {
		if !g.waiting {
			g.waiting = true
			g.changed()
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		g.mu.Lock()
		if ctx.Err() != nil {
			break
		}
	}
	if g.waiting {
		g.waiting = false
		g.changed()
	}
	return ctx.Err() == nil
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != shut {
		g.shut = shut
		g.changed()
	}
}

// awaitParked waits until the worker waits at its shut gate.
func (g *gate) awaitParked(ctx context.Context, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		g.mu.Lock()
		ok, wake := g.waiting, g.wake
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return fmt.Errorf("chaos: a client did not finish its critical section within %v", limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Soak lets the workload run for d: the length of a phase of the experiment.
func (r *Run) Soak(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pause stops the calling goroutine for d, whatever happens meanwhile: the fault of a
// process pause, not a wait for anything. It returns early only when ctx ends.
func Pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ParkAll parks every client between two critical sections and returns once they all
// wait: their current sections have ended and their locks are released. They stay parked
// until Begin, Unpark or UnparkAll. (Parking everyone, rather than everyone but the next
// actor, keeps the actor from starving the others while they finish.)
func (r *Run) ParkAll(ctx context.Context) error {
	for _, w := range r.workers {
		w.gate.set(true)
	}
	for _, w := range r.workers {
		if err := w.gate.awaitParked(ctx, r.waitLimit()); err != nil {
			return err
		}
	}
	r.rec.Note("every client parked")
	return nil
}

// waitLimit bounds the waits of choreography steps that should take about a TTL.
func (r *Run) waitLimit() time.Duration { return 5*r.ttl + 5*time.Second }

// Begin hands client actor the plan for its next critical section, lets it go on if it
// was parked, and returns the hold ID once that section has begun (for a section over
// several keys, the hold of its first key; Run.HoldOf finds the others).
func (r *Run) Begin(ctx context.Context, actor int, p Plan) (int, error) {
	r.Let(actor, p)
	hold := -1
	err := r.rec.Await(ctx, r.waitLimit(), fmt.Sprintf("client %d to begin its %q section", actor, p.Role), func(h *History) bool {
		for i := len(h.Holds) - 1; i >= 0; i-- {
			if hd := h.Holds[i]; hd.Client == actor && hd.Role == p.Role {
				hold = setOf(hd)[0]
				return true
			}
		}
		return false
	})
	if err != nil {
		return hold, err
	}
	var set []int
	r.rec.View(func(h *History) { set = slices.Clone(setOf(h.Holds[hold])) })
	if len(set) == 1 {
		r.rec.Note("client %d holds the lock with token %d (hold %d, %q)", actor, r.token(hold), hold, p.Role)
		return hold, nil
	}
	var what []string
	for _, id := range set {
		what = append(what, fmt.Sprintf("%s with token %d (hold %d)", r.key(id), r.token(id), id))
	}
	r.rec.Note("client %d holds %s (%q)", actor, strings.Join(what, ", "), p.Role)
	return hold, nil
}

// Let hands client c the plan for its next critical section and lets it go on if it was
// parked, without waiting for the section to begin.
func (r *Run) Let(c int, p Plan) {
	r.workers[c].setPlan(p)
	r.workers[c].gate.set(false)
}

// HoldOf returns the ID of the hold of key in the acquisition of hold (a lock over several
// keys has one hold per key), or -1 when that lock does not cover key.
func (r *Run) HoldOf(hold int, key string) int {
	id := -1
	r.rec.View(func(h *History) {
		for _, i := range setOf(h.Holds[hold]) {
			if h.Holds[i].Key == key {
				id = i
			}
		}
	})
	return id
}

func (r *Run) token(hold int) (t redlock.Token) {
	r.rec.View(func(h *History) { t = h.Holds[hold].Token })
	return t
}

func (r *Run) key(hold int) (k string) {
	r.rec.View(func(h *History) { k = h.Holds[hold].Key })
	return k
}

// Unpark lets the listed clients go on.
func (r *Run) Unpark(clients ...int) {
	r.rec.Note("clients %v go on", clients)
	for _, c := range clients {
		r.workers[c].gate.set(false)
	}
}

// Park shuts the listed clients' gates: each parks after its current critical section, and
// stays parked until Begin, Unpark or UnparkAll. It does not wait.
func (r *Run) Park(clients ...int) {
	r.rec.Note("clients %v park after their current section", clients)
	for _, c := range clients {
		r.workers[c].gate.set(true)
	}
}

// UnparkAll lets every parked client go on.
func (r *Run) UnparkAll() {
	for _, w := range r.workers {
		w.gate.set(false)
	}
}

// Other returns a client other than c, chosen with Rand.
func (r *Run) Other(c int) int {
	return (c + 1 + r.Rand.IntN(r.nClients-1)) % r.nClients
}

// AwaitHoldEnd waits until the hold's critical section has ended.
func (r *Run) AwaitHoldEnd(ctx context.Context, hold int, limit time.Duration) error {
	return r.rec.Await(ctx, limit, fmt.Sprintf("hold %d to end", hold), func(h *History) bool {
		return !h.Holds[hold].Open
	})
}

// AwaitNewerWrite waits until the store has accepted a write to the hold's key with a
// higher token than the hold's: a newer holder has written.
func (r *Run) AwaitNewerWrite(ctx context.Context, hold int, limit time.Duration) error {
	return r.rec.Await(ctx, limit, fmt.Sprintf("a write newer than hold %d's", hold), func(h *History) bool {
		hd := h.Holds[hold]
		for _, w := range h.Writes {
			if w.Key == hd.Key && w.Accepted && w.Token > hd.Token {
				return true
			}
		}
		return false
	})
}
