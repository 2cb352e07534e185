package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// fStats is what one contender measured in the contended scenario.
type fStats struct {
	perG     []int // acquisitions per goroutine, over all slices
	waits    series
	censored int    // waits still open when a slice ended (not in waits)
	open     series // how long each censored wait had lasted when its slice ended
	acqErr   int    // Acquire / LockContext errors other than the slice's end
	relFail  int
	elapsed  time.Duration
	lastErr  error
}

func (s *fStats) total() int {
	n := 0
	for _, x := range s.perG {
		n += x
	}
	return n
}

// contention is the load of one contended run: workers goroutines on keys keys (one key
// named "shared", or a key drawn at random from keys each time), each holding the lock hold
// and pausing think after a release.
type contention struct {
	workers, keys int
	hold, think   time.Duration
}

// runContended runs one slice of a contended scenario (f, f0, hung): the workers loop,
// each wanting the lock, acquiring it with the implementation's retrying acquire, holding it,
// releasing it and pausing. The wait is the time from wanting the lock to having it. When
// the slice ends, the acquires still waiting are cancelled through their context and counted
// as censored.
func (r *runner) runContended(ctx context.Context, c *contender, st *fStats, d time.Duration, ld contention) {
	start := time.Now()
	deadline := start.Add(d)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	keys := []string{c.prefix + "shared"}
	if ld.keys > 1 {
		keys = keyRing(c.prefix+"k", ld.keys)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range ld.workers {
		wg.Go(func() {
			var waits, open []time.Duration
			n, censored, acqErr, relFail := 0, 0, 0, 0
			var lastErr error
			for i := 0; i < r.cfg.MaxOps; i++ {
				want := time.Now()
				if !want.Before(deadline) {
					break
				}
				h, err := c.impl.wait(sctx, keys[rand.IntN(len(keys))])
				if err != nil {
					if sctx.Err() != nil {
						censored++
						open = append(open, time.Since(want))
						break
					}
					acqErr++
					lastErr = err
					continue
				}
				waits = append(waits, time.Since(want))
				n++
				sleep(ctx, ld.hold)
				// The release must go out even when the slice has just ended.
				if err := c.impl.release(ctx, h); err != nil {
					relFail++
					lastErr = err
				}
				sleep(ctx, ld.think)
			}
			mu.Lock()
			defer mu.Unlock()
			st.perG[g] += n
			for _, w := range waits {
				st.waits.add(w)
			}
			for _, w := range open {
				st.open.add(w)
			}
			st.censored += censored
			st.acqErr += acqErr
			st.relFail += relFail
			if lastErr != nil {
				st.lastErr = lastErr
			}
		})
	}
	wg.Wait()
	st.elapsed += time.Since(start)
}

// scenarioF measures contention: several goroutines on one key. id is "f", with the
// configured hold and think, or "f0", the same with neither.
func (r *runner) scenarioF(ctx context.Context, id string) error {
	dur, hold, think := r.cfg.FDur, r.cfg.Hold, r.cfg.Think
	if id == "f0" {
		dur, hold, think = r.cfg.F0Dur, 0, 0
	}
	ld := contention{workers: r.cfg.Waiters, keys: 1, hold: hold, think: think}
	addrs := r.addrs[:5]
	cts, err := libSet(addrs, id, "")
	if err != nil {
		return err
	}
	o150, err := newOurs(addrs, redlock.WithRetryDelay(150*time.Millisecond))
	if err != nil {
		closeAll(cts)
		return err
	}
	cts[0].name = "ours, retry delay 50 ms (default)"
	cts = append(cts[:1], append([]*contender{{name: "ours, retry delay 150 ms", lib: "ours", impl: o150, prefix: id + ":ours150:"}}, cts[1:]...)...)
	defer closeAll(cts)
	for _, c := range cts {
		c.warm(ctx)
	}
	sts := make([]*fStats, len(cts))
	for i := range sts {
		sts[i] = &fStats{perG: make([]int, r.cfg.Waiters)}
	}
	// Slices of at least a second: a slice's end cuts the waits in progress short.
	slice := max(r.cfg.Slice, time.Second)
	r.logf("%s: %d contenders × %s, %d goroutines on one key, interleaved", id, len(cts), dur, r.cfg.Waiters)
	r.interleaveContended(ctx, cts, sts, dur, slice, ld)

	w := r.out
	if id == "f0" {
		fmt.Fprintf(w, "## f0: contended with hold 0 and think 0, %d goroutines on one key, 5 healthy nodes\n\n", r.cfg.Waiters)
		fmt.Fprintf(w, "Scenario f with no hold and no pause: a winner releases at once and wants the lock again at once, %s per contender. ", dur)
	} else {
		fmt.Fprintf(w, "## f: contended, %d goroutines on one key, 5 healthy nodes\n\n", r.cfg.Waiters)
	}
	fmt.Fprintf(w, "Each goroutine wants the lock, acquires it (ours: `Acquire`; redsync: `LockContext`, started again if its 32 tries run out), "+
		"holds it %s, releases it, pauses %s and wants it again. Wait = from wanting the lock to having it. "+
		"Retry settings: ours waits a pause drawn uniformly from [d/2, 3d/2) between attempts (d = 50 ms by default, so 25–75 ms; "+
		"the 150 ms row matches redsync's mean); redsync draws from [50, 250) ms. Slices of %s; waits still open when a slice ends are censored (not in the percentiles).\n\n",
		hold, think, slice)
	rs := sts[2]
	rows := make([][]string, len(cts))
	var ns []string
	for i, c := range cts {
		st := sts[i]
		acqRate := float64(st.total()) / st.elapsed.Seconds()
		counts := make([]string, len(st.perG))
		for g, x := range st.perG {
			counts[g] = fmt.Sprint(x)
		}
		rows[i] = []string{c.name, rate(acqRate), ratio(acqRate, float64(rs.total())/rs.elapsed.Seconds()),
			ms(st.waits.pct(50)), ms(st.waits.pct(99)), ms(st.waits.max()),
			fmtRatio(durRatio(st.waits.pct(99), rs.waits.pct(99))),
			fmt.Sprintf("%.3f", jain(st.perG)), strings.Join(counts, " "),
			fmt.Sprint(st.censored), fmt.Sprintf("%d/%d", st.acqErr, st.relFail)}
		if st.lastErr != nil {
			ns = append(ns, fmt.Sprintf("%s, last error: `%v`", c.name, st.lastErr))
		}
	}
	table(w, []string{"contender", "acquisitions/s", "vs redsync default", "wait p50", "wait p99", "wait max",
		"p99 vs redsync default", "Jain fairness", "acquisitions per goroutine", "censored", "errors acq/rel"}, rows)
	notes(w, ns)
	var ts []Target
	for i := range 2 {
		st := sts[i]
		label := "ours 50 ms"
		if i == 1 {
			label = "ours 150 ms"
		}
		ts = append(ts,
			atLeast(id, label+": acquisitions/s vs redsync default",
				(float64(st.total())/st.elapsed.Seconds())/(float64(rs.total())/rs.elapsed.Seconds()), 1),
			atMost(id, label+": wait p99 vs redsync default", durRatio(st.waits.pct(99), rs.waits.pct(99)), 0.5),
			Target{Scenario: id, Name: label + ": Jain fairness", Want: "≥ 0.95", Got: fmt.Sprintf("%.3f", jain(st.perG)), Pass: jain(st.perG) >= 0.95},
		)
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}

// interleaveContended runs every contender's contended slices in rotating order until each
// has run for dur (or ctx ends), adding to its stats.
func (r *runner) interleaveContended(ctx context.Context, cts []*contender, sts []*fStats, dur, slice time.Duration, ld contention) {
	for round := 0; ctx.Err() == nil; round++ {
		ran := false
		for j := range cts {
			k := (j + round) % len(cts)
			left := dur - sts[k].elapsed
			if left <= 0 {
				continue
			}
			ran = true
			r.runContended(ctx, cts[k], sts[k], min(slice, left), ld)
		}
		if !ran {
			break
		}
	}
}
