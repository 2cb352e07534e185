package chaos

// The scenarios' fault scripts that are too long for the table (scenarios.go), and the
// phases that wrap every script. The waits and checks they share are in script_helpers.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// phased makes a script of body that plays the phases of an experiment: Warmup of plain
// workload, body (the fault), then Cooldown of plain workload. The cool-down follows
// whatever body returned, and its error is joined with body's; a failed warm-up ends the
// script.
func phased(body func(ctx context.Context, r *Run) error) func(ctx context.Context, r *Run) error {
	return func(ctx context.Context, r *Run) error {
		if err := r.Soak(ctx, r.Profile.Warmup); err != nil {
			return err
		}
		err := body(ctx, r)
		return errors.Join(err, r.Soak(ctx, r.Profile.Cooldown))
	}
}

// scripted is phased for a choreographed fault: once the warm-up is over, every client is
// parked (ParkAll) and body runs, letting clients go itself (Begin, Unpark, Park). When body
// returns (after its own deferred calls, such as a Heal), every client goes on (UnparkAll)
// and the cool-down follows.
func scripted(body func(ctx context.Context, r *Run) error) func(ctx context.Context, r *Run) error {
	return phased(func(ctx context.Context, r *Run) error {
		defer r.UnparkAll() // also when ParkAll fails: no client stays parked for the cool-down
		if err := r.ParkAll(ctx); err != nil {
			return err
		}
		return body(ctx, r)
	})
}

// killMinority kills N − Q nodes, waits a window, and restarts them.
func killMinority(ctx context.Context, r *Run) error {
	perm := r.Rand.Perm(r.Nodes())
	var errs []error
	var down []int
	for _, n := range perm[:r.Nodes()-r.Quorum()] {
		f, err := r.KillNode(n)
		errs = append(errs, err)
		down = append(down, f)
	}
	errs = append(errs, r.Soak(ctx, r.Profile.Window))
	for i, n := range perm[:len(down)] {
		if down[i] >= 0 {
			errs = append(errs, r.RestartNode(ctx, n, down[i]))
		}
	}
	return errors.Join(errs...)
}

// bareQuorumRestart is the script shared by the three restart scenarios: the holder reaches
// only a bare quorum, and one node of it crashes and restarts at once. It runs under
// scripted: every client is parked when it starts.
func bareQuorumRestart(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	challenger := r.Other(actor)
	perm := r.Rand.Perm(r.Nodes())
	side := perm[:r.Quorum()]
	victim := side[r.Rand.IntN(len(side))]
	pf := r.Partition(map[int][]int{actor: side}, fmt.Sprintf("client %d reaches only nodes %v", actor, sorted(side)))
	defer r.Heal(pf) // when the script returns, before the clients go on
	// 30 writes, TTL/20 apart: a section of 1.5 TTL, so the holder must renew.
	hold, err := r.Begin(ctx, actor, Plan{Role: "holder", Writes: 30, Gap: r.TTL() / 20})
	if err != nil {
		return err
	}
	r.NoteCounters(ctx, "fence counters before the restart")
	if err := r.CrashRestart(ctx, victim); err != nil {
		return err
	}
	r.NoteCounters(ctx, fmt.Sprintf("fence counters after node %d restarted", victim))
	r.Unpark(challenger)
	err = r.AwaitHoldEnd(ctx, hold, 4*r.TTL()+5*time.Second)
	r.NoteCounters(ctx, "fence counters when the holder stopped")
	return err
}

// pausedHolder is the script of client-pause, leader-pause and rw-writer-pause: the holder stops for twice
// the TTL after its validity check and before its write, isolated; another client takes the
// lock and writes; the holder's write then goes out with its old token. It runs under
// scripted.
func pausedHolder(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	challenger := r.Other(actor)
	var pauseErr error // written by the paused writer, read after its hold ended (ordered by the recorder)
	hold, err := r.Begin(ctx, actor, Plan{Role: "paused", Writes: 2, Gap: r.TTL() / 20,
		Before: func(_ context.Context, hold, seq int) {
			if seq != 1 {
				return
			}
			f := r.Isolate(actor, fmt.Sprintf("client %d stops for at least %v", actor, 2*r.TTL()))
			r.Unpark(challenger)
			Pause(ctx, 2*r.TTL())                                             // the pause itself
			pauseErr = r.AwaitNewerWrite(ctx, hold, 10*r.TTL()+5*time.Second) // and until B has written
			r.Heal(f)
		}})
	if err != nil {
		return err
	}
	err = r.AwaitHoldEnd(ctx, hold, 15*r.TTL()+10*time.Second)
	return errors.Join(err, pauseErr)
}

// semaphoreAmnesia is the script of semaphore-amnesia: one client holds a permit of a
// 2-permit semaphore everywhere, another holds the other permit on a bare quorum, a node of
// that quorum restarts (empty, without persistence), and a third client tries for a permit.
// It runs under scripted.
func semaphoreAmnesia(ctx context.Context, r *Run) error {
	perm := r.Rand.Perm(r.Clients())
	other, actor, challenger := perm[0], perm[1], perm[2]
	// The other permit's holder holds for the whole script: 60 writes, TTL/20 apart.
	if _, err := r.Begin(ctx, other, Plan{Role: "other permit", Writes: 60, Gap: r.TTL() / 20}); err != nil {
		return err
	}
	r.Park(other) // after this section
	nodes := r.Rand.Perm(r.Nodes())
	side := nodes[:r.Quorum()]
	victim := side[r.Rand.IntN(len(side))]
	pf := r.Partition(map[int][]int{actor: side}, fmt.Sprintf("client %d reaches only nodes %v", actor, sorted(side)))
	defer r.Heal(pf)
	hold, err := r.Begin(ctx, actor, Plan{Role: "holder", Writes: 30, Gap: r.TTL() / 20})
	if err != nil {
		return err
	}
	if err := r.CrashRestart(ctx, victim); err != nil {
		return err
	}
	r.Unpark(challenger)
	return r.AwaitHoldEnd(ctx, hold, 4*r.TTL()+5*time.Second)
}

// transferPause is the script of multi-key-transfer-pause: the holder of two accounts
// pauses past its validity, and another client takes one of them (with a third account)
// and writes. It runs under scripted.
func transferPause(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	taker := r.Other(actor)
	perm := r.Rand.Perm(len(r.keys))
	mine := []string{r.keys[perm[0]], r.keys[perm[1]]}
	taken := mine[r.Rand.IntN(len(mine))]
	theirs := []string{r.keys[perm[2]], taken}
	r.rec.Note("client %d will hold %v, client %d will take %s with %s", actor, mine, taker, taken, theirs[0])
	var pauseErr error // written by the paused writer, read after its hold ended (ordered by the recorder)
	hold, err := r.Begin(ctx, actor, Plan{Role: "paused", Keys: mine, Writes: 2, Gap: r.TTL() / 20,
		Before: func(_ context.Context, hold, seq int) {
			if seq != 1 {
				return
			}
			stop := time.Now()
			f := r.Isolate(actor, fmt.Sprintf("client %d stops for at least %v", actor, 2*r.TTL()))
			// The taker gets the lock once A's keys have expired, and parks after that
			// one section, so that nobody else touches A's accounts meanwhile.
			_, err := r.Begin(ctx, taker, Plan{Role: "taker", Keys: theirs, Writes: 3, Gap: r.TTL() / 40})
			r.Park(taker)
			Pause(ctx, 2*r.TTL()-time.Since(stop)) // the rest of the pause
			// and until the taker has written the account it took
			pauseErr = errors.Join(err, r.AwaitNewerWrite(ctx, r.HoldOf(hold, taken), 10*r.TTL()+5*time.Second))
			r.Heal(f)
		}})
	if err != nil {
		return err
	}
	err = r.AwaitHoldEnd(ctx, hold, 15*r.TTL()+10*time.Second)
	if err == nil {
		err = r.refusedWhole(hold, taken)
	}
	return errors.Join(err, pauseErr)
}

// sentinelFailover is the script of sentinel-failover: a long hold of the first key while
// the other clients work on both keys, and the Sentinel node fails over to its replica in
// the middle of it. It runs under scripted.
func sentinelFailover(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	contender := r.Other(actor)
	// The hold lasts until the failover is over, the promoted replica holds its key and it
	// has been renewed since; 20 TTLs at most. (If the script fails first, the end of
	// the run ends it.)
	stop := make(chan struct{})
	hold, err := r.Begin(ctx, actor, Plan{Role: "long hold", Keys: r.keys[:1], Writes: 200, Gap: r.TTL() / 10, Stop: stop})
	if err != nil {
		return err
	}
	// One client tries for the held key all along; the others work on the second key.
	r.Let(contender, Plan{Role: "contender", Keys: r.keys[:1], Writes: 3, Gap: r.TTL() / 40})
	r.UnparkAll()
	if err := r.awaitRenewals(ctx, hold, 1); err != nil {
		return err
	}
	if r.holdEnded(hold) {
		return fmt.Errorf("chaos: the long hold (hold %d) ended before the failover", hold)
	}
	r.NoteCounters(ctx, "fence counters before the failover")
	if err := r.FailoverNode(ctx, r.groupNode); err != nil {
		return err
	}
	// The hold goes on on the promoted replica: its key is there (replicated, or put back
	// by healing after an extend that found it missing) while the hold lasts.
	var id string
	r.rec.View(func(h *History) { id = h.Holds[hold].LockID })
	if err := r.awaitHeldOn(ctx, r.groupNode, hold, id); err != nil {
		return err
	}
	// and it is renewed again (two renewals seen: the first may be the one that healed).
	if err := r.awaitRenewals(ctx, hold, 2); err != nil {
		return err
	}
	if r.holdEnded(hold) {
		return fmt.Errorf("chaos: the long hold (hold %d) ended before the script stopped it", hold)
	}
	r.rec.Note("the long hold stops")
	close(stop) // the holder's section returns instead of its next write, and releases
	if err := r.AwaitHoldEnd(ctx, hold, 5*r.TTL()+5*time.Second); err != nil {
		return err
	}
	r.NoteCounters(ctx, "fence counters when the long hold ended")
	// The contender, refused all along, gets the key once the hold is over.
	return r.awaitTakeover(ctx, hold, contender, 5*r.TTL()+5*time.Second)
}

// rollingRestart: one client holds the lock for 6 TTLs while the other clients keep trying
// and the nodes restart empty one at a time, each once the previous one is back and the
// hold has been renewed twice since (or has ended). It runs under scripted.
func rollingRestart(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	hold, err := r.Begin(ctx, actor, Plan{Role: "long hold", Writes: 60, Gap: r.TTL() / 10})
	if err != nil {
		return err
	}
	r.UnparkAll() // the others contend all along
	for _, n := range r.Rand.Perm(r.Nodes()) {
		// Two renewals before every restart, the first included: A's acquire may have won on a
		// bare quorum (another holder's release had not reached the other nodes yet), and its
		// renewals heal its key onto the nodes where it is missing. Restarting one of a bare
		// quorum at once is the amnesia of design.md §5.6, which no client can survive
		// without a delayed restart (a CI run of the lab did that, 19 ms after A's acquire).
		if err := r.awaitRenewals(ctx, hold, 2); err != nil {
			return err
		}
		if r.holdEnded(hold) {
			break
		}
		if err := r.CrashRestart(ctx, n); err != nil {
			return err
		}
		r.NoteCounters(ctx, fmt.Sprintf("fence counters after node %d restarted", n))
	}
	err = r.AwaitHoldEnd(ctx, hold, 10*r.TTL()+5*time.Second)
	r.NoteCounters(ctx, "fence counters when the long hold ended")
	return err
}

// sorted returns a sorted copy of s.
func sorted(s []int) []int {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
