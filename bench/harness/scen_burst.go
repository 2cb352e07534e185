package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
)

const (
	burstTTL     = 10 * time.Second // the lock TTL of scenario burst
	burstTimeout = 30 * time.Second // the context of every Acquire in a burst
)

// burstResult is one burst of one library.
type burstResult struct {
	b        int
	acquired int
	errs     int
	last     time.Duration // from the barrier to the last successful acquire
	returned time.Duration // from the barrier to the last Acquire returning, with or without a lock
	lat      series        // from the barrier to each successful acquire
	relTook  time.Duration // releasing all of them, concurrently
	relFail  int
	lastErr  error
}

// runBurst starts b goroutines that each acquire a key of their own with acquire, all
// released at once by a barrier, waits for all of them, then releases every lock taken.
func runBurst(ctx context.Context, b int, prefix string, acquire func(context.Context, string) (any, error), release func(context.Context, any) error) *burstResult {
	res := &burstResult{b: b}
	actx, cancel := context.WithTimeout(ctx, burstTimeout)
	defer cancel()
	barrier := make(chan struct{})
	hs := make([]any, b)
	took := make([]time.Duration, b)
	errs := make([]error, b)
	var start time.Time
	var wg sync.WaitGroup
	for i := range b {
		key := prefix + strconv.Itoa(i)
		wg.Go(func() {
			<-barrier
			h, err := acquire(actx, key)
			took[i] = time.Since(start)
			if err != nil {
				errs[i] = err
				return
			}
			hs[i] = h // only a real lock: a failed acquire's nil *Lock is a non-nil any
		})
	}
	start = time.Now()
	close(barrier)
	wg.Wait()
	res.returned = time.Since(start)
	res.last = -1 // "–" until something was acquired
	for i := range b {
		if errs[i] != nil {
			res.errs++
			res.lastErr = errs[i]
			continue
		}
		res.acquired++
		res.lat.add(took[i])
		res.last = max(res.last, took[i])
	}
	t0 := time.Now()
	var mu sync.Mutex
	for i := range b {
		if hs[i] == nil {
			continue
		}
		wg.Go(func() {
			if err := release(ctx, hs[i]); err != nil {
				mu.Lock()
				res.relFail++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.relTook = time.Since(t0)
	return res
}

// scenarioBurst measures B acquires started at the same instant on one shared client per
// library, one burst per library in turn.
func (r *runner) scenarioBurst(ctx context.Context) error {
	addrs := r.addrs[:5]
	o, err := newOurs(addrs)
	if err != nil {
		return err
	}
	defer o.close()
	rs := newRsync(addrs, false)
	defer rs.close()
	rs.opts = append(rs.opts, redsync.WithExpiry(burstTTL))
	type lib struct {
		name    string
		acquire func(context.Context, string) (any, error)
		release func(context.Context, any) error
	}
	libs := []lib{
		{"ours", func(ctx context.Context, key string) (any, error) { return o.c.Acquire(ctx, key, burstTTL) }, o.release},
		{"redsync default", rs.wait, rs.release},
	}
	for i, l := range libs {
		warm := runBurst(ctx, 20, fmt.Sprintf("burst:warm%d:", i), l.acquire, l.release)
		if warm.errs > 0 {
			return fmt.Errorf("%s: warm-up burst: %w", l.name, warm.lastErr)
		}
	}
	res := make([][]*burstResult, len(libs))
	for k, b := range r.cfg.BurstSizes {
		for j := range libs {
			i := (j + k) % len(libs) // who goes first alternates
			quiesce(ctx, 5*time.Second)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.logf("burst: %s, %d concurrent Acquire", libs[i].name, b)
			res[i] = append(res[i], runBurst(ctx, b, fmt.Sprintf("burst:%d:%d:", i, b), libs[i].acquire, libs[i].release))
		}
	}

	w := r.out
	fmt.Fprintf(w, "## burst: B concurrent Acquire on distinct keys, started at once, 5 healthy nodes\n\n")
	fmt.Fprintf(w, "B goroutines wait on a barrier, then each acquires a key of its own through one shared client per library "+
		"(ours: `redlock.New` with default options, `Acquire(ctx, key, 10 s)`; redsync: one `redsync.New`, `NewMutex(key, WithExpiry(10 s)).LockContext(ctx)`, started again if its 32 tries run out), "+
		"every Acquire with a %s context. Acquired and errors count the B calls; the times run from the barrier to each successful acquire, and to the last call returning, with or without a lock; the time-to-last target needs all B acquired. "+
		"Once all have returned, every lock taken is released concurrently (not timed into the burst). One burst per library in turn, the first one alternating with B; "+
		"the goroutine count is let settle between bursts.\n\n", burstTimeout)
	var rows [][]string
	var ns []string
	for k, b := range r.cfg.BurstSizes {
		for i, l := range libs {
			if k >= len(res[i]) {
				continue
			}
			x := res[i][k]
			rows = append(rows, []string{fmt.Sprint(b), l.name, fmt.Sprint(x.acquired), fmt.Sprint(x.errs),
				ms(x.lat.pct(50)), ms(x.lat.pct(99)), ms(x.last), ms(x.returned), rate(float64(x.acquired) / x.returned.Seconds()),
				ms(x.relTook), fmt.Sprint(x.relFail)})
			if x.lastErr != nil {
				ns = append(ns, fmt.Sprintf("B=%d %s, last error: `%v`", b, l.name, x.lastErr))
			}
		}
	}
	table(w, []string{"B", "library", "acquired", "errors", "time to acquire p50", "p99", "time to last acquired", "all returned after", "acquired / all returned", "release all took", "release errors"}, rows)
	notes(w, ns)
	if len(res[0]) == 0 || len(res[1]) == 0 {
		return nil
	}
	// The target is on the largest burst.
	b := slices.Max(r.cfg.BurstSizes)
	i := slices.Index(r.cfg.BurstSizes, b)
	ours, other := res[0][i], res[1][i]
	ts := []Target{
		{Scenario: "burst", Name: fmt.Sprintf("B=%d: all acquired", b), Want: fmt.Sprint(b), Got: fmt.Sprint(ours.acquired), Pass: ours.acquired == b},
		{Scenario: "burst", Name: fmt.Sprintf("B=%d: errors", b), Want: "0", Got: fmt.Sprint(ours.errs), Pass: ours.errs == 0},
		atMost("burst", fmt.Sprintf("B=%d: time to last acquired vs redsync default", b), durRatio(ours.last, other.last), 1),
	}
	ts[2].Got += fmt.Sprintf(" (%s vs %s)", ms(ours.last), ms(other.last))
	if ours.acquired < b {
		ts[2].Pass = false
		ts[2].Got += fmt.Sprintf("; ours acquired only %d, the rest failed after %s", ours.acquired, ms(ours.returned))
	}
	if other.acquired < b {
		ts[2].Got += fmt.Sprintf("; redsync acquired only %d", other.acquired)
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
