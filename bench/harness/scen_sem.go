package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// semPermits and semGoroutines shape scenario sem: 64 goroutines on one semaphore of 8
// permits, against the same goroutines on 8 distinct lock keys (8 per key).
const (
	semPermits    = 8
	semGoroutines = 64
)

// semImpl takes a permit of one semaphore; the key a contender passes is ignored.
type semImpl struct {
	*ours
	s *redlock.Semaphore
}

func newSemImpl(addrs []string, name string) (*semImpl, error) {
	o, err := newOurs(addrs)
	if err != nil {
		return nil, err
	}
	return &semImpl{ours: o, s: o.c.Semaphore(name, semPermits)}, nil
}

func (s *semImpl) try(ctx context.Context, _ string) (any, error) {
	return s.s.TryAcquire(ctx, lockTTL)
}

func (s *semImpl) wait(ctx context.Context, _ string) (any, error) {
	return s.s.Acquire(ctx, lockTTL)
}

// runHeld runs p goroutines for d: each waits for its key (keyOf(g); a semaphore ignores
// it), holds it for hold, releases it and starts again, and adds what it saw to st.
func (c *contender) runHeld(ctx context.Context, st *stats, d time.Duration, p int, hold time.Duration, keyOf func(g int) string) {
	start := time.Now()
	deadline := start.Add(d)
	ops0 := st.ops
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range p {
		wg.Go(func() {
			var local stats
			wctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				h, err := c.impl.wait(wctx, keyOf(g))
				t1 := time.Now()
				if err != nil {
					if wctx.Err() == nil {
						local.acqFail++
						local.lastErr = err
					}
					continue
				}
				local.acq.add(t1.Sub(t0))
				time.Sleep(hold)
				err = c.impl.release(ctx, h)
				if err != nil {
					local.relFail++
					local.lastErr = err
					continue
				}
				local.ops++
			}
			mu.Lock()
			defer mu.Unlock()
			st.merge(&local)
		})
	}
	wg.Wait()
	took := time.Since(start)
	st.elapsed += took
	st.slices++
	st.rates = append(st.rates, float64(st.ops-ops0)/took.Seconds())
}

// scenarioSem measures the semaphore against the lock it is built from: 64 goroutines on
// one semaphore of 8 permits against 64 goroutines on 8 distinct keys, each holding 1 ms;
// and one goroutine's uncontended TryAcquire + Release of a permit against that of a lock.
func (r *runner) scenarioSem(ctx context.Context) error {
	addrs := r.addrs[:5]
	sem, err := newSemImpl(addrs, "sem:bench")
	if err != nil {
		return err
	}
	lock, err := newOurs(addrs)
	if err != nil {
		sem.close()
		return err
	}
	semUn, err := newSemImpl(addrs, "sem:bench:uncontended")
	if err != nil {
		sem.close()
		lock.close()
		return err
	}
	cts := []*contender{
		{name: "semaphore, 8 permits", lib: "ours", impl: sem, prefix: "sem:s:"},
		{name: "lock, 8 distinct keys", lib: "ours", impl: lock, prefix: "sem:l:"},
	}
	un := []*contender{
		{name: "semaphore TryAcquire", lib: "ours", impl: semUn, prefix: "sem:us:"},
		{name: "lock TryAcquire", lib: "ours", impl: lock, prefix: "sem:ul:"},
	}
	defer closeAll(cts)
	defer semUn.close()
	for _, c := range append(cts, un...) {
		c.warm(ctx)
	}
	hold := time.Millisecond
	keyOf := func(g int) string { return "sem:keys:" + strconv.Itoa(g%semPermits) }
	r.logf("sem: %d goroutines, %d permits or keys, hold %v, %s per contender, interleaved", semGoroutines, semPermits, hold, r.cfg.FDur)
	sts := interleaveWith(ctx, cts, r.cfg.FDur, time.Second, func(c *contender, st *stats, d time.Duration) {
		c.runHeld(ctx, st, d, semGoroutines, hold, keyOf)
	})
	uns := interleave(ctx, un, r.cfg.Dur/2, r.cfg.Slice, r.cfg.MaxOps)

	w := r.out
	fmt.Fprintf(w, "## sem: the semaphore against the lock it is built from, 5 healthy nodes\n\n")
	fmt.Fprintf(w, "Contended: %d goroutines in one Client each loop `Acquire` / hold %v / `Release`, for %s per contender in slices of 1 s, interleaved: "+
		"on one `Semaphore` of %d permits, and on %d distinct lock keys (%d goroutines per key). Uncontended: one goroutine, `TryAcquire` + `Release` of a permit "+
		"(8 permits) and of a fresh lock key, %s each, interleaved. Default options, fencing on.\n\n",
		semGoroutines, hold, r.cfg.FDur, semPermits, semPermits, semGoroutines/semPermits, r.cfg.Dur/2)
	rows := [][]string{}
	var ns []string
	for i, st := range append(sts, uns...) {
		c := append(cts, un...)[i]
		rows = append(rows, []string{c.name, rate(st.opsPerSec()), ms(st.acq.pct(50)), ms(st.acq.pct(99)), fmt.Sprint(st.ops), fmt.Sprintf("%d/%d", st.acqFail, st.relFail)})
		ns = append(ns, errNote(c.name, st))
	}
	table(w, []string{"contender", "holds/s", "acquire p50", "acquire p99", "cycles", "errors acq/rel"}, rows)
	notes(w, ns)
	ts := []Target{
		atLeast("sem", "64 goroutines, 8 permits: permits/s vs the lock on 8 keys", sts[0].opsPerSec()/sts[1].opsPerSec(), 0.7),
		atLeast("sem", "uncontended TryAcquire + Release: ops/s vs the lock's (1/1.2)", uns[0].opsPerSec()/uns[1].opsPerSec(), 1/1.2),
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
