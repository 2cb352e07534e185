package redlock

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumlock/redlock/internal/transport"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

const testKey = "settlement:2026-11-29"

var testFence = slotCounter(testKey) // the default layout's counter of testKey

func TestNewRejectsBadInput(t *testing.T) {
	_, clients := miniNodes(t, 3)
	rc := clients[0].(*redis.Client)
	sameAddr := redis.NewClient(&redis.Options{Addr: rc.Options().Addr, DB: 1})
	defer sameAddr.Close()
	var typedNil *redis.Client
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []Option
	}{
		{"no nodes", nil, nil},
		{"nil node", []redis.UniversalClient{clients[0], nil, clients[2]}, nil},
		{"typed nil node", []redis.UniversalClient{clients[0], typedNil, clients[2]}, nil},
		{"same client twice", []redis.UniversalClient{clients[0], clients[1], clients[0]}, nil},
		{"same address twice", []redis.UniversalClient{clients[0], clients[1], sameAddr}, nil},
		{"nil option", clients, []Option{nil}},
		{"negative drift", clients, []Option{WithDriftFactor(-0.1)}},
		{"drift too large", clients, []Option{WithDriftFactor(0.5)}},
		{"NaN drift", clients, []Option{WithDriftFactor(nanFloat())}},
		{"zero node timeout", clients, []Option{WithNodeTimeout(0)}},
		{"negative retry limit", clients, []Option{WithRetryLimit(-1)}},
		{"unknown counter layout", clients, []Option{WithCounterLayout(CounterLayout(7))}},
		{"zero retry delay", clients, []Option{WithRetryDelay(0)}},
		{"negative amnesia tolerance", clients, []Option{WithAmnesiaTolerance(-1)}},
		{"amnesia tolerance beyond the nodes", clients, []Option{WithAmnesiaTolerance(3)}},
		{"counter TTL too short", clients, []Option{WithCounterIdleTTL(time.Millisecond)}},
		{"counter TTL not whole ms", clients, []Option{WithCounterIdleTTL(time.Hour + time.Microsecond)}},
		{"negative lock delay", clients, []Option{WithLockDelay(-time.Millisecond)}},
		{"lock delay not whole ms", clients, []Option{WithLockDelay(time.Second + time.Microsecond)}},
		{"lock delay of MaxTTL", clients, []Option{WithLockDelay(MaxTTL)}},
		{"nil clock", clients, []Option{WithClock(nil)}},
		{"nil logger", clients, []Option{WithLogger(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.nodes, tc.opts...)
			if !errors.Is(err, ErrInvalidArgument) || c != nil {
				t.Fatalf("New = %v, %v; want nil, ErrInvalidArgument", c, err)
			}
		})
	}
	c, err := New(clients, WithAmnesiaTolerance(1), WithCounterIdleTTL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Quorum() != 3 || c.Nodes() != 3 {
		t.Fatalf("quorum %d of %d, want 3 of 3", c.Quorum(), c.Nodes())
	}
}

func nanFloat() float64 { z := 0.0; return z / z }

// TestBadInputSendsNothing checks that every rejected call leaves every node untouched.
func TestBadInputSendsNothing(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 5*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	before := commandCounts(servers)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context // a nil context, as a careless caller passes it
	for _, tc := range []struct {
		name string
		call func() error
		want []error
	}{
		{"empty key", func() error { _, err := c.TryAcquire(ctx, "", time.Second); return err }, []error{ErrInvalidArgument}},
		{"reserved prefix", func() error { _, err := c.TryAcquire(ctx, FencePrefix+"x", time.Second); return err }, []error{ErrInvalidArgument}},
		{"token key prefix", func() error { _, err := c.TryAcquire(ctx, HighestTokenPrefix+"{q}", time.Second); return err }, []error{ErrInvalidArgument}},
		{"key too long", func() error { _, err := c.TryAcquire(ctx, strings.Repeat("k", MaxKeyLen+1), time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context", func() error { _, err := c.TryAcquire(nilCtx, "k", time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context, Acquire", func() error { _, err := c.Acquire(nilCtx, "k", time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context, Status", func() error { _, err := c.Status(nilCtx, "k"); return err }, []error{ErrInvalidArgument}},
		{"nil context, Do", func() error { return c.Do(nilCtx, "k", time.Second, func(context.Context, *Lock) error { return nil }) }, []error{ErrInvalidArgument}},
		{"nil context, Extend", func() error { return l.Extend(nilCtx, time.Second) }, []error{ErrInvalidArgument}},
		{"nil context, Release", func() error { return l.Release(nilCtx) }, []error{ErrInvalidArgument}},
		{"nil lock, Release", func() error { return (*Lock)(nil).Release(ctx) }, []error{ErrInvalidArgument}},
		{"nil lock, Extend", func() error { return (*Lock)(nil).Extend(ctx, time.Second) }, []error{ErrInvalidArgument}},
		{"zero ttl", func() error { _, err := c.TryAcquire(ctx, "k", 0); return err }, []error{ErrInvalidArgument}},
		{"negative ttl", func() error { _, err := c.Acquire(ctx, "k", -time.Second); return err }, []error{ErrInvalidArgument}},
		{"ttl inside the drift", func() error { _, err := c.TryAcquire(ctx, "k", 2*time.Millisecond); return err }, []error{ErrInvalidArgument}},
		{"ttl overflow", func() error { _, err := c.TryAcquire(ctx, "k", time.Duration(1<<63-1)); return err }, []error{ErrInvalidArgument}},
		{"cancelled context", func() error { _, err := c.TryAcquire(cancelled, "k", time.Second); return err }, []error{ErrNotAcquired, context.Canceled}},
		{"cancelled context, Acquire", func() error { _, err := c.Acquire(cancelled, "k", time.Second); return err }, []error{ErrNotAcquired, context.Canceled}},
		{"cancelled context, Do", func() error {
			return c.Do(cancelled, "k", time.Second, func(context.Context, *Lock) error { return nil })
		}, []error{ErrNotAcquired, context.Canceled}},
		{"extend zero ttl", func() error { return l.Extend(ctx, 0) }, []error{ErrInvalidArgument}},
		{"extend cancelled", func() error { return l.Extend(cancelled, time.Second) }, []error{ErrNotHeld, context.Canceled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("error %v does not match %v", err, w)
				}
			}
		})
	}
	if after := commandCounts(servers); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("commands sent by rejected calls: before %v, after %v", before, after)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireReleaseOnEveryNode(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	var last Token
	for round := range 3 {
		before := time.Now()
		l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
		after := time.Now()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if l.Key() != testKey || l.Token() <= last {
			t.Fatalf("round %d: key %q token %d, want %q and a token above %d", round, l.Key(), l.Token(), testKey, last)
		}
		last = l.Token()
		validity := 10*time.Second - Drift(10*time.Second, DefaultDriftFactor)
		if u := l.Until(); u.Before(before.Add(validity)) || u.After(after.Add(validity)) {
			t.Fatalf("round %d: Until is %v after the call began, want ttl - drift = %v", round, u.Sub(before), validity)
		}
		settle(c) // wait for the nodes that answered after the quorum
		c = newTestClient(t, clients, WithNodeTimeout(2*time.Second))
		for i, s := range servers {
			if got, _ := s.Get(testKey); got != l.id {
				t.Fatalf("round %d: node %d holds %q, want our id", round, i, got)
			}
			if got, _ := s.Get(testFence); got != l.Token().String() {
				t.Fatalf("round %d: node %d counter %q, want %d", round, i, got, l.Token())
			}
			if ttl := s.TTL(testKey); ttl <= 9*time.Second || ttl > 10*time.Second {
				t.Fatalf("round %d: node %d TTL %v", round, i, ttl)
			}
		}
		l.c = c
		if err := l.Release(ctx); err != nil {
			t.Fatalf("round %d: release: %v", round, err)
		}
		c.Close()
		c = newTestClient(t, clients, WithNodeTimeout(2*time.Second))
		for i, s := range servers {
			if s.Exists(testKey) {
				t.Fatalf("round %d: node %d still has the key after release", round, i)
			}
			if !s.Exists(testFence) {
				t.Fatalf("round %d: node %d lost its counter on release", round, i)
			}
		}
		// A second Release sends nothing and says the lock was released already.
		sent := commandCounts(servers)
		if err := l.Release(ctx); !errors.Is(err, ErrReleased) || !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second release: %v, want ErrReleased", err)
		}
		if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("extend after release: %v, want ErrNotHeld", err)
		}
		if now := commandCounts(servers); fmt.Sprint(now) != fmt.Sprint(sent) {
			t.Fatalf("second release sent commands")
		}
	}
}

// TestEveryUpDownMask runs one acquire for each of the 2^5 subsets of live nodes: it succeeds
// exactly when a majority is up, and when it fails no key is left on any live node.
func TestEveryUpDownMask(t *testing.T) {
	for mask := range 1 << 5 {
		up := bits.OnesCount(uint(mask))
		t.Run(fmt.Sprintf("%05b", mask), func(t *testing.T) {
			servers, clients := miniNodes(t, 5)
			for i, s := range servers {
				if mask&(1<<i) == 0 {
					s.SetError("ERR down for the test")
				}
			}
			c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
			l, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, 10*time.Second)
			settle(c)
			if up >= 3 {
				if err != nil {
					t.Fatalf("%d nodes up: %v", up, err)
				}
			} else {
				var qe *QuorumError
				if !errors.Is(err, ErrNotAcquired) || !errors.As(err, &qe) || l != nil {
					t.Fatalf("%d nodes up: got %v, want a *QuorumError matching ErrNotAcquired", up, err)
				}
				if qe.Quorum != 3 || qe.Total != 5 || qe.Agreed > up {
					t.Fatalf("quorum error fields: %+v", qe)
				}
				var ne *NodeError
				if !errors.As(err, &ne) {
					t.Fatalf("no *NodeError in %v", err)
				}
			}
			for i, s := range servers {
				if mask&(1<<i) == 0 {
					continue
				}
				if has := s.Exists(testKey); has != (up >= 3) {
					t.Fatalf("node %d has key = %v with %d nodes up", i, has, up)
				}
			}
		})
	}
}

// TestDeadNodes stops two nodes (connection refused): locks are still granted, and a
// third stop makes the acquire fail at the node timeout at the latest.
func TestDeadNodes(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	servers[0].Close()
	servers[3].Close()
	c := newTestClient(t, clients, WithNodeTimeout(300*time.Millisecond))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatalf("2 of 5 nodes dead: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servers[4].Close()
	_, err = c.TryAcquire(ctx, testKey, 10*time.Second)
	var ne *NodeError
	if !errors.Is(err, ErrNotAcquired) || !errors.As(err, &ne) {
		t.Fatalf("3 of 5 nodes dead: %v", err)
	}
}

// TestForeignHolder puts another holder's key on k nodes. The acquire succeeds exactly when
// 5 − k ≥ 3; the other holder's keys are never touched, and a failed acquire leaves no key.
func TestForeignHolder(t *testing.T) { foreignHolder(t, true) }

// foreignHolder runs the cases of TestForeignHolder with opts; fenced says whether opts
// leave fencing on, which decides what may happen to the fence counter.
func foreignHolder(t *testing.T, fenced bool, opts ...Option) {
	for k := range 6 {
		t.Run(strconv.Itoa(k), func(t *testing.T) {
			servers, clients := miniNodes(t, 5)
			for i := range k {
				servers[i].Set(testKey, "someone-else")
				servers[i].SetTTL(testKey, 5*time.Second)
			}
			c := newTestClient(t, clients, append([]Option{WithNodeTimeout(2 * time.Second)}, opts...)...)
			l, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, 10*time.Second)
			settle(c)
			if (err == nil) != (5-k >= 3) {
				t.Fatalf("k=%d: err %v", k, err)
			}
			if err != nil && !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("k=%d: err %v does not match ErrNotAcquired", k, err)
			}
			for i, s := range servers {
				got, _ := s.Get(testKey)
				switch {
				case i < k && got != "someone-else":
					t.Fatalf("node %d: foreign key became %q", i, got)
				case i >= k && err != nil && got != "":
					t.Fatalf("node %d: key %q left after a failed acquire", i, got)
				case fenced && i < k && s.Exists(testFence):
					t.Fatalf("node %d: counter moved under another holder", i)
				case !fenced && i >= k && err == nil && got != l.ID():
					t.Fatalf("node %d: holds %q, want our id", i, got)
				case !fenced && s.Exists(testFence):
					t.Fatalf("node %d: fence counter created without fencing", i)
				}
			}
		})
	}
}

// TestCountersOutOfSync forces the slow path: the counters disagree so no value is shared by
// a quorum, and the acquire must raise the lagging nodes before it returns a token.
func TestCountersOutOfSync(t *testing.T) {
	for _, counters := range [][]int64{
		{10, 10, 5, 3, 12},
		{100, 7, 7, 1, 50},
		{1, 2, 3, 4, 5},
	} {
		t.Run(fmt.Sprint(counters), func(t *testing.T) {
			servers, clients := miniNodes(t, 5)
			base := aheadOfSeeds() // above the clock, where the slot layout's floor does not reach
			for i, s := range servers {
				counters[i] += base
				s.Set(testFence, strconv.FormatInt(counters[i], 10))
			}
			c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
			ctx := ctxT(t, 5*time.Second)
			l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			settle(c)
			at := 0
			for i, s := range servers {
				got, _ := s.Get(testFence)
				if got == l.Token().String() {
					at++
				}
				if v, _ := strconv.ParseInt(got, 10, 64); v <= counters[i] {
					t.Fatalf("node %d counter %d did not grow from %d", i, v, counters[i])
				}
			}
			if at < c.Quorum() {
				t.Fatalf("token %d held by %d counters, want at least %d", l.Token(), at, c.Quorum())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l2, err := c.TryAcquire(ctx, testKey, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l2.Token() <= l.Token() {
				t.Fatalf("next token %d not above %d", l2.Token(), l.Token())
			}
		})
	}
}

// TestScriptCacheLost checks the EVALSHA fallback: after SCRIPT FLUSH every script still runs.
func TestScriptCacheLost(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 5*time.Second)
	flush := func() {
		for _, rc := range clients {
			if err := rc.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		flush()
		l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		flush()
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		flush()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCancelMidAcquire cancels an acquire while two nodes have granted it and three hang.
// No key may stay behind, on the live nodes or on the hung ones once they answer.
func TestCancelMidAcquire(t *testing.T) {
	servers, live := miniNodes(t, 2)
	clients := append([]redis.UniversalClient(nil), live...)
	var hung []*hungNode
	for range 3 {
		h := startHungNode(t)
		hung = append(hung, h)
		rc := redis.NewClient(&redis.Options{Addr: h.addr()})
		t.Cleanup(func() { rc.Close() })
		clients = append(clients, rc)
	}
	c, err := New(clients, WithNodeTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(ctx, testKey, time.Minute)
		done <- err
	}()
	// Wait until both live nodes have applied the SET, then cancel.
	testutil.WaitFor(t, 10*time.Second, "the key on nodes 0 and 1", func() bool { return servers[0].Exists(testKey) && servers[1].Exists(testKey) })
	cancel()
	err = <-done
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want ErrNotAcquired and context.Canceled", err)
	}
	for _, h := range hung {
		h.close() // the hung calls fail now; their undo follows
	}
	c.Close()
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("live node %d kept the key after a cancelled acquire", i)
		}
	}
}

// TestHungMinorityDoesNotDelay uses go-redis clients with default options (context deadlines
// ignored on reads) and one node that never answers. The node timeout is a minute, so an
// acquire, extend or release that waited for the hung node could not finish in the test.
func TestHungMinorityDoesNotDelay(t *testing.T) {
	_, clients := miniNodes(t, 4)
	h := startHungNode(t)
	rc := redis.NewClient(&redis.Options{Addr: h.addr()})
	t.Cleanup(func() { rc.Close() })
	clients = append(clients, rc)
	c, err := New(clients, WithNodeTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	for range 20 {
		l, err := c.TryAcquire(ctx, testKey, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 20 rounds; the go-redis read timeout alone is 3 s, so waiting even once would show.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("20 acquire/extend/release rounds took %v with one hung node", d)
	}
	h.close()
	c.Close()
}

// TestNodeTimeoutBoundsHungMajority: with 3 of 5 nodes hung, the acquire fails at the node
// timeout instead of the go-redis read timeout, or at once when the hung nodes are already
// known to be stalled (New's INFO call to them may have timed out first).
func TestNodeTimeoutBoundsHungMajority(t *testing.T) {
	_, clients := miniNodes(t, 2)
	var hung []*hungNode
	for range 3 {
		h := startHungNode(t)
		hung = append(hung, h)
		rc := redis.NewClient(&redis.Options{Addr: h.addr()})
		t.Cleanup(func() { rc.Close() })
		clients = append(clients, rc)
	}
	c, err := New(clients, WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.TryAcquire(ctxT(t, time.Minute), testKey, time.Minute)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrNotAcquired) || !(errors.Is(err, transport.ErrTimeout) || errors.Is(err, transport.ErrStalled)) {
		t.Fatalf("got %v, want ErrNotAcquired with per-node timeouts or stalled nodes", err)
	}
	if elapsed < 200*time.Millisecond && !errors.Is(err, transport.ErrStalled) || elapsed > 2500*time.Millisecond {
		t.Fatalf("acquire gave up after %v; the node timeout is 200ms, the read timeout 3s", elapsed)
	}
	for _, h := range hung {
		h.close()
	}
	c.Close()
}

func TestReleaseAndExtendAfterExpiry(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	a, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for _, s := range servers {
		s.FastForward(2 * time.Second)
	}
	if err := a.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend after expiry: %v, want ErrNotHeld", err)
	}
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d: extend re-created an expired key", i)
		}
	}
	b, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after expiry not above %d", b.Token(), a.Token())
	}
	err = a.Release(ctx)
	var qe *QuorumError
	if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || qe.Op != "release" || qe.Agreed != 0 {
		t.Fatalf("release after expiry: %v, want a release *QuorumError matching ErrNotHeld", err)
	}
	if err := a.Extend(ctx, 10*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend over another holder: %v", err)
	}
	settle(c)
	for i, s := range servers {
		if got, _ := s.Get(testKey); got != b.id {
			t.Fatalf("node %d: the stale holder touched the new holder's key (%q)", i, got)
		}
		if ttl := s.TTL(testKey); ttl != 10*time.Second {
			t.Fatalf("node %d: the stale holder changed the new holder's TTL to %v", i, ttl)
		}
	}
}

func TestExtend(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok, until := l.Token(), l.Until()
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l.Token() != tok || !l.Until().After(until.Add(50*time.Second)) {
		t.Fatalf("after extend: token %d (was %d), until +%v", l.Token(), tok, l.Until().Sub(until))
	}
	settle(c)
	for i, s := range servers {
		if ttl := s.TTL(testKey); ttl != time.Minute {
			t.Fatalf("node %d TTL %v after extend, want 1m", i, ttl)
		}
	}
	// Take our key away on three nodes: the extend must fail and Until must stay.
	c = newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	l.c = c
	for _, s := range servers[:3] {
		s.Set(testKey, "someone-else")
	}
	until = l.Until()
	err = l.Extend(ctx, 2*time.Minute)
	var qe *QuorumError
	if !errors.Is(err, ErrNotHeld) || !errors.As(err, &qe) || qe.Agreed > 2 {
		t.Fatalf("extend with 3 foreign keys: %v", err)
	}
	if !l.Until().Equal(until) {
		t.Fatal("Until moved after a failed extend")
	}
}

// TestCounterSeedAndIdleTTL checks that a new counter starts from the client's clock in
// microseconds on every node (one round trip), carries the idle TTL, and that a counter that
// expired comes back above the tokens issued before.
func TestCounterSeedAndIdleTTL(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	fixed := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := &stepClock{now: fixed}
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(clk), WithCounterIdleTTL(time.Hour))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := Token(fixed.UnixMicro()); l.Token() != want {
		t.Fatalf("first token %d, want the clock seed %d", l.Token(), want)
	}
	settle(c)
	for i, s := range servers {
		if ttl := s.TTL(testFence); ttl != time.Hour {
			t.Fatalf("node %d counter TTL %v, want 1h", i, ttl)
		}
	}
	c = newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(clk), WithCounterIdleTTL(time.Hour))
	l.c = c
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Two hours idle: the counters expire on the nodes, and the clock moved on.
	for _, s := range servers {
		s.FastForward(2 * time.Hour)
	}
	clk.now = clk.now.Add(2 * time.Hour)
	l2, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() || l2.Token() != Token(clk.now.UnixMicro()) {
		t.Fatalf("token after counter expiry %d, want the new seed %d above %d", l2.Token(), clk.now.UnixMicro(), l.Token())
	}
	// A lock longer than the idle TTL stretches its counter's TTL to its own.
	l3, err := c.TryAcquire(ctx, "long", 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for i, s := range servers {
		fk := slotCounter("long")
		if ttl := s.TTL(fk); ttl != 3*time.Hour {
			t.Fatalf("node %d: counter TTL %v under a 3h lock with a 1h idle TTL", i, ttl)
		}
	}
	_ = l3.Release(ctx)
	// With an idle TTL of 0 the counter never expires.
	c0 := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithCounterIdleTTL(0))
	if _, err := c0.TryAcquire(ctx, "other", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c0.Close()
	for i, s := range servers {
		fk := slotCounter("other")
		if ttl := s.TTL(fk); ttl != 0 {
			t.Fatalf("node %d: counter TTL %v with idle TTL 0", i, ttl)
		}
	}
}

// stepClock is a Clock that stays where the test puts it.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// TestValidityUsedUp: a clock that jumps past the TTL while the replies come in makes the
// acquire fail even though a quorum agreed, and the keys are undone.
func TestValidityUsedUp(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	clk := &jumpClock{start: time.Now(), jump: time.Minute}
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithClock(clk))
	_, err := c.TryAcquire(ctxT(t, 10*time.Second), testKey, 10*time.Second)
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, errValidityExpired) {
		t.Fatalf("got %v, want ErrNotAcquired for used-up validity", err)
	}
	c.Close()
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d kept the key of an acquire whose validity ran out", i)
		}
	}
}

// jumpClock answers its first reading with start and every later one a jump later.
type jumpClock struct {
	start time.Time
	jump  time.Duration
	n     int
}

func (c *jumpClock) Now() time.Time {
	c.n++
	if c.n == 1 {
		return c.start
	}
	return c.start.Add(c.jump)
}

// TestAcquireRetriesUntilDeadline: Acquire keeps trying while the key is held and, when its
// context ends, returns an error matching ErrNotAcquired, the context's error and the last
// attempt's *QuorumError.
func TestAcquireRetriesUntilDeadline(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	for _, s := range servers {
		s.Set(testKey, "someone-else")
		s.SetTTL(testKey, time.Hour)
	}
	attempts := countAttempts(clients)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryDelay(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, testKey, time.Second)
	var qe *QuorumError
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) {
		t.Fatalf("got %v", err)
	}
	settle(c)
	// Under load the count varies; two attempts prove that Acquire retried.
	if n := attempts.count(); n < 2 {
		t.Fatalf("only %d attempts in 500ms with a 5ms retry delay", n)
	}
	// With a retry limit, Acquire stops after that many attempts.
	c2 := newTestClient(t, clients, WithNodeTimeout(2*time.Second), WithRetryDelay(time.Millisecond), WithRetryLimit(3))
	attempts.reset()
	if _, err := c2.Acquire(ctxT(t, 10*time.Second), testKey, time.Second); !errors.Is(err, ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a retry limit: %v", err)
	}
	settle(c2)
	if got := attempts.count(); got != 3 {
		t.Fatalf("%d attempts with a retry limit of 3", got)
	}
}

func TestClosedClient(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	l, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	if _, err := c.TryAcquire(ctxT(t, time.Second), testKey, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	// Close released the lock it still held.
	if err := l.Release(ctxT(t, time.Second)); !errors.Is(err, ErrReleased) {
		t.Fatalf("release after close: %v, want ErrReleased", err)
	}
}

func TestJitter(t *testing.T) {
	const d = 100 * time.Millisecond
	lo, hi := d, time.Duration(0)
	for range 2000 {
		j := jitter(d)
		lo, hi = min(lo, j), max(hi, j)
		if j < d/2 || j >= 3*d/2 {
			t.Fatalf("jitter %v outside [%v, %v)", j, d/2, 3*d/2)
		}
	}
	if hi-lo < d*9/10 {
		t.Fatalf("jitter spread %v..%v: not random enough to break lockstep", lo, hi)
	}
}

// TestFailedShorterExtendMovesUntilEarlier: an extend to a shorter TTL that only a minority
// confirms still shortens the keys on that minority, so another holder can reach a quorum
// sooner than the old deadline. Until must move down to the shorter deadline (found by the
// chaos lab's simulator, TestSimFailedShorterExtend).
func TestFailedShorterExtendMovesUntilEarlier(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	for _, s := range servers[:3] {
		s.SetError("ERR unavailable")
	}
	before := time.Now()
	if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend with 3 of 5 nodes failing: %v", err)
	}
	if limit := before.Add(time.Second + 100*time.Millisecond); l.Until().After(limit) {
		t.Fatalf("Until still %v ahead after a failed extend to 1s", time.Until(l.Until()))
	}
	// A failed extend to a longer TTL leaves Until where it was.
	until := l.Until()
	if err := l.Extend(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	if !l.Until().Equal(until) {
		t.Fatal("a failed longer extend moved Until")
	}
	for _, s := range servers[:3] {
		s.SetError("")
	}
}
