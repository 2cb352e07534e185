package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// Plan is what a client does while it holds the lock: Writes writes to the store, Gap
// apart (the work between two writes), each preceded by the validity check a careful holder
// makes (its context is live and Lock.Until has not passed). A refused write ends the
// section: the store has told the holder that a newer one exists.
type Plan struct {
	Role   string // "" for the plain workload; a scripted section is named
	Writes int
	Gap    time.Duration
	// Before, if set, runs after the validity check of write seq and before the write: where
	// a scripted holder pauses.
	Before func(ctx context.Context, hold, seq int)
	// Send, if set, sends write seq instead of the plain store write: where a scripted write
	// is held in flight.
	Send func(ctx context.Context, req WriteReq) (bool, error)
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

// work loops on Do until ctx ends: acquire, run the critical section, release.
func (r *Run) work(ctx context.Context, w *worker) {
	for {
		if !w.gate.pass(ctx) {
			return
		}
		p := w.takePlan(r.defPlan)
		key := r.keys[w.rng.IntN(len(r.keys))]
		asked := r.rec.Now()
		hold := -1
		err := r.clients[w.id].Do(ctx, key, r.ttl, func(fctx context.Context, l *redlock.Lock) error {
			hold = r.rec.BeginHold(Hold{Client: w.id, Key: key, Token: l.Token(), LockID: l.ID(), Role: p.Role,
				Asked: asked, Granted: r.rec.Now(), Until: r.rec.Offset(l.Until())})
			defer func() { r.rec.EndHold(hold, r.rec.Now()) }()
			return r.critical(fctx, w, l, hold, p)
		})
		if hold >= 0 && errors.Is(err, redlock.ErrLockLost) {
			r.rec.MarkLost(hold)
		}
		if ctx.Err() != nil {
			return
		}
		if hold < 0 && p.Role != "" {
			w.setPlan(p) // not acquired: the scripted plan is for the next section
		}
	}
}

// critical is one critical section under lock l.
func (r *Run) critical(fctx context.Context, w *worker, l *redlock.Lock, hold int, p Plan) error {
	for seq := 0; seq < p.Writes; seq++ {
		if seq > 0 && p.Gap > 0 {
			t := time.NewTimer(p.Gap) // the work between two writes
			select {
			case <-t.C:
			case <-fctx.Done():
				t.Stop()
				return context.Cause(fctx)
			}
		}
		until := l.Until()
		r.rec.SeeUntil(hold, r.rec.Offset(until))
		if fctx.Err() != nil {
			return context.Cause(fctx)
		}
		if !time.Now().Before(until) {
			return errPastValidity
		}
		if p.Before != nil {
			p.Before(fctx, hold, seq)
		}
		req := WriteReq{Client: w.id, Hold: hold, Key: l.Key(), Token: l.Token(), Seq: seq}
		ok := false
		if p.Send != nil {
			var err error
			if ok, err = p.Send(fctx, req); err != nil {
				return err
			}
		} else {
			ok = r.reg.Write(req)
		}
		if !ok {
			return &redlock.StaleTokenError{Resource: l.Key(), Got: l.Token()}
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
// was parked, and returns the hold ID once that section has begun.
func (r *Run) Begin(ctx context.Context, actor int, p Plan) (int, error) {
	r.workers[actor].setPlan(p)
	r.workers[actor].gate.set(false)
	hold := -1
	err := r.rec.Await(ctx, r.waitLimit(), fmt.Sprintf("client %d to begin its %q section", actor, p.Role), func(h *History) bool {
		for i := len(h.Holds) - 1; i >= 0; i-- {
			if hd := h.Holds[i]; hd.Client == actor && hd.Role == p.Role {
				hold = hd.ID
				return true
			}
		}
		return false
	})
	if err == nil {
		r.rec.Note("client %d holds the lock with token %d (hold %d, %q)", actor, r.token(hold), hold, p.Role)
	}
	return hold, err
}

func (r *Run) token(hold int) (t redlock.Token) {
	r.rec.View(func(h *History) { t = h.Holds[hold].Token })
	return t
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
