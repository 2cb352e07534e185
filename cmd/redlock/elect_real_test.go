//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// TestRealElect: two redlock elect processes campaign for one election on 3 real nodes.
// The first leads and runs its command with REDLOCK_TERM and REDLOCK_VALUE; the second waits;
// when the first's command exits it resigns and the second is elected with a larger term.
// Then the leader is killed with SIGKILL: a third candidate is elected once the TTL has run
// out. An observer (--observe --json) prints each leader with its term and value.
func TestRealElect(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	dir := t.TempDir()
	killLeftovers(t, dir)
	obs := startBin(t, nil, "elect", "--observe", "--json", "--nodes", nodes, "sched")
	cmd := func(tag string) []string {
		return []string{"--", "sh", "-c", childScript(`echo "$REDLOCK_TERM $REDLOCK_VALUE $REDLOCK_ELECTION" > "$D/` + tag + `.term"; while [ ! -e "$D/` + tag + `.go" ]; do sleep 0.01; done`), "sh", dir}
	}
	read := func(tag string) (uint64, string) {
		f := strings.Fields(readTrim(filepath.Join(dir, tag+".term")))
		if len(f) != 3 || f[2] != "sched" {
			return 0, ""
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		return n, f[1]
	}
	a := startBin(t, nil, append([]string{"elect", "--nodes", nodes, "--ttl", "2s", "--value", "host-a", "sched"}, cmd("a")...)...)
	testutil.WaitFor(t, 15*time.Second, "a's command", func() bool { n, _ := read("a"); return n > 0 })
	termA, valueA := read("a")
	if valueA != "host-a" {
		t.Fatalf("a's REDLOCK_VALUE %q", valueA)
	}
	testutil.WaitFor(t, 10*time.Second, "the observer to see a", func() bool { return strings.Contains(obs.stdout.String(), `"host-a"`) })
	b := startBin(t, nil, append([]string{"elect", "--nodes", nodes, "--ttl", "2s", "--value", "host-b", "sched"}, cmd("b")...)...)
	if err := os.WriteFile(filepath.Join(dir, "a.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("a: exit %d, stderr %q", code, a.stderr.String())
	}
	testutil.WaitFor(t, 15*time.Second, "b's command", func() bool { n, _ := read("b"); return n > 0 })
	termB, valueB := read("b")
	if termB <= termA || valueB != "host-b" {
		t.Fatalf("b: term %d (a's %d), value %q", termB, termA, valueB)
	}

	testutil.WaitFor(t, 10*time.Second, "the observer to see b", func() bool { return strings.Contains(obs.stdout.String(), `"host-b"`) })
	// b's redlock dies: nothing resigns; c is elected once b's key has expired.
	c := startBin(t, nil, append([]string{"elect", "--nodes", nodes, "--ttl", "2s", "--value", "host-c", "sched"}, cmd("c")...)...)
	testutil.WaitFor(t, 10*time.Second, "c queued on every node", func() bool {
		code, out, _ := runBin(t, nil, "status", "--json", "--nodes", nodes, "redlock:election:{sched}")
		var st statusDoc
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.Waiters < 1 {
				return false
			}
		}
		return true
	})
	killed := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "c's command", func() bool { n, _ := read("c"); return n > 0 })
	took := time.Since(killed)
	termC, _ := read("c")
	if termC <= termB {
		t.Fatalf("c: term %d after b's %d", termC, termB)
	}
	if took > 2*time.Second+time.Second {
		t.Errorf("c elected %v after b was killed, want within the TTL (2s) and a retry pause", took)
	}
	// An observer polls every 50 ms: c leads until its command is told to go.
	testutil.WaitFor(t, 10*time.Second, "the observer to see c", func() bool { return strings.Contains(obs.stdout.String(), `"host-c"`) })
	if err := os.WriteFile(filepath.Join(dir, "c.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("c: exit %d, stderr %q", code, c.stderr.String())
	}

	// The observer saw a, b and c in that order, each with its term and value.
	var seen []observeDoc
	for _, line := range strings.Split(strings.TrimSpace(obs.stdout.String()), "\n") {
		var d observeDoc
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("observer line %q: %v", line, err)
		}
		if d.Leader {
			seen = append(seen, d)
		}
	}
	want := []struct {
		term  uint64
		value string
	}{{termA, "host-a"}, {termB, "host-b"}, {termC, "host-c"}}
	if len(seen) != len(want) {
		t.Fatalf("observer saw %+v, want a, b, c", seen)
	}
	for i, w := range want {
		if seen[i].Term != w.term || seen[i].Value != w.value {
			t.Errorf("observation %d: %+v, want term %d value %q", i, seen[i], w.term, w.value)
		}
	}
	t.Logf("c elected %v after b's SIGKILL (TTL 2s)", took)
	_ = obs.cmd.Process.Signal(syscall.SIGTERM)
	if code := obs.wait(t, 10*time.Second); code != 0 {
		t.Errorf("observer: exit %d after SIGTERM, stderr %q", code, obs.stderr.String())
	}
}

// TestRealVerboseNamesTheToken: with -v, exec says it took its token and how long it waits;
// elect says it won a term and waits until elected (it has no limit without --wait), and
// each shows the command it runs with its arguments told apart.
func TestRealVerboseNamesTheToken(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	for _, tc := range []struct {
		cmd  string
		want []string
		not  string
	}{
		{"exec", []string{"ttl 30s, wait 0s", ", token ", `running sh -c "exit 0"`}, ", term "},
		{"elect", []string{"ttl 30s, waiting until elected", ", term ", `running sh -c "exit 0"`}, ", token "},
	} {
		code, _, errOut := runBin(t, nil, tc.cmd, "-v", "--nodes", nodes, "verbose", "--", "sh", "-c", "exit 0")
		if code != 0 {
			t.Fatalf("%s: exit code %d, stderr %q", tc.cmd, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Fatalf("%s -v: stderr %q lacks %q", tc.cmd, errOut, w)
			}
		}
		if strings.Contains(errOut, tc.not) {
			t.Fatalf("%s -v: stderr %q says %q", tc.cmd, errOut, tc.not)
		}
	}
}
