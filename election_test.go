package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// TestElectionRejectsBadInput: bad names, contexts, TTLs and values are ErrInvalidArgument
// and send nothing.
func TestElectionRejectsBadInput(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	var nilCtx context.Context // a nil context, as a careless caller passes it
	before := commandCounts(servers)
	ok := c.Election("sched")
	fn := func(context.Context, *Leadership) error { return nil }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"empty name", first(c.Election("").Campaign(ctx, "v", time.Second)), "empty"},
		{"reserved name", first(c.Election(FencePrefix+"x").Campaign(ctx, "v", time.Second)), "reserved"},
		{"huge name", first(c.Election(strings.Repeat("n", MaxKeyLen)).Campaign(ctx, "v", time.Second)), "MaxKeyLen"},
		{"nil ctx", first(ok.Campaign(nilCtx, "v", time.Second)), "context is nil"},
		{"ttl 0", first(ok.Campaign(ctx, "v", 0)), "ttl"},
		{"ttl below MinDoTTL", first(ok.Campaign(ctx, "v", 20*time.Millisecond)), "too short"},
		{"value too long", first(ok.Campaign(ctx, strings.Repeat("v", MaxValueLen+1), time.Second)), "MaxValueLen"},
		{"Do nil fn", ok.Do(ctx, "v", time.Second, nil), "fn is nil"},
		{"Do nil ctx", ok.Do(nilCtx, "v", time.Second, fn), "context is nil"},
		{"Leader nil ctx", second(ok.Leader(nilCtx)), "context is nil"},
		{"Leader bad name", second(c.Election("").Leader(ctx)), "empty"},
	} {
		if !errors.Is(tc.err, ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", tc.name, tc.err, tc.want)
		}
	}
	if _, open := <-c.Election("").Observe(ctx); open {
		t.Error("Observe of a bad name: the channel is open")
	}
	if c.Election("").Key() != "" {
		t.Error("Key of a bad name is not empty")
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("bad input reached the nodes: %v -> %v", before, got)
	}
}

func first[T any](_ T, err error) error  { return err }
func second[T any](_ T, err error) error { return err }

// TestElectionLifecycle: a leader is elected and proclaims; Leader and Observe report it;
// a second candidate waits and is elected when the first resigns, with a larger term; after
// the last resigns there is no leader.
func TestElectionLifecycle(t *testing.T) {
	_, clients := miniNodes(t, 3)
	a, b := newTestClient(t, clients), newTestClient(t, clients, WithRetryDelay(20*time.Millisecond))
	ctx := ctxT(t, 20*time.Second)
	ea, eb := a.Election("settlement-scheduler"), b.Election("settlement-scheduler")
	if _, err := eb.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	obs := eb.Observe(ctx)
	if got := <-obs; got != (LeaderInfo{}) {
		t.Fatalf("first observation %+v, want no leader", got)
	}
	la, err := ea.Campaign(ctx, "host-a", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if la.Value() != "host-a" || la.Term() == 0 {
		t.Fatalf("leadership: value %q, term %d", la.Value(), la.Term())
	}
	want := LeaderInfo{Value: "host-a", Term: la.Term(), ID: la.ID()}
	if info, err := eb.Leader(ctx); err != nil || info != want {
		t.Fatalf("Leader: %+v, %v; want %+v", info, err, want)
	}
	if got := <-obs; got != want {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	if err := la.Proclaim(ctx, "host-a:v2"); err != nil {
		t.Fatal(err)
	}
	want.Value = "host-a:v2"
	if got := <-obs; got != want {
		t.Fatalf("observed %+v after Proclaim, want %+v", got, want)
	}

	elected := make(chan *Leadership, 1)
	go func() {
		lb, err := eb.Campaign(ctx, "host-b", 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		elected <- lb
	}()
	select {
	case <-elected:
		t.Fatal("a second leader was elected while the first leads")
	case <-time.After(100 * time.Millisecond): // a window for a wrong election to show; not synchronisation
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("Done is open after Resign")
	}
	if err := la.Err(); !errors.Is(err, ErrReleased) {
		t.Errorf("Err after Resign: %v, want ErrReleased", err)
	}
	if err := la.Resign(ctx); !errors.Is(err, ErrReleased) {
		t.Errorf("second Resign: %v, want ErrReleased", err)
	}
	if err := la.Proclaim(ctx, "late"); !errors.Is(err, ErrReleased) {
		t.Errorf("Proclaim after Resign: %v, want ErrReleased", err)
	}
	lb := <-elected
	if lb == nil {
		return
	}
	if lb.Term() <= la.Term() {
		t.Fatalf("term %d after %d", lb.Term(), la.Term())
	}
	for got := range obs { // the observer may or may not have seen the gap between the two
		if got.ID == lb.ID() {
			if got.Value != "host-b" || got.Term != lb.Term() {
				t.Errorf("observed %+v for the second leader", got)
			}
			break
		}
		if got.ID != "" {
			t.Fatalf("observed %+v, want the second leader or none", got)
		}
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ea.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Leader after both resigned: %v", err)
	}
}

// syncClock is a Clock that a test moves forward, safe for the renewer's goroutine.
type syncClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *syncClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *syncClock) jump(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// TestLeadershipDoneAfterPause: a leader whose process was paused past the cancel point
// (the clock jumps) finds Done closed, and Err matching ErrLockLost, at its first call after
// the pause, before any renewal could run.
func TestLeadershipDoneAfterPause(t *testing.T) {
	_, clients := miniNodes(t, 3)
	clk := &syncClock{}
	c := newTestClient(t, clients, WithClock(clk))
	ctx := ctxT(t, 10*time.Second)
	ld, err := c.Election("paused").Campaign(ctx, "v", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ld.Done():
		t.Fatal("Done closed at once")
	default:
	}
	clk.jump(55 * time.Second) // past Until − a tenth of the TTL
	select {
	case <-ld.Done():
	default:
		t.Fatal("Done still open after a pause past the cancel point")
	}
	var lost *LockLostError
	if err := ld.Err(); !errors.Is(err, ErrLockLost) || !errors.As(err, &lost) || lost.Late != LateRenewerLate {
		t.Errorf("Err after the pause: %v, want a LockLostError (LateRenewerLate)", err)
	}
	if err := ld.Proclaim(ctx, "after"); !errors.Is(err, ErrLockLost) {
		t.Errorf("Proclaim after the pause: %v, want ErrLockLost", err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Errorf("Resign after the loss: %v", err)
	}
}

// TestElectionDo: Do runs fn while leading and resigns after; a second Do waits for it; a
// Client closed while it leads ends the leadership (Done closes) and Close returns.
func TestElectionDo(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithRetryDelay(20*time.Millisecond))
	ctx := ctxT(t, 20*time.Second)
	e := c.Election("do")
	var terms []Token
	for range 3 {
		err := e.Do(ctx, "me", time.Second, func(ctx context.Context, l *Leadership) error {
			if info, err := e.Leader(ctx); err != nil || info.Term != l.Term() {
				t.Errorf("Leader inside Do: %+v, %v", info, err)
			}
			terms = append(terms, l.Term())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Errorf("terms %v not increasing", terms)
		}
	}
	boom := errors.New("boom")
	if err := e.Do(ctx, "me", time.Second, func(context.Context, *Leadership) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Do's error: %v, want fn's", err)
	}

	ld, err := e.Campaign(ctx, "closing", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	testutil.WaitFor(t, 5*time.Second, "Done to close", func() bool {
		select {
		case <-ld.Done():
			return true
		default:
			return false
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := ld.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err after Close: %v, want ErrClosed", err)
	}
}

// TestElectionRefusals: what the newcomer review found. Lock keys and names may not start
// with the derived keys' prefixes (a caller's lock on an election's record would be
// overwritten by the leader), while Status still reads a derived key; Leader fails, rather
// than reporting no leader, when fewer than a quorum answer; a Client WithoutFencing cannot
// campaign (the term is the token); a Campaign under its own leadership's context is refused
// instead of waiting for itself.
func TestElectionRefusals(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	e := c.Election("sched")
	for _, k := range []string{"redlock:leader:{sched}", e.Key(), "redlock:permit:0:{x}", "redlock:rw:{x}", "redlock:readers:{x}", "redlock:intent:{x}"} {
		if _, err := c.TryAcquire(ctx, k, time.Second); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "reserved prefix") {
			t.Errorf("TryAcquire(%q): %v, want ErrInvalidArgument", k, err)
		}
	}
	for _, name := range []string{SemaphorePrefix + "0:{a}b", ElectionPrefix + "x", LeaderPrefix + "x"} {
		if _, err := c.Semaphore(name, 2).TryAcquire(ctx, time.Second); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Semaphore(%q): %v, want ErrInvalidArgument", name, err)
		}
		if _, err := c.Election(name).Leader(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Election(%q): %v, want ErrInvalidArgument", name, err)
		}
		if _, err := c.RWLock(name).TryAcquireRead(ctx, time.Second); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("RWLock(%q): %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := c.Status(ctx, e.Key()); err != nil {
		t.Errorf("Status of the election's key: %v", err)
	}

	nf := newTestClient(t, clients, WithoutFencing())
	if _, err := nf.Election("sched").Campaign(ctx, "v", time.Second); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "WithoutFencing") {
		t.Errorf("Campaign WithoutFencing: %v, want ErrInvalidArgument", err)
	}

	err := e.Do(ctx, "v", time.Second, func(ctx context.Context, l *Leadership) error {
		_, err := e.Campaign(ctx, "again", time.Second)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Campaign under its own leadership: %v, want ErrInvalidArgument", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	ld, err := e.Campaign(ctx, "v", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	servers[1].Close()
	servers[2].Close()
	if _, err := e.Leader(ctx); err == nil || errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "only 1 of 3 nodes answered") {
		t.Errorf("Leader with 2 of 3 nodes down: %v, want an unknown leader, not ErrNoLeader", err)
	}
	_ = ld.Resign(ctx)
}

// TestParseElectionAndRWKeys: election and writer keys of every name shape parse back to
// their names; other keys do not.
func TestParseElectionAndRWKeys(t *testing.T) {
	_, clients := miniNodes(t, 1)
	c := newTestClient(t, clients)
	for _, name := range slotKeyShapes {
		if e := c.Election(name); e.err == nil {
			if n, ok := ParseElectionKey(e.Key()); !ok || n != name {
				t.Errorf("ParseElectionKey(%q) = %q, %v; want %q", quoteKey(e.Key()), quoteKey(n), ok, quoteKey(name))
			}
		}
		if rw := c.RWLock(name); rw.err == nil {
			if n, ok := ParseRWKey(rw.Key()); !ok || n != name {
				t.Errorf("ParseRWKey(%q) = %q, %v; want %q", quoteKey(rw.Key()), quoteKey(n), ok, quoteKey(name))
			}
			if n, ok := ParseReadersKey(rw.ReadersKey()); !ok || n != name {
				t.Errorf("ParseReadersKey(%q) = %q, %v; want %q", quoteKey(rw.ReadersKey()), quoteKey(n), ok, quoteKey(name))
			}
			if _, ok := ParseRWKey(rw.ReadersKey()); ok {
				t.Errorf("ParseRWKey parsed the readers key %q", quoteKey(rw.ReadersKey()))
			}
		}
	}
	for _, k := range []string{"orders:42", ElectionPrefix, RWPrefix + "x", ElectionPrefix + "{a}x", LeaderPrefix + "{a}"} {
		if _, ok := ParseElectionKey(k); ok && k != ElectionPrefix+"{a}x" {
			t.Errorf("ParseElectionKey(%q) parsed", k)
		}
	}
	if _, ok := ParseRWKey(RWPrefix + "x"); ok {
		t.Errorf("ParseRWKey of a key no name makes parsed")
	}
	for _, k := range []string{ReadersPrefix + "x", RWPrefix + "{x}", "orders:42", ReadersPrefix} {
		if _, ok := ParseReadersKey(k); ok {
			t.Errorf("ParseReadersKey(%q) parsed", k)
		}
	}
}
