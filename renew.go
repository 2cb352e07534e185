package redlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// renewer keeps the locks of every running [Client.Do] of one Client alive: one goroutine
// and one timer for the whole client, whatever the number of holds, instead of one per
// lock. Due renewals are sent through the transport, which writes the renewals that are
// due together as one pipeline per node. The goroutine runs only while some Do holds a
// lock.
type renewer struct {
	c       *Client
	mu      sync.Mutex
	holds   holdHeap // ordered by wake
	running bool
	kick    chan struct{} // buffered 1: the earliest wake may have moved
	// lag is how late the loop has lately woken after the time it asked for (the most of
	// its recent wakes, decaying by an eighth per wake): a process starved of CPU or paused
	// wakes late, and then renewals are sent that much earlier, so that the next lateness
	// eats into slack rather than into the time before the cancel point.
	lag time.Duration
}

// hold is one Do's lock under renewal.
type hold struct {
	ctx      context.Context // the Do's, for the observer's events
	l        *Lock
	cancel   context.CancelCauseFunc // fn's context
	interval time.Duration           // between renewals
	margin   time.Duration           // fn is told this long before Until
	retry    time.Duration           // after a failed renewal

	// Guarded by renewer.mu.
	next     time.Time // next renewal
	wake     time.Time // min(next, Until − margin), or Until − margin while a renewal is out
	inflight bool      // an extend was sent and has not been decided
	last     error     // the last failed renewal, nil after a success
	lost     error     // set once the lock is given up; fn's context is cancelled with it
	index    int       // in holds; -1 when not in it
}

// add starts renewing l. cancel cancels fn's context with the loss as cause.
func (r *renewer) add(ctx context.Context, l *Lock, cancel context.CancelCauseFunc) *hold {
	cfg := &r.c.cfg
	interval := time.Duration(float64(l.ttl) * cfg.renewFraction)
	h := &hold{ctx: ctx, l: l, cancel: cancel, interval: interval,
		margin: time.Duration(float64(l.ttl) * cfg.cancelMargin),
		retry:  min(cfg.retryDelay, interval/4)}
	h.next = cfg.clock.Now().Add(interval)
	h.wake = earliest(h.next, l.Until().Add(-h.margin))
	r.mu.Lock()
	if r.kick == nil {
		r.kick = make(chan struct{}, 1)
	}
	heap.Push(&r.holds, h)
	start := !r.running
	r.running = true
	r.mu.Unlock()
	if start {
		r.c.bg.Add(1) // under a Do, which holds the client, so the count is positive
		go r.loop()
	} else {
		r.poke()
	}
	return h
}

// remove stops renewing h and returns the loss that cancelled fn's context, if any.
func (r *renewer) remove(h *hold) error {
	defer r.poke() // the loop may be waiting for this hold; it ends when none are left
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.index >= 0 {
		heap.Remove(&r.holds, h.index)
	}
	if h.lost == nil {
		h.lost = errRemoved
		return nil
	}
	return h.lost
}

// errRemoved marks a hold whose Do has finished; never returned.
var errRemoved = errors.New("hold removed")

func (r *renewer) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loop is the renewer's goroutine: it wakes at the earliest hold's wake time, sends the
// renewals that are due and gives up the holds whose cancel point has come.
func (r *renewer) loop() {
	defer r.c.bg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var asked time.Time // when the last timed wait was to end; zero after a kick
	for {
		r.mu.Lock()
		if len(r.holds) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		now := r.c.cfg.clock.Now()
		r.noteLag(now, asked)
		lose, renew := r.takeDue(now)
		var wait time.Duration
		if len(lose) == 0 && len(renew) == 0 && len(r.holds) > 0 {
			wait = r.holds[0].wake.Sub(now)
		}
		r.mu.Unlock()
		for _, h := range lose {
			r.c.lose(h.ctx, h.l, h.cancel, h.lost)
		}
		for _, h := range renew {
			r.extend(h, now)
		}
		asked = time.Time{}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
				asked = now.Add(wait)
			case <-r.kick:
			}
		}
	}
}

// takeDue takes, with r.mu held, the holds whose cancel point has come (lose) and those
// whose renewal is due (renew), and puts every hold it took back in the heap but the lost
// ones, with its next wake time.
func (r *renewer) takeDue(now time.Time) (lose, renew []*hold) {
	var later []*hold
	// Take the holds that are due, and with them those whose renewal is due within an
	// eighth of their interval, or within the loop's recent lag when that is longer:
	// renewing those a little early lets the renewals of many holds share a wake-up and,
	// through the transport, one pipeline per node, and keeps a starved process ahead.
	for len(r.holds) > 0 {
		top := r.holds[0]
		// Early only after a confirmed renewal: a hold that is retrying waits its pause out.
		if top.wake.After(now) && (top.inflight || top.last != nil || top.next.Sub(now) > max(top.interval/8, min(r.lag, top.interval/2))) {
			break
		}
		h := heap.Pop(&r.holds).(*hold)
		cancelAt := h.l.Until().Add(-h.margin)
		if !now.Before(cancelAt) {
			h.lost = &LockLostError{Keys: h.l.set.keys, Margin: h.margin, Late: h.lateKind(), Cause: h.lateCause()}
			lose = append(lose, h)
			continue
		}
		if h.inflight || now.Before(h.next) && h.last != nil {
			// A renewal is out, or a retry's pause has not passed: only the cancel point
			// (or the retry) is due.
			h.wake = earliest(h.next, cancelAt)
			if h.inflight {
				h.wake = cancelAt
			}
			later = append(later, h)
			continue
		}
		h.inflight = true
		renew = append(renew, h)
		h.wake = cancelAt // while the renewal is out, only the cancel point matters
		later = append(later, h)
	}
	for _, h := range later {
		heap.Push(&r.holds, h)
	}
	return lose, renew
}

// noteLag records how late the loop woke after a timed wait meant to end at asked.
func (r *renewer) noteLag(now, asked time.Time) {
	r.lag -= r.lag / 8
	if !asked.IsZero() {
		r.lag = max(r.lag, now.Sub(asked))
	}
}

// lateKind says which of LockLostError's Late cases applies.
func (h *hold) lateKind() LateKind {
	switch {
	case h.last != nil:
		return LateRenewalFailed
	case h.inflight:
		return LateRenewalUnconfirmed
	}
	return LateRenewerLate
}

// lateCause says why no renewal was confirmed by the cancel point.
func (h *hold) lateCause() error {
	switch {
	case h.last != nil:
		return h.last
	case h.inflight:
		return errRenewalUnconfirmed
	}
	return errRenewerLate
}

// extend sends one renewal of h without waiting for it; extended takes the outcome.
func (r *renewer) extend(h *hold, start time.Time) {
	l := h.l
	settle := l.extendOutcome(start, l.ttl)
	octx, end := r.c.startOp(h.ctx, Op{Kind: OpExtend, Keys: l.set.keys, TTL: l.ttl}) // nopEnd without an observer
	l.extendOp(octx, l.ttl, func(err error) {
		err = settle(err)
		end(End{Err: err}) // its Outcome is classified by startOp's end, only with an observer
		r.extended(h, err)
	}).start()
}

func (r *renewer) extended(h *hold, err error) {
	r.mu.Lock()
	h.inflight = false
	if h.lost != nil { // given up or removed meanwhile
		r.mu.Unlock()
		return
	}
	now := r.c.cfg.clock.Now()
	switch {
	case err == nil:
		h.last = nil
		h.next = now.Add(h.interval)
	case r.c.definitelyLost(err):
		h.lost = &LockLostError{Keys: h.l.set.keys, Refused: true, Cause: err}
		if h.index >= 0 {
			heap.Remove(&r.holds, h.index)
		}
		r.mu.Unlock()
		r.c.lose(h.ctx, h.l, h.cancel, h.lost)
		return
	default:
		r.c.cfg.logger.Debug("redlock: renewal failed, retrying", "key", h.l.set.logKey(), "err", err)
		if o := r.c.cfg.observer; o != nil {
			defer o.Event(h.ctx, Event{Kind: EventRenewalFailed, Keys: h.l.set.keys, Token: h.l.token, Err: err})
		}
		h.last = err
		h.next = now.Add(h.retry)
	}
	h.wake = earliest(h.next, h.l.Until().Add(-h.margin))
	if h.index >= 0 {
		heap.Fix(&r.holds, h.index)
	}
	r.mu.Unlock()
	r.poke()
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// holdHeap is a min-heap of holds by wake time (container/heap).
type holdHeap []*hold

func (hh holdHeap) Len() int           { return len(hh) }
func (hh holdHeap) Less(i, j int) bool { return hh[i].wake.Before(hh[j].wake) }
func (hh holdHeap) Swap(i, j int) {
	hh[i], hh[j] = hh[j], hh[i]
	hh[i].index, hh[j].index = i, j
}
func (hh *holdHeap) Push(x any) {
	h := x.(*hold)
	h.index = len(*hh)
	*hh = append(*hh, h)
}
func (hh *holdHeap) Pop() any {
	old := *hh
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.index = -1
	*hh = old[:len(old)-1]
	return h
}

// errRenewerLate is the cause when the renewer woke past the cancel point without having
// tried a renewal since the last success: the process or the renewer itself was paused or
// starved of CPU.
var errRenewerLate = errors.New("the renewer ran too late to try a renewal (process paused or starved)")

// errRenewalUnconfirmed is the cause when a renewal was sent in time but no quorum had
// confirmed it by the cancel point.
var errRenewalUnconfirmed = errors.New("a renewal was sent but no quorum confirmed it in time")
