package redlock

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

// longRun says whether the long versions of the real-node load tests run
// (REDLOCK_LONG=1); the default runs each for a few seconds.
var longRun = os.Getenv("REDLOCK_LONG") == "1"

// holdRecord is one permit's hold as a test saw it: from Acquire's return to the call of
// Release, on this process's monotonic clock.
type holdRecord struct {
	key        string
	token      Token
	start, end time.Time
	worker     int
}

// TestRealSemaphoreLoad: 64 goroutines in 4 Clients (4 processes, as the nodes see it) loop
// on one semaphore of 8 permits on 5 real nodes, holding each permit 1 ms: never more than 8
// holds overlap, each permit's tokens strictly increase in the order of its holds, every
// goroutine is served and the service is fair (Jain's index ≥ 0.9). 4 s, or 20 s with
// REDLOCK_LONG=1.
func TestRealSemaphoreLoad(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	dur := 4 * time.Second
	if longRun {
		dur = 20 * time.Second
	}
	const clients, perClient, permits = 4, 16, 8
	ctx := ctxT(t, dur+60*time.Second)
	var mu sync.Mutex
	var holds []holdRecord
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	for ci := range clients {
		c := newTestClient(t, cluster.ClientsT(t))
		s := c.Semaphore("real:sem", permits)
		for g := range perClient {
			worker := ci*perClient + g
			wg.Go(func() {
				for time.Now().Before(stop) {
					l, err := s.Acquire(ctx, 10*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					start := time.Now()
					time.Sleep(time.Millisecond) // the work under the permit
					end := time.Now()
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					holds = append(holds, holdRecord{l.Key(), l.Token(), start, end, worker})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	checkHolds(t, holds, permits, clients*perClient)
	t.Logf("%d holds in %v: %.0f permits/s", len(holds), dur, float64(len(holds))/dur.Seconds())
}

// checkHolds checks recorded holds: at most permits overlap at any moment, each permit's
// tokens increase strictly in the order of its holds, and all workers were served fairly.
func checkHolds(t *testing.T, holds []holdRecord, permits, workers int) {
	t.Helper()
	if len(holds) == 0 {
		t.Fatal("no holds")
	}
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(holds))
	byKey := map[string][]holdRecord{}
	served := make([]float64, workers)
	for _, h := range holds {
		edges = append(edges, edge{h.start, 1}, edge{h.end, -1})
		byKey[h.key] = append(byKey[h.key], h)
		served[h.worker]++
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	at, most := 0, 0
	for _, e := range edges {
		at += e.delta
		most = max(most, at)
	}
	if most > permits {
		t.Errorf("%d holds overlapped, with %d permits", most, permits)
	}
	if len(byKey) > permits {
		t.Errorf("%d distinct permit keys held, want at most %d", len(byKey), permits)
	}
	for k, hs := range byKey {
		slices.SortFunc(hs, func(a, b holdRecord) int { return a.start.Compare(b.start) })
		for i := 1; i < len(hs); i++ {
			if hs[i].start.Before(hs[i-1].end) {
				t.Errorf("permit %q: holds overlap (%v < %v)", k, hs[i].start, hs[i-1].end)
			}
			if hs[i].token <= hs[i-1].token {
				t.Errorf("permit %q: token %d after %d", k, hs[i].token, hs[i-1].token)
			}
		}
	}
	var sum, sq float64
	for w, n := range served {
		if n == 0 {
			t.Errorf("worker %d was never served", w)
		}
		sum += n
		sq += n * n
	}
	j := sum * sum / (float64(workers) * sq)
	t.Logf("Jain's index %.3f over %d workers", j, workers)
	if j < 0.9 {
		t.Errorf("Jain's index %.3f over %d workers, want ≥ 0.9 (served: %v)", j, workers, served)
	}
}

// TestRealSemaphoreWakeUp: a process waiting for a permit held by another process gets it
// soon after the release, by the wake-up rather than its retry delay (a minute here).
func TestRealSemaphoreWakeUp(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	ctx := ctxT(t, 30*time.Second)
	a := newTestClient(t, cluster.ClientsT(t))
	b := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	sa, sb := a.Semaphore("real:sem:wake", 2), b.Semaphore("real:sem:wake", 2)
	var held []*Lock
	for range 2 {
		l, err := sa.TryAcquire(ctx, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	got := make(chan error, 1)
	var waited time.Duration
	go func() {
		l, err := sb.Acquire(ctx, 20*time.Second)
		if err == nil && l.Key() != held[1].Key() {
			err = errors.New("got " + l.Key() + ", want the released " + held[1].Key())
		}
		got <- err
	}()
	// Once the waiter has made its attempt and subscribed on every node, release.
	waitSubscribed(t, cluster, held[1].Key())
	start := time.Now()
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waited = time.Since(start)
	if waited > 5*time.Second {
		t.Errorf("the waiter got the permit %v after the release; a wake-up should take milliseconds", waited)
	}
	t.Logf("permit handed over %v after the release", waited)
}

// waitSubscribed waits until every node has a subscriber on key's wake-up channel.
func waitSubscribed(t *testing.T, cluster *redisproc.Cluster, key string) {
	t.Helper()
	ch := wakeChannel(key)
	for _, rc := range cluster.ClientsT(t) {
		testutil.WaitFor(t, 10*time.Second, "a subscriber on "+ch, func() bool {
			n, err := rc.PubSubNumSub(context.Background(), ch).Result()
			return err == nil && n[ch] > 0
		})
	}
}
