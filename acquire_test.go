package redlock

// Acquire and TryAcquire on miniredis nodes: the quorum over every up/down mask, dead,
// hung and foreign-held nodes, cancellation, the validity arithmetic's effect, retries.

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/transport"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

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

// TestCancelMidAcquire cancels an acquire while two nodes have granted it and three hang.
// No key may stay behind, on the live nodes or on the hung ones once they answer.
func TestCancelMidAcquire(t *testing.T) {
	servers, live := miniNodes(t, 2)
	clients, hung := withHungNodes(t, live, 3)
	c := newTestClient(t, clients, WithNodeTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(ctx, testKey, time.Minute)
		done <- err
	}()
	// Wait until both live nodes have applied the SET, then cancel.
	testutil.WaitFor(t, 10*time.Second, "the key on nodes 0 and 1", func() bool { return servers[0].Exists(testKey) && servers[1].Exists(testKey) })
	cancel()
	err := <-done
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
	c := newTestClient(t, clients, WithNodeTimeout(time.Minute))
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

// TestUnawaitedNodesSaySo: an acquire that three of five nodes refuse has failed whatever
// the other two answer, so it returns without waiting for them (their node timeout is a
// minute, and they never answer), and its error says of those two that their reply was not
// awaited (errAbandoned), not that they timed out or refused.
func TestUnawaitedNodesSaySo(t *testing.T) {
	servers, live := miniNodes(t, 3)
	for _, s := range servers {
		s.Set(testKey, "someone-else")
	}
	clients, hung := withHungNodes(t, live, 2)
	c := newTestClient(t, clients, WithNodeTimeout(time.Minute))
	start := time.Now()
	_, err := c.TryAcquire(ctxT(t, 30*time.Second), testKey, time.Minute)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("the acquire took %v: it waited for a node it did not need", elapsed)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("got %v, want a *QuorumError matching ErrNotAcquired", err)
	}
	if qe.Nodes == nil || len(qe.Nodes.Errors) != 5 {
		t.Fatalf("got %v, want an entry for each of the five nodes", err)
	}
	for _, e := range qe.Nodes.Errors {
		var ne *NodeError
		if !errors.As(e, &ne) {
			t.Fatalf("entry %v is not a *NodeError", e)
		}
		unawaited := errors.Is(ne, errAbandoned)
		if unawaited != (ne.Node >= 3) || errors.Is(ne, transport.ErrTimeout) {
			t.Fatalf("node %d: %v; want the reply not awaited exactly on the hung nodes 3 and 4", ne.Node, ne.Err)
		}
	}
	if !strings.Contains(err.Error(), "node 4 ("+hung[1].addr()+"): reply not awaited") {
		t.Fatalf("error %q does not say that node 4's reply was not awaited", err)
	}
	for _, h := range hung {
		h.close()
	}
	c.Close()
}

// TestNodeTimeoutBoundsHungMajority: with 3 of 5 nodes hung, the acquire fails at the node
// timeout instead of the go-redis read timeout, or at once when the hung nodes are already
// known to be stalled (New's INFO call to them may have timed out first).
func TestNodeTimeoutBoundsHungMajority(t *testing.T) {
	_, live := miniNodes(t, 2)
	clients, hung := withHungNodes(t, live, 3)
	c := newTestClient(t, clients, WithNodeTimeout(200*time.Millisecond))
	start := time.Now()
	_, err := c.TryAcquire(ctxT(t, time.Minute), testKey, time.Minute)
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
