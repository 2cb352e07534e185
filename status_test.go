package redlock

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestStatus(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)

	st, err := c.Status(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if st.HeldByQuorum() || st.NextTokenAtLeast == 0 || len(st.Nodes) != 5 {
		t.Fatalf("fresh key: %+v", st)
	}
	l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	st, err = c.Status(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !st.HeldByQuorum() || st.Holder != l.id {
		t.Fatalf("held: holder %q, want %q", st.Holder, l.id)
	}
	for _, ns := range st.Nodes {
		if ns.Err != nil || ns.Holder != l.id || ns.Counter != l.Token() || ns.TTL <= 9*time.Second {
			t.Fatalf("node %d: %+v", ns.Node, ns)
		}
	}
	// The slot layout's next token is at least one more than the counters and at least the
	// clock, which has moved on since the acquire.
	if st.NextTokenAtLeast <= l.Token() {
		t.Fatalf("next token at least %d, not above the token %d", st.NextTokenAtLeast, l.Token())
	}
	// The bound must hold: the next acquire gets at least that much.
	want := st.NextTokenAtLeast
	_ = l.Release(ctx)
	l2, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() < want {
		t.Fatalf("next token %d below the bound %d", l2.Token(), want)
	}
	settle(c)

	// Counters out of step and one node down: the bound is the third lowest next value
	// among the four known ones minus the unknown node, i.e. the second lowest.
	base := Token(aheadOfSeeds()) // counters above the clock, so that they decide the bound
	for i, v := range []Token{100, 50, 70, 60, 999} {
		servers[i].Set(testFence, (base + v).String())
	}
	servers[4].SetError("ERR down")
	st, err = c.Status(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	var ne *NodeError
	if !errors.As(st.Nodes[4].Err, &ne) || ne.Node != 4 {
		t.Fatalf("down node: %+v", st.Nodes[4])
	}
	if st.NextTokenAtLeast != base+61 {
		t.Fatalf("bound %d, want base + 61 = %d", st.NextTokenAtLeast, base+61)
	}
	servers[4].SetError("")

	if _, err := c.Status(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestStatusAtCounterMax: a node whose counter is at the maximum mints no more tokens, so it
// cannot be part of the next acquire's quorum. Status leaves it out of the bound (before, it
// reported 2^63 for it), and says 0 when fewer than a quorum of nodes can mint; the acquire
// then fails, as the bound says.
func TestStatusAtCounterMax(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)
	base := Token(aheadOfSeeds())
	maxed := Token(math.MaxInt64).String()
	for i, v := range []string{maxed, maxed, (base + 10).String(), (base + 30).String(), (base + 20).String()} {
		servers[i].Set(testFence, v)
	}
	st, err := c.Status(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := base + 31; st.NextTokenAtLeast != want {
		t.Fatalf("two nodes at the maximum: next token at least %d, want %d (the third of the three that can mint)", st.NextTokenAtLeast, want)
	}
	l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() < st.NextTokenAtLeast {
		t.Fatalf("token %d below the bound %d", l.Token(), st.NextTokenAtLeast)
	}
	_ = l.Release(ctx)
	settle(c)
	servers[2].Set(testFence, maxed)
	if st, err = c.Status(ctx, testKey); err != nil || st.NextTokenAtLeast != 0 {
		t.Fatalf("three of five at the maximum: next token at least %d (%v), want 0", st.NextTokenAtLeast, err)
	}
	if _, err := c.TryAcquire(ctx, testKey, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire with three counters at the maximum: %v, want ErrNotAcquired", err)
	}
}

// TestStatusWaiters: Status counts the places in the key's waiter queue on each node, and
// says -1 for a node that cannot tell (here its queue key holds a string, so ZCARD fails).
func TestStatusWaiters(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	q := newQueueKeys(testKey).queue
	for i, n := range []int{2, 0} {
		for j := range n {
			if _, err := servers[i].ZAdd(q, float64(j), fmt.Sprint("member", j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	servers[2].Set(q, "not a queue")
	st, err := c.Status(ctx, testKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{2, 0, -1} {
		if got := st.Nodes[i].Waiters; got != want || st.Nodes[i].Err != nil {
			t.Errorf("node %d: %d waiters (%v), want %d", i, got, st.Nodes[i].Err, want)
		}
	}
}
