package main

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
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
	admin := cluster.ClientsT(t)
	w, err := rw.TryAcquireWrite(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// An acquire or release returns once a quorum has it: the checks below wait for the
	// last node's.
	onEveryNode(t, admin, "the writer's key", func(rc redis.UniversalClient) bool { return rc.Get(ctx, rw.Key()).Val() == w.ID() })
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
	onEveryNode(t, admin, "no writer key", func(rc redis.UniversalClient) bool { return rc.Exists(ctx, rw.Key()).Val() == 0 })

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
	onEveryNode(t, admin, "both readers' places", func(rc redis.UniversalClient) bool { return rc.ZCard(ctx, rw.ReadersKey()).Val() == 2 })
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

// TestRealTopShowsReaders: top finds a read/write lock that only readers hold (no writer
// key anywhere) by its readers sets, and shows one readers row for it, right after its
// writer's row when a writer's key is there too: the readers on a quorum, on how many nodes,
// the count on each node, and the "!" mark for a place on one node alone (a reader whose
// acquire is under way or being undone); --json has the same in rwlocks[].
func TestRealTopShowsReaders(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 3)
	c := libClient(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw := c.RWLock("balances")
	var ids []string
	for range 2 {
		r, err := rw.TryAcquireRead(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release(ctx)
		ids = append(ids, r.ID())
	}
	slices.Sort(ids)
	// An acquire returns once a quorum granted it: wait for the last node's grant.
	admin := cluster.ClientsT(t)
	onEveryNode(t, admin, "both readers' places", func(rc redis.UniversalClient) bool { return rc.ZCard(ctx, rw.ReadersKey()).Val() == 2 })
	// A place on node 0 alone, a minute from now on its clock.
	n0 := admin[0]
	now, err := n0.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const lone = "0123456789abcdef0123456789abcdef"
	if err := n0.ZAdd(ctx, rw.ReadersKey(), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: lone}).Err(); err != nil {
		t.Fatal(err)
	}

	doc, _ := topJSON(t, 0, "--nodes", nodes)
	if doc.FoundRW != 1 || len(doc.RWLocks) != 1 {
		t.Fatalf("top --json: %d read/write locks found, %d shown; want the one that readers hold", doc.FoundRW, len(doc.RWLocks))
	}
	got := doc.RWLocks[0]
	if got.RWLock != "balances" || !slices.Equal(got.Readers, ids) || got.ReadersState != "read" || !got.ReadersDisagree ||
		got.ReaderNodes != 3 || got.ReadTTLMillis <= 50_000 || got.Nodes[0].Readers != 3 || got.Nodes[1].Readers != 2 {
		t.Errorf("top --json rwlocks[0] = %+v; want readers %v on 3 nodes, 3 places on node 0, disagreeing, about a minute left", got, ids)
	}

	code, out, errOut := runBin(t, nil, "top", "--once", "--nodes", nodes)
	if code != 0 {
		t.Fatalf("top: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(out, "\n")
	row := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `rwlock "balances" readers`) })
	if row < 0 {
		t.Fatalf("no readers row for \"balances\":\n%s", out)
	}
	if f := strings.Fields(lines[row]); f[0] != "!" || !slices.Contains(f, "2") || !slices.Contains(f, "3/3") || f[len(f)-3] != "3r" || f[len(f)-1] != "2r" {
		t.Errorf("readers row %q: want the ! mark, 2 readers, 3/3 nodes, 3r 2r 2r", lines[row])
	}
	if !strings.Contains(out, "readers of 1 read/write locks shown, of 1 found") {
		t.Errorf("the header does not count the read/write lock:\n%s", out)
	}

	// A lock with a writer's key and readers' places (written here: the lock lets no reader
	// in beside a writer) has its readers row right after its writer row, and the rows are in
	// byte order of the keys.
	audit := c.RWLock("audit")
	w, err := audit.TryAcquireWrite(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	onEveryNode(t, admin, "the writer's key", func(rc redis.UniversalClient) bool { return rc.Get(ctx, audit.Key()).Val() == w.ID() })
	for _, rc := range admin {
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.ZAdd(ctx, audit.ReadersKey(), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: lone}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, out, _ = runBin(t, nil, "top", "--once", "--nodes", nodes)
	lines = strings.Split(out, "\n")
	at := func(label string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, label) })
	}
	writer, readers, other := at(`rwlock "audit" writer`), at(`rwlock "audit" readers`), at(`rwlock "balances" readers`)
	if writer < 0 || readers != writer+1 || other < readers {
		t.Fatalf("want the rows of \"audit\" (writer, then readers) before the readers of \"balances\":\n%s", out)
	}
	if f := strings.Fields(lines[readers]); f[0] != "!" {
		t.Errorf("readers row %q beside a writer on a quorum: want the ! mark", lines[readers])
	}

	// --match with the lock's writer key (the key users know) shows its readers; the name's
	// exact bytes are in rwlock_base64.
	doc, _ = topJSON(t, 0, "--nodes", nodes, "--match", rw.Key())
	if len(doc.RWLocks) != 1 || doc.RWLocks[0].RWLock != "balances" || doc.RWLocks[0].NameBase64 != base64.StdEncoding.EncodeToString([]byte("balances")) {
		t.Errorf("top --json --match %q: rwlocks %+v, want balances alone", rw.Key(), doc.RWLocks)
	}
	// A --limit that the string keys of node 0 use up but one: its scan stops in the readers
	// sets, and the header says so.
	strs, _, err := n0.ScanType(ctx, 0, "", 10000, "string").Result()
	if err != nil {
		t.Fatal(err)
	}
	limit := strconv.Itoa(len(strs) + 1)
	_, out, _ = runBin(t, nil, "top", "--once", "--nodes", nodes, "--limit", limit)
	if !strings.Contains(out, "stopped at --limit "+limit+" keys in the readers sets: read/write locks may be missing") {
		t.Errorf("top --limit %s: no word of the readers sets' scan stopping:\n%s", limit, out)
	}
}

// onEveryNode waits until ok holds on every node: an acquire or release returns once a
// quorum has it, and the last node's call may still be on its way.
func onEveryNode(t *testing.T, admin []redis.UniversalClient, what string, ok func(redis.UniversalClient) bool) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, what+" on every node", func() bool {
		for _, rc := range admin {
			if !ok(rc) {
				return false
			}
		}
		return true
	})
}
