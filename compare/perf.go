package compare

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// PerfRow is one healthy measurement: Clients clients looping acquire → release on one key,
// with no work in between, for the profile's PerfFor.
type PerfRow struct {
	Clients      int           `json:"clients"`
	Acquisitions int           `json:"acquisitions"`
	PerSec       float64       `json:"per_sec"`
	P50          time.Duration `json:"p50_ns"` // from calling Acquire to holding the lock
	P99          time.Duration `json:"p99_ns"`
	Errors       int           `json:"errors"` // Acquire or Release calls that failed
	// Jain is Jain's fairness index of the acquisitions per client: 1 when every client got
	// as many, 1/Clients when one got them all.
	Jain float64 `json:"jain"`
}

// Perf is a backend's healthy measurements, uncontended and with contenders.
type Perf struct {
	Backend     string  `json:"backend"`
	Uncontended PerfRow `json:"uncontended"`
	Contended   PerfRow `json:"contended"`
}

// RunPerf starts a fresh instance of the backend and measures it healthy: one client alone,
// then p.Contenders clients on one key. Clients connect directly, without fault proxies.
func RunPerf(ctx context.Context, mk func() Backend, p Profile) (*Perf, error) {
	b := mk()
	if err := b.Start(ctx, p.TTL); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("%w: %s: start: %w", errRun, b.Name(), err)
	}
	defer b.Close()
	out := &Perf{Backend: b.Name()}
	var err error
	if out.Uncontended, err = perfRow(ctx, b, 1, p.PerfFor); err != nil {
		return nil, err
	}
	if out.Contended, err = perfRow(ctx, b, p.Contenders, p.PerfFor); err != nil {
		return nil, err
	}
	return out, nil
}

func perfRow(ctx context.Context, b Backend, n int, d time.Duration) (PerfRow, error) {
	direct := func(a string) string { return a }
	var cls []Client
	defer func() {
		for _, c := range cls {
			_ = c.Close()
		}
	}()
	key := fmt.Sprintf("perf%d", n)
	for range n {
		c, err := b.NewClient(ctx, direct)
		if err != nil {
			return PerfRow{}, fmt.Errorf("%w: %s: %w", errRun, b.Name(), err)
		}
		cls = append(cls, c)
		// Warm: connect and load what the client loads on its first call.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := c.Acquire(wctx, key+":warm")
		if err == nil {
			err = c.Release(wctx, l)
		}
		cancel()
		if err != nil {
			return PerfRow{}, fmt.Errorf("%w: %s: warm-up: %w", errRun, b.Name(), err)
		}
	}
	row := PerfRow{Clients: n}
	var mu sync.Mutex
	var lat []time.Duration
	var per []int
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range cls {
		wg.Go(func() {
			var mine []time.Duration
			errs := 0
			for wctx.Err() == nil {
				t0 := time.Now()
				l, err := c.Acquire(wctx, key)
				if err != nil {
					if wctx.Err() == nil {
						errs++
					}
					continue
				}
				mine = append(mine, time.Since(t0))
				rctx, rc := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				if err := c.Release(rctx, l); err != nil {
					errs++
				}
				rc()
			}
			mu.Lock()
			lat = append(lat, mine...)
			per = append(per, len(mine))
			row.Errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	row.Acquisitions = len(lat)
	row.PerSec = float64(len(lat)) / el.Seconds()
	slices.Sort(lat)
	row.P50, row.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	row.Jain = jain(per)
	return row, ctx.Err()
}

// jain is Jain's fairness index (Σx)² / (n·Σx²) of the counts, 0 when all are 0.
func jain(xs []int) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// quantile is the q-quantile of sorted d (nearest rank), 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}
