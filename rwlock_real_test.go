package redlock

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestRealRWLockLoad: 32 readers and 2 writers in 4 Clients loop on one read/write lock on 5
// real nodes (readers hold 5 ms, writers 2 ms): no reader overlaps a writer, no two writers
// overlap, writer tokens strictly increase in holding order, and no writer waits more than
// a second although readers keep coming (the writer intent keeps new ones out). 4 s, or 20 s
// with REDLOCK_LONG=1.
func TestRealRWLockLoad(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	dur := 4 * time.Second
	if longRun {
		dur = 20 * time.Second
	}
	const readers, writers, clients = 32, 2, 4
	const readHold, writeHold = 5 * time.Millisecond, 2 * time.Millisecond
	ctx := ctxT(t, dur+60*time.Second)
	type rec struct {
		write      bool
		start, end time.Time
		token      Token
		wait       time.Duration
	}
	var mu sync.Mutex
	var recs []rec
	cs := make([]*Client, clients)
	for i := range cs {
		cs[i] = newTestClient(t, cluster.ClientsT(t))
	}
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := range readers + writers {
		write := g >= readers
		rw := cs[g%clients].RWLock("real:rw")
		wg.Go(func() {
			for time.Now().Before(stop) {
				asked := time.Now()
				var l *Lock
				var err error
				if write {
					l, err = rw.AcquireWrite(ctx, 10*time.Second)
				} else {
					l, err = rw.AcquireRead(ctx, 10*time.Second)
				}
				if err != nil {
					t.Error(err)
					return
				}
				start := time.Now()
				if write {
					time.Sleep(writeHold) // the work under the lock
				} else {
					time.Sleep(readHold)
				}
				end := time.Now()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				recs = append(recs, rec{write, start, end, l.Token(), start.Sub(asked)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var ws, rs []rec
	for _, r := range recs {
		if r.write {
			ws = append(ws, r)
		} else {
			rs = append(rs, r)
		}
	}
	if len(ws) == 0 || len(rs) == 0 {
		t.Fatalf("%d writes, %d reads", len(ws), len(rs))
	}
	slices.SortFunc(ws, func(a, b rec) int { return a.start.Compare(b.start) })
	var waits []time.Duration
	for i, w := range ws {
		waits = append(waits, w.wait)
		if i > 0 {
			if w.start.Before(ws[i-1].end) {
				t.Errorf("writers overlap: %v < %v", w.start, ws[i-1].end)
			}
			if w.token <= ws[i-1].token {
				t.Errorf("writer token %d after %d", w.token, ws[i-1].token)
			}
		}
		for _, r := range rs {
			if r.start.Before(w.end) && w.start.Before(r.end) {
				t.Errorf("a reader [%v, %v] overlaps a writer [%v, %v]", r.start, r.end, w.start, w.end)
				break
			}
		}
	}
	slices.Sort(waits)
	worst := waits[len(waits)-1]
	p99 := waits[len(waits)*99/100]
	// No starvation: a writer's wait is bounded although readers keep coming. (It also waits
	// for the other writer, and for retry pauses when a wake-up is missed.)
	if limit := time.Second; worst > limit {
		t.Errorf("writer wait p99 %v, worst %v: more than %v", p99, worst, limit)
	}
	t.Logf("%d reads, %d writes in %v; writer wait p50 %v, p99 %v, worst %v", len(rs), len(ws), dur, waits[len(waits)/2], p99, worst)
}
