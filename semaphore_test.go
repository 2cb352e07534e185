package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// TestSemaphoreRejectsBadInput: a bad name or permit count, a nil context, a bad ttl and a
// nil fn are ErrInvalidArgument from every call, and nothing reaches a node.
func TestSemaphoreRejectsBadInput(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	before := commandCounts(servers)
	fn := func(context.Context, *Lock) error { return nil }
	cases := []struct {
		name    string
		s       *Semaphore
		ctx     context.Context
		ttl     time.Duration
		want    string
		callsDo bool
	}{
		{"no permits", c.Semaphore("sem", 0), ctx, time.Second, "0 permits", true},
		{"negative permits", c.Semaphore("sem", -3), ctx, time.Second, "-3 permits", true},
		{"too many permits", c.Semaphore("sem", MaxPermits+1), ctx, time.Second, "MaxPermits", true},
		{"empty name", c.Semaphore("", 2), ctx, time.Second, "empty", true},
		{"reserved prefix", c.Semaphore(FencePrefix+"x", 2), ctx, time.Second, "reserved prefix", true},
		{"huge name", c.Semaphore(strings.Repeat("n", MaxKeyLen), 2), ctx, time.Second, "MaxKeyLen", true},
		{"nil ctx", c.Semaphore("sem", 2), nil, time.Second, "context is nil", true},
		{"zero ttl", c.Semaphore("sem", 2), ctx, 0, "ttl", true},
		{"negative ttl", c.Semaphore("sem", 2), ctx, -time.Second, "ttl", true},
		{"ttl too long", c.Semaphore("sem", 2), ctx, 400 * 24 * time.Hour, "ttl", true},
		{"ttl too short for Do", c.Semaphore("sem", 2), ctx, 20 * time.Millisecond, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", what, err, tc.want)
				}
			}
			if tc.callsDo {
				_, err := tc.s.TryAcquire(tc.ctx, tc.ttl)
				check("TryAcquire", err)
				_, err = tc.s.Acquire(tc.ctx, tc.ttl)
				check("Acquire", err)
			}
			check("Do", tc.s.Do(tc.ctx, tc.ttl, fn))
		})
	}
	if err := c.Semaphore("sem", 2).Do(ctx, time.Second, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Do with a nil fn: %v, want ErrInvalidArgument", err)
	}
	if got := c.Semaphore("sem", 0).PermitKey(0); got != "" {
		t.Errorf("PermitKey of an invalid semaphore: %q, want \"\"", got)
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("commands per node went from %v to %v: bad input reached the nodes", before, got)
	}
}

// TestSemaphorePermitKeys: every permit key of a name sits in the name's cluster hash slot
// (permits.lua reads them in one script), whatever the name's braces; the keys differ per
// permit and per name.
func TestSemaphorePermitKeys(t *testing.T) {
	_, clients := miniNodes(t, 1)
	c := newTestClient(t, clients)
	seen := map[string]string{}
	for _, name := range slotKeyShapes {
		s := c.Semaphore(name, 5)
		if reserved(name) || len(name) > MaxKeyLen-len(SemaphorePrefix)-8 {
			if !errors.Is(s.err, ErrInvalidArgument) {
				t.Errorf("%q, reserved or too long for its permit keys: %v, want ErrInvalidArgument", quoteKey(name), s.err)
			}
			continue
		}
		if s.err != nil {
			t.Fatalf("%q: %v", quoteKey(name), s.err)
		}
		for i := range s.Permits() {
			k := s.PermitKey(i)
			if keySlot(k) != keySlot(s.PermitKey(0)) {
				t.Errorf("%q: permit %d key %q in slot %d, permit 0's in %d", name, i, k, keySlot(k), keySlot(s.PermitKey(0)))
			}
			if f := s.keys[i].fences[0]; keySlot(f) != keySlot(k) {
				t.Errorf("%q: permit %d's fence counter %q in another slot", name, i, f)
			}
			if prev, ok := seen[k]; ok {
				t.Errorf("permit key %q of %q also names a permit of %q", k, name, prev)
			}
			seen[k] = name
		}
		if s.PermitKey(-1) != "" || s.PermitKey(5) != "" {
			t.Errorf("%q: PermitKey out of range is not \"\"", name)
		}
	}
}

func reserved(name string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestSemaphoreLocalPermits: one Client takes every permit; the next TryAcquire fails
// without sending anything; a release frees exactly that permit; tokens of one permit
// strictly increase.
func TestSemaphoreLocalPermits(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("bank-api", 3)
	held := map[string]*Lock{}
	for range 3 {
		l, err := s.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if held[l.Key()] != nil {
			t.Fatalf("permit %q taken twice", l.Key())
		}
		held[l.Key()] = l
	}
	settle(c) // the last node's reply may still be on its way
	before := commandCounts(servers)
	if _, err := s.TryAcquire(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "holds all 3") {
		t.Fatalf("fourth TryAcquire: %v, want ErrNotAcquired (this Client holds all)", err)
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("a TryAcquire with every permit held here sent commands: %v -> %v", before, got)
	}
	var freed *Lock
	for _, l := range held {
		freed = l
		break
	}
	last := freed.Token()
	for range 4 {
		if err := freed.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := s.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Key() != freed.Key() {
			t.Fatalf("after releasing %q got %q", freed.Key(), l.Key())
		}
		if l.Token() <= last {
			t.Fatalf("permit %q: token %d after %d", l.Key(), l.Token(), last)
		}
		last, freed = l.Token(), l
	}
}

// TestSemaphoreAcrossClients: two Clients (two processes, for the nodes) share 2 permits.
// The second finds both held by the first (a read of every permit, then ErrNotAcquired),
// and its Acquire gets the permit the first releases.
func TestSemaphoreAcrossClients(t *testing.T) {
	_, clients := miniNodes(t, 3)
	a, b := newTestClient(t, clients), newTestClient(t, clients, WithRetryDelay(20*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	sa, sb := a.Semaphore("jobs", 2), b.Semaphore("jobs", 2)
	l1, err := sa.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := sa.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.TryAcquire(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "all 2 permits are held") {
		t.Fatalf("TryAcquire with both permits held elsewhere: %v", err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, err := sb.Acquire(ctx, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	if l.Key() != l2.Key() {
		t.Errorf("the waiter got %q, want the released %q", l.Key(), l2.Key())
	}
	if l.Key() == l1.Key() {
		t.Errorf("the waiter got %q, which is still held", l.Key())
	}
}

// TestSemaphoreNodesDisagree: the nodes disagree about which permits are free (a permit
// held on a minority only, as after a failed attempt's lost undo); a TryAcquire whose first
// choice is held gets a permit that a quorum has free, never one held on a quorum.
func TestSemaphoreNodesDisagree(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("lanes", 3)
	// Permit s.first held elsewhere on every node; the next one held on one node only; the
	// third free everywhere.
	p0, p1, p2 := s.first, (s.first+1)%3, (s.first+2)%3
	for i, m := range servers {
		m.Set(s.PermitKey(p0), "someone")
		m.SetTTL(s.PermitKey(p0), time.Minute)
		if i == 0 {
			m.Set(s.PermitKey(p1), "someone")
			m.SetTTL(s.PermitKey(p1), time.Minute)
		}
	}
	seen := map[string]bool{}
	for range 20 {
		l, err := s.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Key() == s.PermitKey(p0) {
			t.Fatalf("got permit %q, held on every node", l.Key())
		}
		seen[l.Key()] = true
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !seen[s.PermitKey(p1)] || !seen[s.PermitKey(p2)] {
		t.Errorf("permits taken: %v, want both %q and %q (free on a quorum; chosen at random)", seen, s.PermitKey(p1), s.PermitKey(p2))
	}
}

// TestSemaphoreWokenTriesReleased: an attempt woken by the release of a permit tries that
// permit first (one attempt, no read of the permits), whatever this Client's own first
// choice; one that was not woken starts from its first choice. A released permit that this
// Client holds itself is passed over.
func TestSemaphoreWokenTriesReleased(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	attempts := countAttempts(clients)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("lanes", 3)
	first, next, last := s.first, (s.first+1)%3, (s.first+2)%3
	for _, m := range servers { // this Client's first choice is held elsewhere
		m.Set(s.PermitKey(first), "someone")
		m.SetTTL(s.PermitKey(first), time.Minute)
	}
	try := func(released string) (*Lock, int) {
		t.Helper()
		attempts.reset()
		l, r, err := c.attemptHeld(ctx, 10*time.Second, func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return s.attempt(ctx, ttl, released)
		})
		if err != nil || r.kind != attemptWon {
			t.Fatalf("attempt (released %q): %v (%v)", released, err, r.kind)
		}
		return l, attempts.count()
	}
	// Not woken: the first choice (held), then one of the two free ones.
	l, n := try("")
	if n != 2 {
		t.Errorf("an attempt not woken made %d lock attempts, want 2 (its first choice, held, then a free one)", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Woken by the release of last: that permit, in one lock attempt.
	l, n = try(s.PermitKey(last))
	if l.Key() != s.PermitKey(last) || n != 1 {
		t.Errorf("woken by %q: got %q in %d lock attempts, want it in 1", s.PermitKey(last), l.Key(), n)
	}
	// Woken by a permit this Client holds (last): passed over for the first choice (held
	// elsewhere), then the only free one.
	l2, n := try(s.PermitKey(last))
	if l2.Key() != s.PermitKey(next) || n != 2 {
		t.Errorf("woken by a permit held here: got %q in %d lock attempts, want %q in 2", l2.Key(), n, s.PermitKey(next))
	}
}

// TestSemaphoreLocalRefusalNotCrowded: a woken attempt that this Client refuses itself,
// without asking the nodes (it holds every permit), lost to nobody and does not mark the
// semaphore crowded; one the nodes refused (another Client holds every permit) lost to
// another contender and does. Both are "refused" for an observer (they were "error"). Counted, the first made every woken waiter of a Client alone
// on a semaphore give way for up to 8 ms (seniorityDelay) before its attempt.
func TestSemaphoreLocalRefusalNotCrowded(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	const name = "crowd"
	woken := func(c *Client, released string) {
		t.Helper()
		s := c.Semaphore(name, 2)
		tn := &turn{c: c, set: s.all, key: s.waitKey, eager: true}
		tn.subscribe()
		defer c.unsubscribe(s.all)
		_, r, err := c.attemptHeld(ctx, 10*time.Second, func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return s.attempt(ctx, ttl, released)
		})
		if !errors.Is(err, ErrNotAcquired) || r.kind != attemptContended {
			t.Fatalf("attempt with every permit held: %v (%v), want contended", err, r.kind)
		}
		if got := r.outcome(err); got != OutcomeRefused {
			t.Errorf("observer's outcome %q, want %q", got, OutcomeRefused)
		}
		tn.tried(true, r)
		local := strings.Contains(err.Error(), "this Client holds")
		if got := c.crowded(s.all); got == local {
			t.Errorf("woken attempt refused %s (%v): crowded %v, want %v", map[bool]string{true: "here", false: "by the nodes"}[local], err, got, !local)
		}
	}
	for _, holder := range []*Client{c, other} {
		s := holder.Semaphore(name, 2)
		var held []*Lock
		for range 2 {
			l, err := s.TryAcquire(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		woken(c, held[0].Key())
		for _, l := range held {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// scriptedClock returns the times queued in next, one per call, and the system clock's once
// they are used up.
type scriptedClock struct {
	mu   sync.Mutex
	next []time.Time
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.next) == 0 {
		return time.Now()
	}
	t := c.next[0]
	c.next = c.next[1:]
	return t
}

func (c *scriptedClock) queue(ts ...time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = append(c.next, ts...)
}

// TestSemaphoreLocalRefusalThenNoneFree: the first permit an attempt chose turned out taken
// by this Client when it came to try it (another of its calls claimed it in between; here
// the clock makes the Client's own permit look expired when the choice is made and valid
// when it is tried), and the read then finds no other permit free. That is a refusal, here,
// as the first try's was: the observer hears "refused", not "error", and the semaphore is
// not marked crowded.
func TestSemaphoreLocalRefusalThenNoneFree(t *testing.T) {
	_, clients := miniNodes(t, 3)
	clk := &scriptedClock{}
	c := newTestClient(t, clients, WithClock(clk))
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("local-then-none", 2)
	mine, err := s.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Semaphore("local-then-none", 2).TryAcquire(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The choice (permitsHeld) sees our permit expired, the claim (claimPermit) sees it held.
	clk.queue(mine.Until().Add(time.Second), mine.Until().Add(-time.Millisecond))
	_, r, err := s.attempt(ctx, 10*time.Second, mine.Key())
	if !errors.Is(err, ErrNotAcquired) || r.kind != attemptContended {
		t.Fatalf("attempt: %v (%v), want contended", err, r.kind)
	}
	if !strings.Contains(err.Error(), "all 2 permits are held") {
		t.Fatalf("attempt: %v, want the read's refusal (the path under test)", err)
	}
	if got := r.outcome(err); got != OutcomeRefused {
		t.Errorf("observer's outcome %q, want %q", got, OutcomeRefused)
	}
	if !r.here || r.refused {
		t.Errorf("result here=%v refused=%v, want refused here as the first try was", r.here, r.refused)
	}
	tn := &turn{c: c, set: s.all, key: s.waitKey, eager: true}
	tn.tried(true, r)
	if c.crowded(s.all) {
		t.Error("crowded after a refusal here")
	}
}

// TestSemaphoreDo: 24 goroutines of one Client run Do on 3 permits: never more than 3 run
// at once, each permit's tokens strictly increase in the order its holders ran, and every
// call ran.
func TestSemaphoreDo(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryDelay(20*time.Millisecond))
	ctx := ctxT(t, 30*time.Second)
	s := c.Semaphore("do", 3)
	var inside, most, ran atomic.Int32
	var mu sync.Mutex
	last := map[string]Token{}
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for range 5 {
				err := s.Do(ctx, 2*time.Second, func(ctx context.Context, l *Lock) error {
					n := inside.Add(1)
					defer inside.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					mu.Lock()
					if l.Token() <= last[l.Key()] {
						t.Errorf("permit %q: token %d after %d", l.Key(), l.Token(), last[l.Key()])
					}
					last[l.Key()] = l.Token()
					mu.Unlock()
					ran.Add(1)
					return ctx.Err()
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > 3 {
		t.Errorf("%d ran at once with 3 permits", most.Load())
	}
	if ran.Load() != 24*5 {
		t.Errorf("%d of %d calls ran", ran.Load(), 24*5)
	}
}

// TestSemaphoreClosed: after Close every call returns ErrClosed, and a waiting Acquire
// returns ErrClosed at once.
func TestSemaphoreClosed(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryDelay(time.Minute))
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("closing", 1)
	if _, err := s.TryAcquire(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, 10*time.Second)
		done <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the Acquire waiting", func() bool { return c.wait.busy(s.waitKey) })
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting Acquire after Close: %v, want ErrClosed", err)
	} else if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the waiter took %v to return", d)
	}
	if _, err := s.TryAcquire(ctx, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("TryAcquire after Close: %v", err)
	}
}

// TestParsePermitKey: every permit key of every name shape parses back to its name and
// number; lock keys, fence counters and near misses do not parse.
func TestParsePermitKey(t *testing.T) {
	for _, name := range slotKeyShapes {
		for _, i := range []int{0, 1, 9, 10, MaxPermits - 1} {
			k, err := permitKey(name, i)
			if err != nil {
				continue // a reserved or too long name: no permit keys
			}
			n, p, ok := ParsePermitKey(k)
			if !ok || n != name || p != i {
				t.Errorf("ParsePermitKey(%q) = %q, %d, %v; want %q, %d", quoteKey(k), quoteKey(n), p, ok, quoteKey(name), i)
			}
		}
	}
	for _, k := range []string{"orders:42", SemaphorePrefix, SemaphorePrefix + "x:{a}", SemaphorePrefix + "01:{a}",
		SemaphorePrefix + "-1:{a}", SemaphorePrefix + "64:{a}", SemaphorePrefix + "3", SemaphorePrefix + "3:a", FencePrefix + SemaphorePrefix + "0:{a}"} {
		if n, p, ok := ParsePermitKey(k); ok {
			t.Errorf("ParsePermitKey(%q) = %q, %d, true; want false", k, n, p)
		}
	}
}

// TestSemaphoreStatus: Status reads every permit: which are held on a quorum, by whom.
func TestSemaphoreStatus(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	s := c.Semaphore("status", 4)
	a, err := s.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "status" || st.Permits != 4 || len(st.Permit) != 4 || st.Held != 2 {
		t.Fatalf("status: %+v, want 2 of 4 held", st)
	}
	holders := map[string]string{}
	for i, p := range st.Permit {
		if p.Key != s.PermitKey(i) {
			t.Errorf("permit %d: key %q, want %q", i, p.Key, s.PermitKey(i))
		}
		if p.Holder != "" {
			holders[p.Key] = p.Holder
		}
	}
	if holders[a.Key()] != a.ID() || holders[b.Key()] != b.ID() || len(holders) != 2 {
		t.Errorf("holders %v, want %s on %q and %s on %q", holders, a.ID(), a.Key(), b.ID(), b.Key())
	}
	if _, err := c.Semaphore("status", 0).Status(ctx); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Status of an invalid semaphore: %v", err)
	}
	var nilCtx context.Context // a nil context, as a careless caller passes it
	if _, err := s.Status(nilCtx); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Status with a nil ctx: %v", err)
	}
}
