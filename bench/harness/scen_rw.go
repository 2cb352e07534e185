package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// The shape of scenario rw: the read/write lock's waits with looping readers and writers,
// in several Clients (TestRealRWLockLoad's shape, without the race detector).
const (
	rwReaders   = 32
	rwWriters   = 2
	rwClients   = 4
	rwReadHold  = 5 * time.Millisecond
	rwWriteHold = 2 * time.Millisecond
)

// scenarioRW runs 32 readers (holding 5 ms) and 2 writers (holding 2 ms) looping on one
// read/write lock for FDur, spread over 4 Clients on 5 nodes, and reports the holds and the
// waits, the writers' in reader holds: phase-fair waiting (docs/design.md §3.13) keeps a
// writer's wait to the readers already in, the other writer and one read phase.
func (r *runner) scenarioRW(ctx context.Context) error {
	addrs := r.addrs[:5]
	var cs []*ours
	defer func() {
		for _, o := range cs {
			o.close()
		}
	}()
	for range rwClients {
		o, err := newOurs(addrs)
		if err != nil {
			return err
		}
		cs = append(cs, o)
	}
	name := fmt.Sprintf("rw:bench:%d", time.Now().UnixNano())
	r.logf("rw: %d readers (hold %v), %d writers (hold %v), %d Clients, %s", rwReaders, rwReadHold, rwWriters, rwWriteHold, rwClients, r.cfg.FDur)
	var mu sync.Mutex
	var reads, writes series
	var readFail, writeFail int
	var lastErr error
	deadline := time.Now().Add(r.cfg.FDur)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range rwReaders + rwWriters {
		write := g >= rwReaders
		rw := cs[g%rwClients].c.RWLock(name)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				var l *redlock.Lock
				var err error
				if write {
					l, err = rw.AcquireWrite(wctx, lockTTL)
				} else {
					l, err = rw.AcquireRead(wctx, lockTTL)
				}
				waited := time.Since(t0)
				if err != nil {
					if wctx.Err() == nil {
						mu.Lock()
						if write {
							writeFail++
						} else {
							readFail++
						}
						lastErr = err
						mu.Unlock()
					}
					continue
				}
				if write {
					time.Sleep(rwWriteHold)
				} else {
					time.Sleep(rwReadHold)
				}
				err = l.Release(ctx)
				mu.Lock()
				if err != nil {
					lastErr = err
				}
				if write {
					writes.add(waited)
				} else {
					reads.add(waited)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	w := r.out
	fmt.Fprintf(w, "## rw: the read/write lock, looping readers and writers, 5 healthy nodes\n\n")
	fmt.Fprintf(w, "%d readers (hold %v) and %d writers (hold %v) loop `AcquireRead` or `AcquireWrite` / hold / `Release` on one `RWLock` for %s, "+
		"spread over %d Clients; default options. A wait is from the call to the hold.\n\n",
		rwReaders, rwReadHold, rwWriters, rwWriteHold, r.cfg.FDur, rwClients)
	row := func(who string, s *series, fail int) []string {
		return []string{who, rate(float64(len(s.d)) / took.Seconds()), ms(s.pct(50)), ms(s.pct(90)), ms(s.pct(99)), ms(s.max()),
			fmt.Sprintf("%.1f", float64(s.pct(50))/float64(rwReadHold)), fmt.Sprint(fail)}
	}
	table(w, []string{"side", "holds/s", "wait p50", "wait p90", "wait p99", "worst", "p50 in reader holds", "failed"},
		[][]string{row("writers", &writes, writeFail), row("readers", &reads, readFail)})
	notes(w, []string{errNote("rw", &stats{lastErr: lastErr})})
	ts := []Target{
		atMost("rw", "writer wait p50, in reader holds", float64(writes.pct(50))/float64(rwReadHold), 8),
		atMost("rw", "reader wait p50, in reader holds", float64(reads.pct(50))/float64(rwReadHold), 4),
		atLeast("rw", "reads per write", float64(len(reads.d))/float64(max(len(writes.d), 1)), 4),
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
