package redlock

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestRealRWLockLoad: 32 readers and 2 writers in 4 Clients loop on one read/write lock on 5
// real nodes (readers hold 5 ms, writers 2 ms): no reader overlaps a writer, no two writers
// overlap, writer tokens strictly increase in holding order; and, in counts that a loaded
// machine does not change, the waiting is phase-fair: readers hold between consecutive
// writers, a writer is overtaken by at most the other writer's turn (median), every loop is
// served. The waits' times are bench/'s rw scenario. 4 s, or 20 s with REDLOCK_LONG=1.
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
		g          int // the loop
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
				recs = append(recs, rec{write, g, start, end, l.Token(), start.Sub(asked)})
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
	var rwaits []time.Duration
	for _, r := range rs {
		rwaits = append(rwaits, r.wait)
	}
	slices.Sort(rwaits)
	q := func(w []time.Duration, f float64) time.Duration { return w[int(float64(len(w)-1)*f)] }
	// Phase-fair (design.md §3.13), in counts rather than times, so that a loaded machine
	// does not change the verdict (the times are bench/'s rw scenario, docs/operations.md):
	// a writer waits for the readers already in, the writers ahead of it and the read phase
	// after each, so few other writers' holds begin while it waits; and readers come in
	// between writers, so writers that loop do not starve them.
	var overtaken []int // per writer hold: the other writers' holds that began while it waited
	between := 0        // consecutive writer holds with a reader's hold begun between them
	for i, w := range ws {
		n := 0
		for _, o := range ws[:i] {
			if o.start.After(w.start.Add(-w.wait)) {
				n++
			}
		}
		overtaken = append(overtaken, n)
		if i > 0 && slices.ContainsFunc(rs, func(r rec) bool { return r.start.After(ws[i-1].end) && r.start.Before(w.start) }) {
			between++
		}
	}
	// Writers of different Clients are not ordered among themselves (rwlock.go), so a writer
	// may be overtaken more than once; the median is at most the other writer's one turn.
	slices.Sort(overtaken)
	if p50 := overtaken[len(overtaken)/2]; p50 > 1 {
		t.Errorf("writers overtaken while waiting: median %d other writers' holds (all: %v), want at most 1", p50, overtaken)
	}
	// A pair of writers with no reader between them is a read phase that no marked reader
	// reached in time (one retry delay) or that none was marked for; the time-bound phase this
	// replaced let 16 % of the pairs through on a loaded machine.
	if pairs := len(ws) - 1; pairs > 0 && between*4 < pairs*3 {
		t.Errorf("readers held between only %d of %d consecutive writers: writers starve readers", between, pairs)
	}
	// Nobody starves: every reader and writer loop was served, many times.
	served := make([]int, readers+writers)
	for _, r := range recs {
		served[r.g]++
	}
	if least := slices.Min(served); least < 5 {
		t.Errorf("holds per loop (readers, then writers): %v; one was served fewer than 5 times", served)
	}
	t.Logf("overtaken p50 %d p90 %d max %d; readers between %d of %d writer pairs; fewest holds per loop %d", overtaken[len(overtaken)/2], overtaken[len(overtaken)*9/10], overtaken[len(overtaken)-1], between, len(ws)-1, slices.Min(served))
	t.Logf("%d reads, %d writes in %v; writer wait p50 %v, p90 %v, p99 %v, worst %v; reader wait p50 %v, p90 %v, p99 %v",
		len(rs), len(ws), dur, q(waits, 0.5), q(waits, 0.9), q(waits, 0.99), waits[len(waits)-1], q(rwaits, 0.5), q(rwaits, 0.9), q(rwaits, 0.99))
}

// rwACLCommands are the commands docs/operations.md adds to the lock's ACL line for the
// read/write lock's scripts.
const rwACLCommands = "+zadd +zrem +zrange +zremrangebyscore +zscore"

// TestRealRWLockACL runs the read/write lock as a Redis ACL user that may run only the
// documented commands (the library's, the wake-ups' and the read/write lock's): readers
// share, a writer is refused beside them and then holds, a reader waiting for it is marked,
// the writer's release opens a read phase and the reader comes in, ending it, and the status
// reads all of it. A command missing from the list fails a script, or shows in the nodes'
// ACL LOG, and so fails this test.
func TestRealRWLockACL(t *testing.T) {
	const pw = "rwAclSecret"
	if doc, err := os.ReadFile("docs/operations.md"); err != nil || !strings.Contains(string(doc), "`"+rwACLCommands+"`") {
		t.Errorf("docs/operations.md does not give the read/write lock's ACL commands `%s` (%v)", rwACLCommands, err)
	}
	acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "resetchannels", "&redlock:wake:*", "-@all",
		"+publish", "+subscribe", "+unsubscribe"}, strings.Fields(aclCommands+" "+rwACLCommands)...)
	cluster := redisproc.StartT(t, 3, redisproc.Config{ExtraArgs: acl})
	clients := aclUserClients(t, cluster.Addrs(), pw)
	admin := cluster.ClientsT(t)
	t.Cleanup(func() { // even after a Fatal: no script was refused a command (the nodes' ACL LOG)
		for i, a := range admin {
			log, err := a.Do(context.Background(), "ACL", "LOG").Slice()
			if err != nil {
				t.Error(err)
				continue
			}
			for _, e := range log {
				// The status's count of the writer key's waiter queue is read under pcall
				// and shows "?" to a user without the queue's commands (lua/status.lua): the
				// one refusal this user may see.
				if m, _ := e.(map[any]any); m["context"] == "lua" && m["object"] != "zcard" {
					t.Errorf("node %d: a script was refused a command: %v", i, m)
				}
			}
		}
	})
	ctx := ctxT(t, 30*time.Second)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	rw := c.RWLock("acl:rw")
	r1, err := rw.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("reader as the ACL user:", err)
	}
	if err := r1.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal("reader extend as the ACL user:", err)
	}
	if _, err := rw.TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("writer beside a reader: %v, want a refusal (ErrNotAcquired), not a node error", err)
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rw.AcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal("writer as the ACL user:", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := rw.AcquireRead(ctx, 10*time.Second)
		if err == nil {
			err = r.Release(ctx)
		}
		got <- err
	}()
	waitRW(t, ctx, rw, "a reader marked waiting on a quorum", func(st *RWStatus) bool {
		return onQuorum(st, func(n RWNodeStatus) bool { return n.Waiting == 1 })
	})
	if err := w.Release(ctx); err != nil {
		t.Fatal("writer release as the ACL user:", err)
	}
	if err := <-got; err != nil {
		t.Fatal("the waiting reader:", err)
	}
	// The calls nobody waits for (a late release, the marks' removal) settle.
	waitRW(t, ctx, rw, "no reader, mark or phase left", func(st *RWStatus) bool {
		return !slices.ContainsFunc(st.Nodes, func(n RWNodeStatus) bool {
			return n.Err != nil || n.Readers != 0 || n.Phase != "" || n.Waiting != 0
		})
	})
}
