package harness

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// contender is one implementation measured in a scenario, with its own keys.
type contender struct {
	name   string // row label
	lib    string // "ours", "redsync default", ...
	impl   impl
	prefix string
	seq    int
}

func (c *contender) key() string {
	c.seq++
	return c.prefix + strconv.Itoa(c.seq)
}

// runSlice runs uncontended TryAcquire+Release cycles on fresh keys, one at a time, until
// d has passed, maxOps cycles were made or ctx ended, and adds what it saw to st. A cycle
// that has started always finishes, so a slice can overrun d by one cycle.
func (c *contender) runSlice(ctx context.Context, st *stats, d time.Duration, maxOps int) {
	g0 := goroutines()
	ops0 := st.ops
	start := time.Now()
	deadline := start.Add(d)
	for i := 0; i < maxOps && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if !t0.Before(deadline) {
			break
		}
		h, err := c.impl.try(ctx, c.key())
		t1 := time.Now()
		if err != nil {
			st.acqFail++
			st.lastErr = err
			continue
		}
		st.acq.add(t1.Sub(t0))
		err = c.impl.release(ctx, h)
		st.rel.add(time.Since(t1))
		if err != nil {
			st.relFail++
			st.lastErr = err
			continue
		}
		st.ops++
	}
	took := time.Since(start)
	st.elapsed += took
	st.slices++
	st.rates = append(st.rates, float64(st.ops-ops0)/took.Seconds())
	st.grMax = max(st.grMax, goroutines()-g0)
}

// warm makes a few cycles so that connections are dialled and scripts loaded before the
// measurement starts.
func (c *contender) warm(ctx context.Context) {
	var st stats
	c.runSlice(ctx, &st, 300*time.Millisecond, 50)
}

// interleave measures the contenders in turns: round after round, each contender whose
// budget is not used up runs one slice (at most slice long), in an order that rotates every
// round, so that the machine's noise falls on all of them alike. A contender stops once
// its slices add up to budget; a slow contender whose single cycle outlasts a slice simply
// gets fewer slices. It returns one stats per contender, in the order of cts.
func interleave(ctx context.Context, cts []*contender, budget, slice time.Duration, maxOps int) []*stats {
	return interleaveWith(ctx, cts, budget, slice, func(c *contender, st *stats, d time.Duration) {
		c.runSlice(ctx, st, d, maxOps)
	})
}

// interleaveWith is interleave with another slice: run measures one slice of c, at most d
// long, into st (adding its wall time to st.elapsed).
func interleaveWith(ctx context.Context, cts []*contender, budget, slice time.Duration, run func(c *contender, st *stats, d time.Duration)) []*stats {
	sts := make([]*stats, len(cts))
	for i := range sts {
		sts[i] = &stats{}
	}
	for round := 0; ctx.Err() == nil; round++ {
		ran := false
		for j := range cts {
			k := (j + round) % len(cts)
			left := budget - sts[k].elapsed
			if left <= 0 {
				continue
			}
			ran = true
			run(cts[k], sts[k], min(slice, left))
		}
		if !ran {
			break
		}
	}
	return sts
}

// runParallel runs one slice of p goroutines, each making TryAcquire+Release cycles (the
// implementation's try) on keys of its own, a fresh key every cycle, until d has passed or
// ctx ended, and adds what they saw to st. A cycle that has started always finishes.
func (c *contender) runParallel(ctx context.Context, st *stats, d time.Duration, p int) {
	c.seq++
	slice := c.prefix + strconv.Itoa(c.seq) + ":"
	start := time.Now()
	deadline := start.Add(d)
	var mu sync.Mutex
	var wg sync.WaitGroup
	ops0 := st.ops
	for g := range p {
		wg.Go(func() {
			pre := slice + strconv.Itoa(g) + ":"
			var local stats
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				h, err := c.impl.try(ctx, pre+strconv.Itoa(i))
				t1 := time.Now()
				if err != nil {
					local.acqFail++
					local.lastErr = err
					continue
				}
				local.acq.add(t1.Sub(t0))
				err = c.impl.release(ctx, h)
				local.rel.add(time.Since(t1))
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

// quiesce waits until the goroutine count (without the fault proxies') has stopped moving
// (two equal readings 100 ms apart) or limit has passed, and returns the last reading.
func quiesce(ctx context.Context, limit time.Duration) int {
	end := time.Now().Add(limit)
	prev := goroutines()
	for time.Now().Before(end) && ctx.Err() == nil {
		sleep(ctx, 100*time.Millisecond)
		n := goroutines()
		if n == prev {
			return n
		}
		prev = n
	}
	return prev
}

// sleep pauses for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
