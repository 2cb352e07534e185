package chaos

// The waits and checks of the fault scripts (scripts.go), as methods of the Run: a hold's
// renewals, its end, its key on a node, a takeover, and what a paused holder's writes became.

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// refusedWhole checks the last write of the hold's section: a transfer refused whole, its
// leg of the taken key stale and every other leg vetoed.
func (r *Run) refusedWhole(hold int, taken string) error {
	var err error
	var legs []int
	r.rec.View(func(h *History) {
		set := setOf(h.Holds[hold])
		last := -1
		for _, w := range h.Writes {
			if slices.Contains(set, w.Hold) && w.Applied >= 0 {
				last = w.ID
			}
		}
		if last < 0 || len(h.Writes[last].Legs) == 0 {
			err = fmt.Errorf("chaos: hold %d made no transfer", hold)
			return
		}
		for _, id := range h.Writes[last].Legs {
			w := h.Writes[id]
			switch {
			case w.Accepted:
				err = fmt.Errorf("chaos: the paused holder's last transfer was accepted on %s (write %d)", w.Key, id)
			case w.Key == taken && !w.Stale():
				err = fmt.Errorf("chaos: the paused holder's leg of the taken account %s was not stale (write %d)", w.Key, id)
			case w.Key != taken && !w.Vetoed:
				err = fmt.Errorf("chaos: the paused holder's leg of %s, which nobody took, was not refused with its transfer (write %d)", w.Key, id)
			}
			if err != nil {
				return
			}
		}
		legs = slices.Clone(h.Writes[last].Legs)
	})
	if err == nil {
		r.rec.Note("the paused holder's transfer (writes %v) was refused whole: its %s leg stale, the other vetoed", legs, taken)
	}
	return err
}

// awaitHeldOn waits until node n holds the hold's key for it (read directly, as the sampler
// does), and fails if the hold ends first or it takes more than two TTLs.
func (r *Run) awaitHeldOn(ctx context.Context, n, hold int, id string) error {
	key := r.key(hold)
	limit := time.NewTimer(2 * r.TTL())
	defer limit.Stop()
	tick := time.NewTicker(r.Profile.SampleEvery)
	defer tick.Stop()
	for {
		if st, err := r.status.Status(ctx, key); err == nil && st.Nodes[n].Holder == id {
			r.rec.Note("node %d holds the long hold's key again", n)
			return nil
		}
		if r.holdEnded(hold) {
			return fmt.Errorf("chaos: hold %d ended before node %d held its key", hold, n)
		}
		select {
		case <-tick.C:
		case <-limit.C:
			return fmt.Errorf("chaos: node %d did not hold hold %d's key within %v", n, hold, 2*r.TTL())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pausedPastValidity checks that the hold's critical section ended after its validity
// deadline: the pause really outlasted the lock, so a run without overlaps means something.
func (r *Run) pausedPastValidity(hold int) error {
	var err error
	r.rec.View(func(h *History) {
		if hd := h.Holds[hold]; hd.End <= hd.Until {
			err = fmt.Errorf("chaos: hold %d ended at %v, before its validity deadline %v: the pause did not outlast the lock", hold, hd.End, hd.Until)
		}
	})
	return err
}

// awaitTakeover waits until client c holds the hold's key after the hold, and notes when
// the hold's validity and section ended and when c asked for and got the lock.
func (r *Run) awaitTakeover(ctx context.Context, hold, c int, limit time.Duration) error {
	var a, b Hold
	err := r.rec.Await(ctx, limit, fmt.Sprintf("client %d to hold the lock after hold %d", c, hold), func(h *History) bool {
		a = h.Holds[hold]
		for _, hd := range h.Holds {
			if hd.Client == c && hd.Key == a.Key && hd.Token > a.Token {
				b = hd
				return true
			}
		}
		return false
	})
	if err == nil {
		r.rec.Note("hold %d: valid until %v, section ended %v; client %d asked at %v, granted at %v",
			hold, a.Until.Round(time.Millisecond), a.End.Round(time.Millisecond), c,
			b.Asked.Round(time.Millisecond), b.Granted.Round(time.Millisecond))
	}
	return err
}

// holdEnded reports whether the hold's critical section has ended.
func (r *Run) holdEnded(hold int) (ended bool) {
	r.rec.View(func(h *History) { ended = !h.Holds[hold].Open })
	return ended
}

// awaitRenewals waits until the hold's holder has seen its validity deadline move n times
// (each move is a confirmed renewal, seen at the holder's next write), or the hold ended.
func (r *Run) awaitRenewals(ctx context.Context, hold, n int) error {
	for ; n > 0; n-- {
		var last time.Duration
		r.rec.View(func(h *History) { last = h.Holds[hold].Until })
		err := r.rec.Await(ctx, 2*r.TTL()+5*time.Second, fmt.Sprintf("a renewal of hold %d", hold), func(h *History) bool {
			return !h.Holds[hold].Open || h.Holds[hold].Until > last
		})
		if err != nil || r.holdEnded(hold) {
			return err
		}
	}
	return nil
}
