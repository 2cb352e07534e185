package main

// Tests of status --rwlock and status --election on embedded nodes, in-process.

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// embeddedNodes starts n embedded nodes for the test and returns them with their URLs for
// --nodes.
func embeddedNodes(t *testing.T, n int) (*embedded.Nodes, string) {
	t.Helper()
	en, err := embedded.Start(n, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(en.Close)
	return en, strings.Join(en.URLs(), ",")
}

// directClient is a library Client on addrs, closed with its go-redis clients when the test
// ends.
func directClient(t *testing.T, addrs []string) *redlock.Client {
	t.Helper()
	var clients []redis.UniversalClient
	for _, a := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = rc.Close() })
		clients = append(clients, rc)
	}
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// namedStatusJSON runs status with args and --json in-process, wants exit code want, and
// decodes stdout, which must have no field that T lacks.
func namedStatusJSON[T any](t *testing.T, want int, args ...string) T {
	t.Helper()
	code, out, errOut := cli(t, nil, append([]string{"status", "--json"}, args...)...)
	if code != want {
		t.Fatalf("status --json %v: exit %d, want %d; stderr %q", args, code, want, errOut)
	}
	var doc T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("status --json %v: %v\n%s", args, err, out)
	}
	return doc
}

// TestStatusRWLock: status --rwlock shows readers by id with the summary "held for reading",
// a refused writer's intent, then a writer as "held for writing", as a table and as JSON;
// one node down is shown and does not change the answer, two are exit status 1.
func TestStatusRWLock(t *testing.T) {
	en, nodes := embeddedNodes(t, 3)
	c, other := directClient(t, en.Addrs()), directClient(t, en.Addrs())
	ctx := t.Context()
	rw := c.RWLock("ledger")

	doc := namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	if doc.RWLock != "ledger" || doc.State != "free" || len(doc.Readers) != 0 || doc.ReadersAnswered != 3 || doc.Writer.Key != rw.Key() || len(doc.Nodes) != 3 {
		t.Fatalf("a fresh lock: %+v", doc)
	}
	// Nodes that cannot read their readers (a string where the set should be, so that ZRANGE
	// fails as for an ACL user without it): with fewer than a quorum left, the state is
	// unknown, though every node answered.
	readers := redlock.ReadersPrefix + strings.TrimPrefix(rw.Key(), redlock.RWPrefix)
	for _, s := range en.Servers()[:2] {
		s.Set(readers, "not a set")
	}
	code, out, errOut := cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	if code != 0 || !strings.Contains(out, "unknown: only 1 of 3 nodes reported their readers") {
		t.Errorf("readers unreadable on 2 of 3 nodes: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	doc = namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	if doc.State != "unknown" || doc.ReadersAnswered != 1 || doc.Nodes[0].Readers != -1 || !doc.Nodes[0].Answered {
		t.Errorf("--json, readers unreadable on 2 of 3 nodes: %+v", doc)
	}
	for _, s := range en.Servers()[:2] {
		s.Del(readers)
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
	// An acquire returns once a quorum granted it; the last node's grant may still be on its
	// way. The checks below want both places on every node.
	testutil.WaitFor(t, 10*time.Second, "both readers' places on every node", func() bool {
		for _, s := range en.Servers() {
			if m, err := s.ZMembers(readers); err != nil || len(m) != 2 {
				return false
			}
		}
		return true
	})
	if _, err := other.RWLock("ledger").TryAcquireWrite(ctx, time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a writer while readers hold: %v, want ErrNotAcquired", err)
	}
	// The refused writer's intent lives a few retry delays, which a busy machine can spend
	// before status reads it: the test writes one of its own that lasts. Its key is the
	// writer key's, with the intent's prefix.
	intent := redlock.IntentPrefix + strings.TrimPrefix(rw.Key(), redlock.RWPrefix)
	const waiting = "c0ffee00c0ffee00c0ffee00c0ffee00"
	for _, s := range en.Servers() {
		s.Set(intent, waiting)
		s.SetTTL(intent, time.Minute)
	}
	code, out, errOut = cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`read/write lock "ledger", writer key "` + rw.Key() + `", on 3 nodes, quorum 2`,
		"writer: no holder on any of the 3 nodes that answered", "held for reading by 2 readers", r1.ID()[:8], r2.ID()[:8],
		"a writer waits: the intent of client c0ffee00 is on 3 of 3 nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	doc = namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	wantReaders := slices.Sorted(slices.Values([]string{r1.ID(), r2.ID()}))
	if doc.State != "read" || !slices.Equal(doc.Readers, wantReaders) {
		t.Errorf("--json with two readers: state %q, readers %v; want read, %v", doc.State, doc.Readers, wantReaders)
	}
	for _, nd := range doc.Nodes {
		if !nd.Answered || nd.Readers != 2 || len(nd.Places) != 2 || nd.Intent != waiting || nd.IntentTTLMillis <= 50_000 {
			t.Errorf("--json node %d: %+v, want 2 readers and an intent", nd.Node, nd)
		}
	}
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A release returns once a quorum has it; the last node's may still be on its way, and
	// a writer that came before it would be refused there.
	testutil.WaitFor(t, 10*time.Second, "the readers' places gone from every node", func() bool {
		for _, s := range en.Servers() {
			if s.Exists(readers) {
				return false
			}
		}
		return true
	})
	for _, s := range en.Servers() {
		s.Del(intent)
	}

	w, err := other.RWLock("ledger").TryAcquireWrite(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	testutil.WaitFor(t, 10*time.Second, "the writer's key on every node", func() bool {
		for _, s := range en.Servers() {
			if v, err := s.Get(rw.Key()); err != nil || v != w.ID() {
				return false
			}
		}
		return true
	})
	en.Servers()[2].SetError("ERR down")
	code, out, errOut = cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	if code != 0 || !strings.Contains(out, "held for writing by "+w.ID()[:8]+" on 2 of 3 nodes") || !strings.Contains(out, "ERR down") {
		t.Errorf("a writer, one node down: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	doc = namedStatusJSON[rwDoc](t, 0, "--nodes", nodes, "--rwlock", "ledger")
	if doc.State != "write" || doc.Writer.Holder != w.ID() || doc.Nodes[2].Answered || doc.Nodes[2].Readers != -1 || doc.Nodes[2].Error == "" {
		t.Errorf("--json, a writer and one node down: %+v", doc)
	}
	en.Servers()[1].SetError("ERR down")
	code, out, errOut = cli(t, nil, "status", "--rwlock", "--nodes", nodes, "ledger")
	requireOneLineError(t, code, errOut, exitFail, `only 1 of 3 nodes answered, quorum is 2: the state of read/write lock "ledger" is unknown`)
	if !strings.Contains(out, "unknown: only 1 of 3 nodes answered") {
		t.Errorf("two nodes down: the table's summary:\n%s", out)
	}
	en.Servers()[1].SetError("")
	en.Servers()[2].SetError("")
}

// TestStatusElection: status --election shows the election's key as a lock key and the
// leader, "none" before a campaign and the term, value and holder after, as a table and as
// JSON; with too few nodes it is exit status 1.
func TestStatusElection(t *testing.T) {
	en, nodes := embeddedNodes(t, 3)
	c := directClient(t, en.Addrs())
	ctx := t.Context()
	el := c.Election("sched")

	code, out, errOut := cli(t, nil, "status", "--election", "--nodes", nodes, "sched")
	if code != 0 || !strings.Contains(out, "leader: none") || !strings.Contains(out, "free: no holder on any of the 3 nodes") {
		t.Errorf("no leader: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	doc := namedStatusJSON[electionDoc](t, 0, "--nodes", nodes, "--election", "sched")
	if doc.Election != "sched" || doc.Leader || !doc.LeaderKnown || doc.Term != 0 || doc.Lock.Key != el.Key() || doc.Lock.State != "free" {
		t.Errorf("--json, no leader: %+v", doc)
	}

	ld, err := el.Campaign(ctx, "host-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	code, out, errOut = cli(t, nil, "status", "--election", "--nodes", nodes, "sched")
	for _, want := range []string{`election "sched", key "` + el.Key() + `", on 3 nodes, quorum 2`, "held by " + ld.ID()[:8] + " on 3 of 3 nodes",
		"leader: term " + ld.Term().String() + `, value "host-a", holder ` + ld.ID()[:8]} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("a leader: exit %d, stderr %q; table lacks %q:\n%s", code, errOut, want, out)
		}
	}
	doc = namedStatusJSON[electionDoc](t, 0, "--nodes", nodes, "--election", "sched")
	if !doc.Leader || !doc.LeaderKnown || doc.Term != uint64(ld.Term()) || doc.Value != "host-a" || doc.ID != ld.ID() ||
		doc.Lock.Holder != ld.ID() || doc.Lock.State != "held" {
		t.Errorf("--json, a leader: %+v", doc)
	}

	for _, s := range en.Servers()[1:] {
		s.SetError("ERR down")
	}
	code, out, errOut = cli(t, nil, "status", "--election", "--nodes", nodes, "sched")
	requireOneLineError(t, code, errOut, exitFail, `only 1 of 3 nodes answered, quorum is 2: the state of election "sched" is unknown`)
	if !strings.Contains(out, "leader: unknown: ") {
		t.Errorf("two nodes down: the table:\n%s", out)
	}
	doc = namedStatusJSON[electionDoc](t, exitFail, "--nodes", nodes, "--election", "sched")
	if doc.Leader || doc.LeaderKnown || doc.LeaderError == "" {
		t.Errorf("--json, two nodes down: %+v", doc)
	}
	for _, s := range en.Servers()[1:] {
		s.SetError("")
	}
}

// TestDescribeRWOneReader: one reader reads "1 reader", not "1 readers".
func TestDescribeRWOneReader(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	st := &redlock.RWStatus{Name: "x", Quorum: 2, Readers: []string{id}, ReadersAnswered: 3,
		Writer: &redlock.Status{Quorum: 2, Nodes: []redlock.NodeStatus{{}, {}, {}}}, Nodes: make([]redlock.RWNodeStatus, 3)}
	if got := describeRW(st); !strings.HasPrefix(got, "held for reading by 1 reader ("+id[:8]+"): it has an unexpired place") {
		t.Errorf("describeRW: %q", got)
	}
}
