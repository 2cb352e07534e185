package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRealStatusRWLockAndElection: on redis-server nodes, status --rwlock shows a held
// writer, then, once it released, two readers by id; status --election shows the leader
// with its term and value, and its key held by the leader's holder id.
func TestRealStatusRWLockAndElection(t *testing.T) {
	cluster, nodes := startCluster(t, 3)
	c, other := libClient(t, cluster), libClient(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rw := c.RWLock("ledger")
	w, err := rw.TryAcquireWrite(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	doc := namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	if doc.State != "write" || doc.Writer.Holder != w.ID() || doc.Writer.Key != rw.Key() || len(doc.Readers) != 0 {
		t.Errorf("a writer: state %q, writer %q on %q, readers %v; want write, %s on %q", doc.State, doc.Writer.Holder, doc.Writer.Key, doc.Readers, w.ID(), rw.Key())
	}
	code, out, errOut := cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	if code != 0 || !strings.Contains(out, "held for writing by "+w.ID()[:8]+" on 3 of 3 nodes") {
		t.Errorf("a writer: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}

	r1, err := rw.TryAcquireRead(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Release(ctx)
	r2, err := other.RWLock("ledger").TryAcquireRead(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Release(ctx)
	doc = namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	if want := slices.Sorted(slices.Values([]string{r1.ID(), r2.ID()})); doc.State != "read" || !slices.Equal(doc.Readers, want) || doc.Writer.Holder != "" {
		t.Errorf("two readers: state %q, readers %v, writer %q; want read, %v and none", doc.State, doc.Readers, doc.Writer.Holder, want)
	}
	for _, nd := range doc.Nodes {
		if nd.Readers != 2 || len(nd.Places) != 2 || nd.Places[0].TTLMillis <= 50_000 {
			t.Errorf("two readers, node %d: %+v", nd.Node, nd)
		}
	}
	code, out, errOut = cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	if code != 0 || !strings.Contains(out, "held for reading by 2 readers") || !strings.Contains(out, r1.ID()[:8]) || !strings.Contains(out, r2.ID()[:8]) {
		t.Errorf("two readers: exit %d, stderr %q:\n%s", code, errOut, out)
	}

	ld, err := c.Election("sched").Campaign(ctx, "host-a:8080", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	ed := namedStatusJSON[electionDoc](t, 0, "--nodes", nodes, "--election", "sched")
	if !ed.Leader || ed.Term != uint64(ld.Term()) || ed.Value != "host-a:8080" || ed.ID != ld.ID() || ed.Lock.Holder != ld.ID() ||
		ed.Lock.Nodes[0].Counter != uint64(ld.Term()) {
		t.Errorf("a leader: %+v; want term %v, value host-a:8080, id %s", ed, ld.Term(), ld.ID())
	}
	code, out, errOut = cli(t, nil, "status", "--election", "--nodes", nodes, "sched")
	if want := "leader: term " + ld.Term().String() + `, value "host-a:8080", holder ` + ld.ID()[:8]; code != 0 || !strings.Contains(out, want) {
		t.Errorf("a leader: exit %d, stderr %q; want %q in:\n%s", code, errOut, want, out)
	}
}
