package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestRealStatusSemaphore: status --permits shows a semaphore's permits by name, one row
// each, with the holders of the held ones, as a table and as JSON; bad --permits is a usage
// error.
func TestRealStatusSemaphore(t *testing.T) {
	cluster, nodes := startCluster(t, 3)
	c := libClient(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := c.Semaphore("bank-api", 3)
	a, err := s.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := cli(t, nil, "status", "--nodes", nodes, "--permits", "3", "bank-api")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`semaphore "bank-api", 3 permits, quorum 2`, "2 of 3 permits held", a.ID()[:8], b.ID()[:8], "free"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "held"); n != 3 { // two rows and the summary
		t.Errorf("%d mentions of held, want 3:\n%s", n, out)
	}

	code, out, errOut = cli(t, nil, "status", "--nodes", nodes, "--permits", "3", "--json", "bank-api")
	if code != 0 {
		t.Fatalf("--json: exit %d, stderr %q", code, errOut)
	}
	var doc semaphoreDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if doc.Semaphore != "bank-api" || doc.Permits != 3 || doc.Held != 2 || len(doc.Permit) != 3 {
		t.Fatalf("--json: %+v", doc)
	}
	holders := map[string]string{}
	for i, p := range doc.Permit {
		if p.Key != s.PermitKey(i) {
			t.Errorf("permit %d: key %q, want %q", i, p.Key, s.PermitKey(i))
		}
		holders[p.Key] = p.Holder
	}
	if holders[a.Key()] != a.ID() || holders[b.Key()] != b.ID() {
		t.Errorf("--json holders %v", holders)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--nodes", nodes, "--permits", "-1", "x"}, "--permits -1"},
		{[]string{"status", "--nodes", nodes, "--permits", "65", "x"}, "want 1 to 64"},
		{[]string{"status", "--nodes", nodes, "--permits", "2", redlock.FencePrefix + "x"}, "bad semaphore"},
	} {
		code, out, errOut := cli(t, nil, tc.args...)
		requireOneLineError(t, code, errOut, exitUsage, tc.want)
		if out != "" {
			t.Errorf("%v: stdout %q", tc.args, out)
		}
	}

	// A node down: the table still shows the permits (2 of 3 nodes answered) and names the
	// node that did not answer, once, with its failure.
	if err := cluster.Nodes()[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, nil, "status", "--nodes", nodes, "--permits", "3", "bank-api")
	want := "node 2 (" + cluster.Addrs()[2] + ") did not answer for permit 0: "
	if code != 0 || strings.Count(out, want) != 1 || strings.Count(out, "did not answer") != 1 || !strings.Contains(out, "2 of 3 permits held") {
		t.Errorf("one node down: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

// TestRealTopShowsSemaphores: top lists a semaphore's held permits by the semaphore's name
// and the permit's number, in the table and in --json; and an election's leader and a
// read/write lock's writer by their names in the table.
func TestRealTopShowsSemaphores(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 3)
	c := libClient(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := c.Semaphore("bank-api", 4)
	held := map[string]*redlock.Lock{}
	for range 2 {
		l, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held[l.Key()] = l
	}
	ld, err := c.Election("sched").Campaign(ctx, "host-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	w, err := c.RWLock("ledger").TryAcquireWrite(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	doc, _ := topJSON(t, 0, "--nodes", nodes)
	found := 0
	for _, ld := range doc.Locks {
		l := held[ld.Key]
		if l == nil {
			continue
		}
		found++
		_, want, _ := redlock.ParsePermitKey(l.Key())
		if ld.Semaphore != "bank-api" || ld.Permit == nil || *ld.Permit != want || ld.Holder != l.ID() {
			t.Errorf("top --json for %q: semaphore %q, permit %v, holder %q", ld.Key, ld.Semaphore, ld.Permit, ld.Holder)
		}
	}
	if found != 2 {
		t.Errorf("top --json lists %d of the 2 held permits: %v", found, locksOf(doc))
	}
	code, out, errOut := runBin(t, nil, "top", "--once", "--nodes", nodes)
	if code != 0 {
		t.Fatalf("top: exit %d, stderr %q", code, errOut)
	}
	for label, id := range map[string]string{`election "sched"`: ld.ID(), `rwlock "ledger" writer`: w.ID()} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool { return strings.Contains(line, label) && strings.Contains(line, id[:8]) }) {
			t.Errorf("no table row %s with holder %s:\n%s", label, id[:8], out)
		}
	}
	for k, l := range held {
		_, i, _ := redlock.ParsePermitKey(k)
		row := ""
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `semaphore "bank-api" #`+strconv.Itoa(i)) {
				row = line
			}
		}
		if !strings.Contains(row, l.ID()[:8]) {
			t.Errorf("no table row for permit %d with holder %s:\n%s", i, l.ID()[:8], out)
		}
	}
}

// libClient is a library Client on the cluster's nodes, closed (with its go-redis clients)
// when the test ends.
func libClient(t *testing.T, cluster *redisproc.Cluster) *redlock.Client {
	t.Helper()
	c, err := redlock.New(cluster.ClientsT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
