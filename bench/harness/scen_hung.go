package harness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The load of scenario hung and its threshold for a long wait.
const (
	hungWorkers = 32
	hungKeys    = 200
	hungHold    = time.Millisecond
	hungLong    = time.Second
)

// longWaits returns the longest wait of st, the censored ones included (they lasted at least
// that long), and how many lasted more than hungLong.
func longWaits(st *fStats) (longest time.Duration, over int) {
	for _, s := range []*series{&st.waits, &st.open} {
		for _, d := range s.d {
			longest = max(longest, d)
			if d > hungLong {
				over++
			}
		}
	}
	return longest, over
}

// scenarioHung measures a steady load of retrying acquires on a few keys, first with 5
// healthy nodes, then with node 5 stopped by SIGSTOP, ours and redsync interleaved in each
// phase on the same clients.
func (r *runner) scenarioHung(ctx context.Context) (err error) {
	addrs := r.addrs[:5]
	node := r.nodes[4]
	o, err := newOurs(addrs)
	if err != nil {
		return err
	}
	cts := []*contender{
		{name: "ours", lib: "ours", impl: o, prefix: "hung:ours:"},
		{name: "redsync default", lib: "redsync default", impl: newRsync(addrs, false), prefix: "hung:rs:"},
	}
	defer closeAll(cts)
	for _, c := range cts {
		c.warm(ctx)
	}
	ld := contention{workers: hungWorkers, keys: hungKeys, hold: hungHold}
	slice := max(r.cfg.Slice, time.Second)
	phase := func(name string) []*fStats {
		sts := make([]*fStats, len(cts))
		for i := range sts {
			sts[i] = &fStats{perG: make([]int, hungWorkers)}
		}
		r.logf("hung: %s, %d contenders × %s, interleaved", name, len(cts), r.cfg.HungDur)
		r.interleaveContended(ctx, cts, sts, r.cfg.HungDur, slice, ld)
		return sts
	}
	healthy := phase("5 healthy nodes")
	quiesce(ctx, 5*time.Second)
	if err := node.Pause(); err != nil {
		return err
	}
	defer func() {
		if node.Paused() {
			err = errors.Join(err, node.Resume())
		}
	}()
	hung := phase("node 5 SIGSTOPped")
	if err := node.Resume(); err != nil {
		return err
	}
	quiesce(ctx, 5*time.Second)

	w := r.out
	fmt.Fprintf(w, "## hung: %d workers on %d keys, 5 healthy nodes, then node 5 stopped with SIGSTOP\n\n", hungWorkers, hungKeys)
	fmt.Fprintf(w, "Each worker draws one of %d keys at random, acquires it with retries (ours: `Acquire`, default options; redsync: `LockContext`, started again if its 32 tries run out), "+
		"holds it %s and releases it, then draws again. %s per contender and phase, slices of %s interleaved; first with the 5 nodes healthy, then with node 5 stopped by SIGSTOP "+
		"(connections stay open, nothing is answered), resumed afterwards. The same clients in both phases. Wait = from wanting the lock to having it; "+
		"waits cut off by the end of a slice count in the longest wait and in the waits > %s with how long they had lasted.\n\n",
		hungKeys, hungHold, r.cfg.HungDur, slice, hungLong)
	var rows [][]string
	var ns []string
	for i, c := range cts {
		for p, st := range []*fStats{healthy[i], hung[i]} {
			name := "healthy"
			if p == 1 {
				name = "node 5 SIGSTOPped"
			}
			acq := float64(st.total()) / st.elapsed.Seconds()
			longest, over := longWaits(st)
			rows = append(rows, []string{c.name, name, rate(acq), ratio(acq, float64(healthy[i].total())/healthy[i].elapsed.Seconds()),
				ms(st.waits.pct(50)), ms(st.waits.pct(99)), ms(longest), fmt.Sprint(over), fmt.Sprint(st.censored), fmt.Sprintf("%d/%d", st.acqErr, st.relFail)})
			if st.lastErr != nil {
				ns = append(ns, fmt.Sprintf("%s (%s), last error: `%v`", c.name, name, st.lastErr))
			}
		}
	}
	table(w, []string{"contender", "phase", "acquisitions/s", "vs own healthy", "wait p50", "wait p99", "longest wait", "waits > 1 s", "censored", "errors acq/rel"}, rows)
	notes(w, ns)
	oh, ou := healthy[0], hung[0]
	lh, overH := longWaits(oh)
	lu, overU := longWaits(ou)
	ts := []Target{
		{Scenario: "hung", Name: "acquire waits longer than 1 s (both phases)", Want: "0",
			Got: fmt.Sprintf("%d (longest %s healthy, %s hung)", overH+overU, ms(lh), ms(lu)), Pass: overH+overU == 0},
		atLeast("hung", "acquisitions/s with node 5 hung vs healthy",
			(float64(ou.total())/ou.elapsed.Seconds())/(float64(oh.total())/oh.elapsed.Seconds()), 0.7),
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
