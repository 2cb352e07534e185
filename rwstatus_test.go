package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRWLockStatus: Status shows a read/write lock's readers with their ids and remaining
// time per node, and those on a quorum; an expired place is left out and left in place; the
// intent of a refused writer names its Client; a held writer shows as Client.Status shows
// a lock key; a node that fails has its error, one whose readers cannot be read (here a
// string where the set should be, so ZRANGE fails as for an ACL user without it) says -1.
func TestRWLockStatus(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	other := newTestClient(t, clients)
	ctx := ctxT(t, 10*time.Second)
	rw := c.RWLock("ledger")

	st, err := rw.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "ledger" || st.Quorum != 2 || st.HeldForWriting() || st.HeldForReading() || st.ReadersAnswered != 3 ||
		st.Writer.Key != rw.Key() || len(st.Nodes) != 3 || st.Writer.NextTokenAtLeast == 0 {
		t.Fatalf("a fresh lock: %+v, writer %+v", st, st.Writer)
	}
	for _, ns := range st.Nodes {
		if ns.Err != nil || ns.Readers != 0 || len(ns.Places) != 0 || ns.Intent != "" {
			t.Fatalf("a fresh lock, node %d: %+v", ns.Node, ns)
		}
	}

	r1, err := rw.TryAcquireRead(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := other.RWLock("ledger").TryAcquireRead(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	settle(other)
	stale := time.Now().Add(-5 * time.Second).UnixMilli() // a place that expired, not yet removed
	if _, err := servers[0].ZAdd(rw.keys.readers, float64(stale), "stale"); err != nil {
		t.Fatal(err)
	}
	// A third reader with a place on one node only: not on a quorum.
	if _, err := servers[1].ZAdd(rw.keys.readers, float64(time.Now().Add(time.Minute).UnixMilli()), "lonely"); err != nil {
		t.Fatal(err)
	}
	if st, err = rw.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values([]string{r1.ID(), r2.ID()})); !slices.Equal(st.Readers, want) || !st.HeldForReading() || st.HeldForWriting() {
		t.Errorf("readers on a quorum %v, want %v", st.Readers, want)
	}
	for i, want := range []int{2, 3, 2} {
		ns := st.Nodes[i]
		if ns.Err != nil || ns.Readers != want || len(ns.Places) != want {
			t.Fatalf("node %d: %d readers, places %v (%v); want %d", i, ns.Readers, ns.Places, ns.Err, want)
		}
		// Soonest to expire first: r1 (10 s) before r2 (20 s), the lonely one (1 min) last.
		if p := ns.Places; p[0].ID != r1.ID() || p[1].ID != r2.ID() || p[0].TTL <= 8*time.Second || p[0].TTL > 10*time.Second ||
			p[1].TTL <= 18*time.Second || p[1].TTL > 20*time.Second {
			t.Errorf("node %d: places %+v, want %s with about 10 s, then %s with about 20 s", i, p, r1.ID(), r2.ID())
		}
	}
	if _, err := servers[0].ZScore(rw.keys.readers, "stale"); err != nil {
		t.Errorf("Status removed the expired place: %v", err)
	}

	// A writer of the other Client is refused and leaves its intent, its Client's id.
	if _, err := other.RWLock("ledger").TryAcquireWrite(ctx, 10*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a writer while readers hold: %v, want ErrNotAcquired", err)
	}
	settle(other)
	servers[2].SetError("ERR down")
	if st, err = rw.Status(ctx); err != nil {
		t.Fatal(err)
	}
	servers[2].SetError("")
	for i, ns := range st.Nodes[:2] {
		if ns.Intent != other.id || ns.IntentTTL <= 0 || ns.IntentTTL > 10*time.Second {
			t.Errorf("node %d: intent %q for %v, want %q with a short TTL", i, ns.Intent, ns.IntentTTL, other.id)
		}
	}
	var ne *NodeError
	if down := st.Nodes[2]; !errors.As(down.Err, &ne) || ne.Node != 2 || down.Readers != -1 || down.Places != nil ||
		!errors.As(st.Writer.Nodes[2].Err, &ne) {
		t.Errorf("the node that failed: %+v, writer %+v", down, st.Writer.Nodes[2])
	}
	if st.ReadersAnswered != 2 || !slices.Contains(st.Readers, r1.ID()) {
		t.Errorf("with a node down: %d answered, readers %v", st.ReadersAnswered, st.Readers)
	}

	for _, r := range []*Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A release returns at a quorum; the writer below needs the third node's release too
	// (node 1 keeps the lonely reader), so both Clients' releases must have reached every node.
	settle(c)
	settle(other)
	w, err := other.RWLock("ledger").TryAcquireWrite(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(other)
	servers[1].Del(rw.keys.readers)
	servers[1].Set(rw.keys.readers, "not a set")
	if st, err = rw.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.HeldForWriting() || st.Writer.Holder != w.ID() || st.Writer.Nodes[0].Counter != w.Token() || st.HeldForReading() {
		t.Errorf("held for writing: writer %+v, readers %v", st.Writer, st.Readers)
	}
	if ns := st.Nodes[1]; ns.Err != nil || ns.Readers != -1 || ns.Places != nil || st.ReadersAnswered != 2 {
		t.Errorf("a node that cannot read its readers: %+v (%d answered), want no error and -1", ns, st.ReadersAnswered)
	}
}

// TestRWLockStatusListsAtMost: a node with more readers than MaxListedReaders counts them all
// and lists the soonest to expire.
func TestRWLockStatusListsAtMost(t *testing.T) {
	servers, clients := miniNodes(t, 1)
	c := newTestClient(t, clients)
	rw := c.RWLock("crowd")
	base := time.Now().Add(time.Minute).UnixMilli()
	for i := range MaxListedReaders + 5 {
		if _, err := servers[0].ZAdd(rw.keys.readers, float64(base+int64(i)), fmt.Sprintf("r%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := rw.Status(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ns := st.Nodes[0]
	if ns.Readers != MaxListedReaders+5 || len(ns.Places) != MaxListedReaders || ns.Places[0].ID != "r0000" ||
		ns.Places[MaxListedReaders-1].ID != fmt.Sprintf("r%04d", MaxListedReaders-1) || len(st.Readers) != MaxListedReaders {
		t.Errorf("%d readers, %d places from %v, %d on a quorum; want %d, %d from r0000", ns.Readers, len(ns.Places),
			ns.Places[:min(1, len(ns.Places))], len(st.Readers), MaxListedReaders+5, MaxListedReaders)
	}
}

// TestRWLockStatusRejects: a bad name or a nil context is ErrInvalidArgument, an ended context
// its error, and a closed Client ErrClosed; none reaches the nodes.
func TestRWLockStatusRejects(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	before := commandCounts(servers)
	var nilCtx context.Context // a nil context, as a careless caller passes it
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"empty name", second(c.RWLock("").Status(t.Context())), ErrInvalidArgument},
		{"reserved name", second(c.RWLock(FencePrefix + "x").Status(t.Context())), ErrInvalidArgument},
		{"nil ctx", second(c.RWLock("ledger").Status(nilCtx)), ErrInvalidArgument},
		{"ended ctx", second(c.RWLock("ledger").Status(ended)), context.Canceled},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if got := commandCounts(servers); !equalInts(got, before) {
		t.Errorf("rejected calls reached the nodes: %v -> %v", before, got)
	}
	_ = c.Close()
	if _, err := c.RWLock("ledger").Status(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
