//go:build unix

package main

// Tests of redlock exec, with the built binary against real redis-server nodes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"

	"github.com/redis/go-redis/v9"
)

// Every test here runs the built binary against real redis-server nodes. The commands run
// under the lock are small sh scripts that leave files in a test directory ($D); the tests
// synchronise on those files appearing, and on exit codes, with deadlines.

// TestRealExecRaceWaitZero starts two exec processes for one key at the same moment: one runs
// its command, the other exits at once with the not-acquired code. Two simultaneous
// attempts can also split the vote so that neither gets a quorum (Redlock's liveness
// caveat); then both exit with the code and the race is run again.
func TestRealExecRaceWaitZero(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 5)
	script := childScript(`echo "$REDLOCK_TOKEN" > "$D/ran.$$"; while [ ! -e "$D/go" ]; do sleep 0.01; done`)
	for round := range 5 {
		dir := t.TempDir()
		killLeftovers(t, dir)
		key := fmt.Sprintf("race-%d", round)
		ran := func() []string {
			m, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
			return m
		}
		a := startBin(t, nil, "exec", "--nodes", nodes, key, "--", "sh", "-c", script, "sh", dir)
		b := startBin(t, nil, "exec", "--nodes", nodes, key, "--", "sh", "-c", script, "sh", dir)
		testutil.WaitFor(t, 20*time.Second, "one command running and the other redlock gone, or both gone", func() bool {
			return (a.exited() && b.exited()) || (len(ran()) == 1 && (a.exited() || b.exited()))
		})
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		ca, cb := a.wait(t, 20*time.Second), b.wait(t, 20*time.Second)
		if n := len(ran()); n > 1 {
			t.Fatalf("round %d: %d commands ran under one lock", round, n)
		}
		if ca == defaultConflictExitCode && cb == defaultConflictExitCode && len(ran()) == 0 {
			t.Logf("round %d: split vote, both refused (%q, %q); racing again", round, a.stderr.String(), b.stderr.String())
			continue
		}
		winner, loser, wc, lc := a, b, ca, cb
		if cb == 0 {
			winner, loser, wc, lc = b, a, cb, ca
		}
		if wc != 0 || lc != defaultConflictExitCode || len(ran()) != 1 {
			t.Fatalf("round %d: exit codes %d and %d with %d commands run, want 0 and %d with 1; stderr %q and %q",
				round, ca, cb, len(ran()), defaultConflictExitCode, a.stderr.String(), b.stderr.String())
		}
		requireOneLine(t, loser.stderr.String(), `lock "`+key+`" not acquired (--wait 0)`, "held by ")
		if s := winner.stderr.String(); s != "" {
			t.Errorf("the winner wrote on stderr: %q", s)
		}
		if tok := readTrim(ran()[0]); tok == "" {
			t.Error("the command got no REDLOCK_TOKEN")
		}
		return
	}
	t.Fatal("five split votes in a row")
}

// evalshaCalls returns how many EVALSHA commands a node has run: every acquire attempt
// sends one to every node, so its growth shows that a waiting exec keeps trying.
func evalshaCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// TestRealExecWait checks --wait: an exec that is interrupted while waiting exits 128+2 without
// running its command; one that keeps waiting runs its command only after the holder's
// command has finished, with a larger token.
func TestRealExecWait(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 5)
	node0 := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
	defer node0.Close()
	dir := t.TempDir()
	killLeftovers(t, dir)
	const key = "wait"

	holder := startBin(t, nil, "exec", "--nodes", nodes, key, "--", "sh", "-c",
		childScript(`echo "$REDLOCK_TOKEN" > "$D/a.token"; while [ ! -e "$D/go" ]; do sleep 0.01; done; echo done > "$D/a.done"`), "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the holder's command to start", func() bool { return fileExists(filepath.Join(dir, "a.token")) })

	// waitTries starts an exec with --wait and returns once it has been refused twice.
	waitTries := func(marker string) *proc {
		before := evalshaCalls(t, node0)
		p := startBin(t, nil, "exec", "--nodes", nodes, "--wait", "20s", key, "--", "sh", "-c",
			childScript(`if [ -e "$D/a.done" ]; then echo after > "$D/`+marker+`"; else echo overlap > "$D/`+marker+`"; fi; echo "$REDLOCK_TOKEN" > "$D/`+marker+`.token"`), "sh", dir)
		testutil.WaitFor(t, 15*time.Second, "the waiting exec to be refused twice", func() bool {
			return p.exited() || evalshaCalls(t, node0) >= before+2
		})
		if p.exited() {
			t.Fatalf("the waiting exec exited while the lock was held: code %d, stderr %q", p.wait(t, 0), p.stderr.String())
		}
		return p
	}

	interrupted := waitTries("interrupted")
	if err := interrupted.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := interrupted.wait(t, 10*time.Second); code != 128+int(syscall.SIGINT) {
		t.Errorf("exec interrupted while waiting: exit code %d, want %d; stderr %q", code, 128+int(syscall.SIGINT), interrupted.stderr.String())
	}
	requireOneLine(t, interrupted.stderr.String(), `interrupted by SIGINT while waiting for lock "wait"; the command did not run`)
	if fileExists(filepath.Join(dir, "interrupted")) {
		t.Error("the interrupted exec ran its command")
	}

	waiter := waitTries("waiter")
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("holder: exit code %d, stderr %q", code, holder.stderr.String())
	}
	if code := waiter.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("waiter: exit code %d, stderr %q", code, waiter.stderr.String())
	}
	if got := readTrim(filepath.Join(dir, "waiter")); got != "after" {
		t.Errorf("the waiter's command saw the holder's command %q, want it after the holder's end", got)
	}
	a, _ := strconv.ParseUint(readTrim(filepath.Join(dir, "a.token")), 10, 64)
	b, _ := strconv.ParseUint(readTrim(filepath.Join(dir, "waiter.token")), 10, 64)
	if a == 0 || b <= a {
		t.Errorf("tokens: holder %d, waiter %d; want 0 < holder < waiter", a, b)
	}
}

// TestRealExecTokensIncrease runs exec three times in a row on one key: REDLOCK_TOKEN strictly
// increases, REDLOCK_KEY names the key, the command's stdout is redlock's stdout, and the
// nodes' slot counters (the default layout) end at the last token, with no per-key counter.
func TestRealExecTokensIncrease(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 5)
	const key = "tokens"
	var tokens []uint64
	for range 3 {
		code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, key, "--", "sh", "-c", `echo "$REDLOCK_KEY $REDLOCK_TOKEN"`)
		if code != 0 || errOut != "" {
			t.Fatalf("exit code %d, stderr %q", code, errOut)
		}
		k, tok, ok := strings.Cut(strings.TrimSpace(out), " ")
		n, err := strconv.ParseUint(tok, 10, 64)
		if !ok || k != key || err != nil {
			t.Fatalf("command printed %q, want %q and a token", out, key+" <token>")
		}
		tokens = append(tokens, n)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not strictly increase", tokens)
		}
	}
	before := time.Now().UnixMicro()
	doc := statusJSON(t, nodes, key, 0)
	after := time.Now().UnixMicro()
	last := tokens[len(tokens)-1]
	if doc.State != "free" {
		t.Errorf("status after the runs: state %q, want free", doc.State)
	}
	checkNextToken(t, "status after the runs", doc.NextTokenAtLeast, last, before, after)
	// A quorum of nodes has the last token. The others may have an earlier one: a node whose
	// acquire call had not been written when the lock was released never gets it (the release
	// cancels it; design.md §3.7), which a slow dial or a loaded machine can cause.
	withLast := 0
	for _, n := range doc.Nodes {
		if n.KeyCounter != 0 || n.SlotCounter != n.Counter || !slices.Contains(tokens, n.Counter) {
			t.Errorf("node %d: counter %d, slot counter %d, key counter %d; want one of the tokens %v, the same, 0",
				n.Node, n.Counter, n.SlotCounter, n.KeyCounter, tokens)
		}
		if n.Counter == last {
			withLast++
		}
	}
	if withLast < 3 {
		t.Errorf("%d of 5 nodes have the last token %d, want a quorum", withLast, last)
	}
}

// TestRealExecMultiKey: --key (repeated, or a comma list, with KEY) takes one lock over every
// key: the command gets REDLOCK_KEYS and REDLOCK_TOKENS, one per line in the same order, each
// token from its key's slot counter; while one of the keys is held elsewhere, exec reports that
// key and does not run the command, and no key of the set is left taken.
func TestRealExecMultiKey(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 5)
	code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, "--key", "acct:B,acct:C", "acct:A", "--", "sh", "-c",
		`printf '%s\n--\n%s\n--\n%s/%s\n' "$REDLOCK_KEYS" "$REDLOCK_TOKENS" "${REDLOCK_KEY-unset}" "${REDLOCK_TOKEN-unset}"`)
	if code != 0 || errOut != "" {
		t.Fatalf("exit code %d, stderr %q", code, errOut)
	}
	parts := strings.Split(strings.TrimSpace(out), "\n--\n")
	if len(parts) != 3 || parts[0] != "acct:A\nacct:B\nacct:C" || parts[2] != "unset/unset" {
		t.Fatalf("command printed %q", out)
	}
	tokens := strings.Split(parts[1], "\n")
	for i, key := range []string{"acct:A", "acct:B", "acct:C"} {
		before := time.Now().UnixMicro()
		doc := statusJSON(t, nodes, key, 0)
		after := time.Now().UnixMicro()
		n, err := strconv.ParseUint(tokens[i], 10, 64)
		if err != nil || doc.State != "free" {
			t.Errorf("%s: token %q, status %q", key, tokens[i], doc.State)
			continue
		}
		checkNextToken(t, key, doc.NextTokenAtLeast, n, before, after)
		for _, nd := range doc.Nodes {
			// The three keys are in three different hash slots, so each slot counter ends at its
			// key's token.
			if nd.SlotCounter != n || nd.KeyCounter != 0 {
				t.Errorf("%s node %d: slot counter %d, key counter %d; want %d, 0", key, nd.Node, nd.SlotCounter, nd.KeyCounter, n)
			}
		}
	}

	// Hold acct:C alone; the set cannot be taken, and exec names the key that is held.
	dir := t.TempDir()
	killLeftovers(t, dir)
	hold := startBin(t, nil, "exec", "--nodes", nodes, "acct:C", "--", "sh", "-c",
		childScript(`touch "$D/held"; while [ ! -e "$D/go" ]; do sleep 0.01; done`), "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the holder's command to start", func() bool { return fileExists(filepath.Join(dir, "held")) })
	code, out, errOut = runBin(t, nil, "exec", "--nodes", nodes, "--key", "acct:A", "--key", "acct:C", "--", "sh", "-c", "echo ran")
	if code != defaultConflictExitCode || out != "" || !strings.Contains(errOut, `lock ["acct:A" "acct:C"] not acquired`) || !strings.Contains(errOut, `key "acct:C": held by`) {
		t.Fatalf("contended set: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if doc := statusJSON(t, nodes, "acct:A", 0); doc.State != "free" {
		t.Errorf("acct:A after the refused set: %q", doc.State)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := hold.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("holder: exit code %d, stderr %q", code, hold.stderr.String())
	}
}

// TestRealExecWarnsOfEvenNodes: exec (and elect) on an even number of nodes runs the command
// and says on stderr, in one line, that such a majority tolerates no more failed nodes than
// one node fewer would; with an odd number, or with an amnesia tolerance, it says nothing.
func TestRealExecWarnsOfEvenNodes(t *testing.T) {
	t.Parallel()
	_, all := startCluster(t, 3)
	two := strings.Join(strings.Split(all, ",")[:2], ",")
	for _, tc := range []struct {
		cmd   string
		nodes string
		extra []string
		warn  bool
	}{
		{"exec", two, nil, true},
		{"elect", two, nil, true},
		{"exec", two, []string{"--amnesia-tolerance", "1"}, false},
		{"exec", all, nil, false},
	} {
		argv := append(append([]string{tc.cmd, "--nodes", tc.nodes}, tc.extra...), "even", "--", "true")
		code, _, errOut := runBin(t, nil, argv...)
		if code != 0 {
			t.Fatalf("%v: exit code %d, stderr %q", argv, code, errOut)
		}
		want := "redlock: " + tc.cmd + ": warning: 2 nodes, quorum 2: a majority of an even number of nodes tolerates no more failed nodes than one node fewer would (0 here)"
		if got := strings.Contains(errOut, want); got != tc.warn || (!tc.warn && errOut != "") || strings.Count(errOut, "\n") > 1 {
			t.Fatalf("%v: stderr %q, want the warning: %v", argv, errOut, tc.warn)
		}
	}
	// elect --observe (read-only, until SIGTERM) warns the same way, once.
	for _, tc := range []struct {
		nodes string
		warn  bool
	}{{two, true}, {all, false}} {
		obs := startBin(t, nil, "elect", "--observe", "--nodes", tc.nodes, "even")
		testutil.WaitFor(t, 10*time.Second, "the observer's first line", func() bool { return strings.Contains(obs.stdout.String(), "no leader") })
		_ = obs.cmd.Process.Signal(syscall.SIGTERM)
		if code := obs.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("observer on %s: exit %d, stderr %q", tc.nodes, code, obs.stderr.String())
		}
		errOut := obs.stderr.String()
		want := "redlock: elect: warning: 2 nodes, quorum 2: a majority of an even number of nodes"
		if got := strings.Contains(errOut, want); got != tc.warn || (!tc.warn && errOut != "") || strings.Count(errOut, "\n") > 1 {
			t.Fatalf("observer on %s: stderr %q, want the warning: %v", tc.nodes, errOut, tc.warn)
		}
	}
}

// TestRealCounterLayoutFlag: exec --counter-layout key mints consecutive tokens from the key's
// own counter and leaves the slot counter alone; the default, slot, mints from the slot
// counter (and keeps the per-key counter, which now exists, up with it); each layout's tokens
// stay above the other's. status shows the two counters apart, and its --counter-layout says
// for which layout the next token is computed. A bad value is a usage error naming the flag.
func TestRealCounterLayoutFlag(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	const key = "layout"
	run := func(args ...string) uint64 {
		t.Helper()
		argv := append(append([]string{"exec", "--nodes", nodes}, args...), key, "--", "sh", "-c", `echo "$REDLOCK_TOKEN"`)
		code, out, errOut := runBin(t, nil, argv...)
		tok, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if code != 0 || errOut != "" || err != nil {
			t.Fatalf("%v: exit code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		return tok
	}
	// counters checks the counters a run left: a quorum of the nodes (2 of 3) must hold exactly
	// the expected values, and none more. A run returns once a quorum has answered its acquire
	// and its release, so on a busy machine one node may miss a run (a CI run under -race on
	// 2026-12-03 found node 2 one run behind after the second run: its counter was k1).
	counters := func(what string, slot, perKey uint64) {
		t.Helper()
		exact := 0
		var off []string
		for _, n := range statusJSON(t, nodes, key, 0).Nodes {
			got := fmt.Sprintf("node %d: counter %d, slot counter %d, key counter %d", n.Node, n.Counter, n.SlotCounter, n.KeyCounter)
			switch {
			case n.SlotCounter == slot && n.KeyCounter == perKey && n.Counter == max(slot, perKey):
				exact++
			case n.SlotCounter > slot || n.KeyCounter > perKey:
				t.Errorf("%s: %s; want at most %d, %d", what, got, slot, perKey)
			default:
				off = append(off, got)
			}
		}
		if exact < 2 {
			t.Errorf("%s: %d of 3 nodes hold counter %d, slot counter %d, key counter %d; the others: %v",
				what, exact, max(slot, perKey), slot, perKey, off)
		} else if len(off) > 0 {
			t.Logf("%s: a node lags a run behind (a quorum holds the values): %v", what, off)
		}
	}

	k1 := run("--counter-layout", "key")
	k2 := run("--counter-layout", "key")
	if k2 != k1+1 {
		t.Errorf("--counter-layout key: tokens %d then %d, want consecutive", k1, k2)
	}
	counters("after two runs of the key layout", 0, k2)
	if doc := statusJSON(t, nodes, key, 0, "--counter-layout", "key"); doc.NextTokenAtLeast != k2+1 {
		t.Errorf("status --counter-layout key: next token %d, want %d", doc.NextTokenAtLeast, k2+1)
	}
	before := time.Now().UnixMicro()
	doc := statusJSON(t, nodes, key, 0)
	checkNextToken(t, "status (slot layout)", doc.NextTokenAtLeast, k2, before, time.Now().UnixMicro())

	s1 := run() // the default: the slot layout
	if s1 <= k2 {
		t.Errorf("slot layout after key layout: token %d, not above %d", s1, k2)
	}
	counters("after a run of the slot layout", s1, s1)
	if k3 := run("--counter-layout", "key"); k3 != s1+1 {
		t.Errorf("key layout after slot layout: token %d, want %d", k3, s1+1)
	}

	for _, args := range [][]string{
		{"exec", "--nodes", nodes, "--counter-layout", "slots", key, "--", "true"},
		{"status", "--nodes", nodes, "--counter-layout", "", key},
		{"top", "--nodes", nodes, "--counter-layout", "KEY"},
	} {
		code, out, errOut := cli(t, nil, args...)
		requireOneLineError(t, code, errOut, exitUsage, "invalid value "+strconv.Quote(args[4])+" for flag -counter-layout: "+strconv.Quote(args[4])+" is neither slot nor key")
		if out != "" {
			t.Errorf("%v: stdout %q", args, out)
		}
	}
}

// checkNextToken checks a next_token_at_least that status read, for a client of the slot
// layout, between the clock readings before and after (µs; the CLI runs on this machine's
// clock): it is the larger of last+1 and the clock at the read, so within
// [max(last+1, before), max(last+1, after)].
func checkNextToken(t *testing.T, what string, next, last uint64, before, after int64) {
	t.Helper()
	lo, hi := max(last+1, uint64(before)), max(last+1, uint64(after))
	if next < lo || next > hi {
		t.Errorf("%s: next token %d outside [%d, %d] (last token %d, clock read around the status)", what, next, lo, hi, last)
	}
}

// statusJSON runs "status --json" and decodes its output; wantCode is the expected exit code.
func statusJSON(t *testing.T, nodes, key string, wantCode int, args ...string) statusDoc {
	t.Helper()
	code, out, errOut := runBin(t, nil, append([]string{"status", "--json", "--nodes", nodes, key}, args...)...)
	if code != wantCode {
		t.Fatalf("status --json: exit code %d, want %d; stderr %q", code, wantCode, errOut)
	}
	var doc statusDoc
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("status --json output does not decode: %v\n%s", err, out)
	}
	return doc
}

// TestRealExecSignals sends signals to a running exec: they reach the command, redlock exits
// with the command's status, and the lock is free afterwards.
func TestRealExecSignals(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 5)
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		script string
		want   int
		marker string
	}{
		{"SIGTERM trapped by the command", syscall.SIGTERM,
			`trap 'echo TERM > "$D/marker"; exit 42' TERM; touch "$D/started"; while :; do sleep 0.01; done`, 42, "TERM"},
		{"SIGINT kills the command", syscall.SIGINT,
			`touch "$D/started"; while :; do sleep 0.01; done`, 128 + int(syscall.SIGINT), ""},
		{"SIGHUP trapped by the command", syscall.SIGHUP,
			`trap 'echo HUP > "$D/marker"; exit 3' HUP; touch "$D/started"; while :; do sleep 0.01; done`, 3, "HUP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			killLeftovers(t, dir)
			key := "signal-" + strconv.Itoa(int(tc.sig))
			p := startBin(t, nil, "exec", "--nodes", nodes, key, "--", "sh", "-c", childScript(tc.script), "sh", dir)
			testutil.WaitFor(t, 15*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 15*time.Second); code != tc.want {
				t.Fatalf("exit code %d, want %d; stderr %q", code, tc.want, p.stderr.String())
			}
			if s := redlockLines(p.stderr.String()); s != "" {
				t.Errorf("redlock wrote %q on stderr, want nothing: the command's status is the answer", s)
			}
			if got := readTrim(filepath.Join(dir, "marker")); got != tc.marker {
				t.Errorf("the command recorded %q, want %q", got, tc.marker)
			}
			if doc := statusJSON(t, nodes, key, 0); doc.State != "free" || doc.Holder != "" {
				t.Errorf("after exec exited: state %q, holder %q; want the lock free", doc.State, doc.Holder)
			}
			if code, _, errOut := runBin(t, nil, "exec", "--nodes", nodes, key, "--", "true"); code != 0 {
				t.Errorf("a new exec --wait 0 after release: exit code %d, stderr %q", code, errOut)
			}
		})
	}
}

// TestRealExecKeepsIgnoredSignals runs exec as nohup would, with SIGHUP ignored: the command
// inherits the ignored SIGHUP (redlock does not un-ignore it by subscribing to it).
func TestRealExecKeepsIgnoredSignals(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, "nohup", "--", "sh", "-c", `grep '^SigIgn:' /proc/$$/status`)
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, errOut)
	}
	sigIgn := func(out string) uint64 {
		mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(out, "SigIgn:")), 16, 64)
		if err != nil {
			t.Fatalf("SigIgn line %q: %v", out, err)
		}
		return mask
	}
	hup := uint64(1) << (syscall.SIGHUP - 1)
	if sigIgn(out)&hup != 0 {
		t.Fatalf("SIGHUP ignored by the command although nobody ignored it: %q", out)
	}
	// The same through a shell that ignores SIGHUP before it execs redlock.
	code, out, errOut = runProc(t, nil, "sh", "-c", `trap '' HUP; exec "$0" exec --nodes "$1" nohup -- sh -c 'grep "^SigIgn:" /proc/$$/status'`, redlockBin(t), nodes)
	if code != 0 {
		t.Fatalf("under trap '' HUP: exit code %d, stderr %q", code, errOut)
	}
	if sigIgn(out)&hup == 0 {
		t.Errorf("SIGHUP was ignored by redlock's caller but not by the command: %q", out)
	}
}

// TestRealExecStopsLeftovers runs a command that exits while a process it started in the
// background ignores SIGTERM: redlock says so, kills it after --grace, and only then
// releases the lock, with the command's own exit status.
func TestRealExecStopsLeftovers(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	dir := t.TempDir()
	killLeftovers(t, dir)
	script := childScript(`(trap '' TERM; exec sleep 30) & echo $! > "$D/bg"; exit 7`)
	code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, "--ttl", "2s", "--grace", "300ms", "leftovers", "--", "sh", "-c", script, "sh", dir)
	if code != 7 {
		t.Fatalf("exit code %d, want the command's 7; stderr %q", code, errOut)
	}
	requireOneLine(t, errOut, "left processes running in its process group", "SIGKILL in 300ms")
	if out != "" {
		t.Errorf("stdout %q", out)
	}
	pid, err := strconv.Atoi(readTrim(filepath.Join(dir, "bg")))
	if err != nil {
		t.Fatalf("background pid: %v", err)
	}
	if processRuns(pid) {
		t.Errorf("the background process %d still runs after redlock released the lock", pid)
	}
}

// processRuns reports whether pid is a live process (not a zombie).
func processRuns(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestRealExecLockLostWhenMajorityStops stops 3 of 5 nodes while the command runs. No renewal
// can reach a quorum any more, so the command's process group must get SIGTERM at least
// --grace before the lock's keys can expire on the stopped nodes, and be dead (SIGKILL for
// a process that ignores SIGTERM) before that deadline too. redlock then exits with the
// lock-lost code. Not parallel: it measures timing.
func TestRealExecLockLostWhenMajorityStops(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	cluster, nodes := startCluster(t, 5)
	dir := t.TempDir()
	killLeftovers(t, dir)
	const (
		key   = "lost"
		ttl   = 3 * time.Second
		grace = 300 * time.Millisecond
	)
	// The command traps SIGTERM and creates a file when it comes; a background loop in its
	// group ignores SIGTERM and appends to a file every 10 ms until SIGKILL ends it. The
	// files' modification times are the timestamps: shell builtins only, no fork that a
	// busy machine could delay past the SIGKILL.
	script := childScript(`
trap ': > "$D/term"; exit 143' TERM
(trap '' TERM; while :; do echo x >> "$D/alive"; sleep 0.01; done) &
echo "$REDLOCK_TOKEN" > "$D/started"
while :; do sleep 0.01; done`)
	p := startBin(t, nil, "exec", "--nodes", nodes, "--ttl", ttl.String(), "--grace", grace.String(), key, "--", "sh", "-c", script, "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })

	stop := cluster.Nodes()[:3]
	var clients []*redis.Client
	for _, a := range cluster.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		clients = append(clients, c)
	}
	t.Cleanup(func() {
		for _, n := range stop {
			_ = n.Resume()
		}
	})
	// The deadline: nobody else can acquire the lock while a quorum of nodes (3 of 5) still
	// holds our key, so it is the 3rd latest expiry of the key across the nodes, as of the
	// moment the nodes are stopped (later extends all fail: they only reach 2 nodes). One
	// node may lag a renewal behind (its extend was still on the way when a quorum had
	// confirmed); that does not move the deadline.
	//
	// The nodes are stopped right after a quorum got the key's latest write (the acquire or
	// a renewal, one every ttl/3 = 1s), so that no renewal can land between reading the
	// expiries and stopping the nodes.
	var deadline int64 // Unix milliseconds
	var readAt time.Time
	testutil.WaitFor(t, 10*time.Second, "a fresh write of the key on a quorum", func() bool {
		var exps []int64
		for _, c := range clients {
			exp, err := c.Do(t.Context(), "PEXPIRETIME", key).Int64()
			if err != nil {
				return false
			}
			exps = append(exps, exp)
		}
		slices.Sort(exps)
		deadline = exps[len(exps)-3]
		readAt = time.Now()
		return deadline > 0 && readAt.UnixMilli()-(deadline-ttl.Milliseconds()) < 150
	})
	lastWrite := deadline - ttl.Milliseconds()
	for _, n := range stop {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	pausedAt := time.Now()
	if gap := pausedAt.Sub(readAt); gap > 500*time.Millisecond { // renewals come every ttl/3 = 1s
		t.Skipf("the test was descheduled for %v between reading the expiry and stopping the nodes; a renewal may have landed, so the deadline is unknown", gap)
	}

	code := p.wait(t, 20*time.Second)
	if code != defaultLostExitCode {
		t.Fatalf("exit code %d, want the lock-lost code %d; stderr %q", code, defaultLostExitCode, p.stderr.String())
	}
	requireOneLine(t, redlockLines(p.stderr.String()), `lock "lost" lost while the command ran`, "got SIGTERM", "exited with status 143", "SIGKILL")
	termAt, lastAlive := modTime(t, filepath.Join(dir, "term")), modTime(t, filepath.Join(dir, "alive"))
	expiry := time.UnixMilli(deadline)
	t.Logf("stopped 3 nodes %v after the key's last write; SIGTERM %v after that, %v before the keys' expiry; last sign of life %v before it; redlock exited %v after SIGTERM",
		pausedAt.Sub(time.UnixMilli(lastWrite)).Round(time.Millisecond), termAt.Sub(pausedAt).Round(time.Millisecond),
		expiry.Sub(termAt).Round(time.Millisecond), expiry.Sub(lastAlive).Round(time.Millisecond), p.exitAt.Sub(termAt).Round(time.Millisecond))
	if termAt.Before(pausedAt) {
		t.Errorf("SIGTERM came %v before the nodes were stopped", pausedAt.Sub(termAt))
	}
	if !termAt.Add(grace).Before(expiry) {
		t.Errorf("SIGTERM came %v before the keys' expiry on the stopped nodes, want at least --grace %v", expiry.Sub(termAt), grace)
	}
	if !lastAlive.Before(expiry) {
		t.Errorf("a process of the command's group was alive %v after the keys' expiry", lastAlive.Sub(expiry))
	}
	pgids, _ := filepath.Glob(filepath.Join(dir, "pgid.*"))
	for _, f := range pgids {
		if pgid, _ := strconv.Atoi(readTrim(f)); pgid > 0 && groupAlive(pgid) {
			t.Errorf("the command's process group %d still has live processes", pgid)
		}
	}
}

// modTime returns a file's modification time, failing the test if it does not exist.
func modTime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return fi.ModTime()
}

// TestRealStatusMatchesNodes compares status, plain and --json, with what the nodes hold,
// read directly: while exec holds the lock, after it released it, and with nodes down.
func TestRealStatusMatchesNodes(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 5)
	dir := t.TempDir()
	killLeftovers(t, dir)
	const key = "status"
	fence := redlock.FencePrefix + "{" + key + "}" // the per-key counter, which the slot layout does not create
	clients := make([]*redis.Client, 5)
	for i, a := range cluster.Addrs() {
		clients[i] = redis.NewClient(&redis.Options{Addr: a})
		defer clients[i].Close()
	}
	holder := startBin(t, nil, "exec", "--nodes", nodes, "--ttl", "1m", key, "--", "sh", "-c",
		childScript(`echo "$REDLOCK_TOKEN" > "$D/token"; while [ ! -e "$D/go" ]; do sleep 0.01; done`), "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the holder's command to start", func() bool { return readTrim(filepath.Join(dir, "token")) != "" })
	token, _ := strconv.ParseUint(readTrim(filepath.Join(dir, "token")), 10, 64)

	type nodeState struct {
		holder  string
		pttl    time.Duration
		counter uint64 // the node's one slot counter: the only lock on these nodes is key's
		perKey  bool   // the per-key counter exists
	}
	read := func() []nodeState {
		var s []nodeState
		for i, c := range clients {
			h, err := c.Get(t.Context(), key).Result()
			if err != nil && err != redis.Nil {
				t.Fatalf("node %d: GET: %v", i, err)
			}
			pttl, _ := c.PTTL(t.Context(), key).Result()
			slots, err := c.Keys(t.Context(), redlock.SlotCounterPrefix+"*").Result()
			if err != nil || len(slots) > 1 {
				t.Fatalf("node %d: slot counters %q (%v), want at most one", i, slots, err)
			}
			var ctr uint64
			if len(slots) == 1 {
				ctr, _ = c.Get(t.Context(), slots[0]).Uint64()
			}
			n, _ := c.Exists(t.Context(), fence).Result()
			s = append(s, nodeState{h, pttl, ctr, n != 0})
		}
		return s
	}

	// A quorum was enough for the acquire; a slow node may get its key a moment later.
	testutil.WaitFor(t, 10*time.Second, "the key on every node", func() bool {
		for _, s := range read() {
			if s.holder == "" {
				return false
			}
		}
		return true
	})
	// Held. No renewal happens during the test (ttl 1m, renewals every 20s), so every
	// TTL status reports lies between the TTLs read before and after it.
	before := read()
	clockBefore := time.Now().UnixMicro()
	doc := statusJSON(t, nodes, key, 0)
	clockMid := time.Now().UnixMicro()
	code, out, errOut := runBin(t, nil, "status", "--nodes", nodes, key)
	clockAfter := time.Now().UnixMicro()
	after := read()
	if code != 0 || errOut != "" {
		t.Fatalf("status: exit code %d, stderr %q", code, errOut)
	}
	id := before[0].holder
	if id == "" || doc.State != "held" || doc.Holder != id || doc.HolderNodes != 5 || doc.Answered != 5 ||
		doc.Quorum != 3 || doc.Total != 5 || doc.Key != key {
		t.Errorf("status --json summary %+v; want held by %q on 5 of 5, quorum 3", doc, id)
	}
	checkNextToken(t, "status --json while held", doc.NextTokenAtLeast, token, clockBefore, clockMid)
	for i, n := range doc.Nodes {
		b, a := before[i], after[i]
		if n.Node != i || n.Addr != cluster.Addrs()[i] || !n.Answered || n.Error != "" || n.Holder != b.holder || n.Holder != a.holder ||
			n.Counter != b.counter || n.Counter != token || n.SlotCounter != token || n.KeyCounter != 0 || b.perKey || n.Waiters != 0 {
			t.Errorf("node %d: status %+v; nodes hold %q, slot counter %d, per-key counter %v; token %d", i, n, b.holder, b.counter, b.perKey, token)
		}
		if ttl := time.Duration(n.TTLMillis) * time.Millisecond; ttl > b.pttl || ttl < a.pttl-time.Millisecond {
			t.Errorf("node %d: status TTL %v outside [%v, %v] read around it", i, ttl, a.pttl, b.pttl)
		}
	}
	short := id[:8]
	for i, addr := range cluster.Addrs() {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +%s +yes +%s +[0-9.]+m?s +%d +- +0 *$`, i, regexp.QuoteMeta(addr), short, token))
		if !row.MatchString(out) {
			t.Errorf("table lacks a row for node %d (%s) with holder %s, slot counter %d, no key counter, no waiters:\n%s", i, addr, short, token, out)
		}
	}
	if !regexp.MustCompile(`(?m)^node +address +answered +holder +ttl +slot counter +key counter +waiters +error$`).MatchString(out) {
		t.Errorf("table's column titles:\n%s", out)
	}
	for _, want := range []string{`lock "status" on 5 nodes, quorum 3`, "held by " + short + " on 5 of 5 nodes, for about "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`next token: at least (\d+)\n`).FindStringSubmatch(out); m == nil {
		t.Errorf("table lacks the next token:\n%s", out)
	} else {
		next, _ := strconv.ParseUint(m[1], 10, 64)
		checkNextToken(t, "status table while held", next, token, clockMid, clockAfter)
	}

	// Released.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("holder: exit code %d, stderr %q", code, holder.stderr.String())
	}
	clockBefore = time.Now().UnixMicro()
	doc = statusJSON(t, nodes, key, 0)
	clockAfter = time.Now().UnixMicro()
	if doc.State != "free" || doc.Holder != "" || doc.HolderNodes != 0 || doc.TTLMillis != 0 {
		t.Errorf("after release: %+v; want free", doc)
	}
	checkNextToken(t, "after release", doc.NextTokenAtLeast, token, clockBefore, clockAfter)
	for i, s := range read() {
		if s.holder != "" || doc.Nodes[i].Holder != "" || doc.Nodes[i].Counter != s.counter || doc.Nodes[i].SlotCounter != s.counter {
			t.Errorf("node %d after release: status %+v, node holds %q counter %d", i, doc.Nodes[i], s.holder, s.counter)
		}
	}

	// Nodes down: one is tolerated, three are not.
	down := cluster.Nodes()
	if err := down[4].Kill(); err != nil {
		t.Fatal(err)
	}
	doc = statusJSON(t, nodes, key, 0)
	if doc.Answered != 4 || doc.Nodes[4].Answered || doc.Nodes[4].Error == "" || doc.State != "free" {
		t.Errorf("one node down: %+v", doc)
	}
	for _, n := range down[2:4] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runBin(t, nil, "status", "--nodes", nodes, key)
	if code != exitFail {
		t.Errorf("three nodes down: exit code %d, want %d", code, exitFail)
	}
	requireOneLine(t, errOut, "only 2 of 5 nodes answered, quorum is 3", "unknown")
	downRow := regexp.MustCompile(`(?m)^[234] +\S+ +no +- +- +- +\S.*$`)
	if !strings.Contains(out, "unknown: only 2 of 5 nodes answered") || !strings.Contains(out, "next token: unknown") ||
		len(downRow.FindAllString(out, -1)) != 3 {
		t.Errorf("table with three nodes down:\n%s", out)
	}
	doc = statusJSON(t, nodes, key, exitFail)
	if doc.State != "unknown" || doc.Answered != 2 || doc.NextTokenAtLeast != 0 {
		t.Errorf("three nodes down, --json: %+v", doc)
	}
}

// TestRealExecNodesDown checks the failures that involve nodes: a quorum unreachable before
// the attempt is a one-line failure (exit 1), a minority down is no obstacle.
func TestRealExecNodesDown(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 5)
	down := cluster.Nodes()
	if err := down[0].Kill(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, "k", "--", "echo", "ran")
	if code != 0 || out != "ran\n" || errOut != "" {
		t.Errorf("one node of 5 down: exit code %d, stdout %q, stderr %q; want the command to run", code, out, errOut)
	}
	for _, n := range down[1:3] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runBin(t, []string{nodesEnv + "=" + nodes}, "exec", "k", "--", "echo", "ran")
	if code != exitFail || out != "" {
		t.Errorf("three nodes of 5 down: exit code %d, stdout %q; want %d and no command", code, out, exitFail)
	}
	requireOneLine(t, errOut, "only 2 of 5 nodes answered PING, quorum is 3", down[0].Addr())
}

// TestExecCommandLine checks the command-line errors, in-process: each is one line on
// stderr with exit code 2 (usage), 1 (failure) or 126/127 (command), and none contacts a
// node or runs anything.
func TestExecCommandLine(t *testing.T) {
	closed := closedAddr(t)
	noExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodesOK := []string{"exec", "--nodes", "redis://" + closed}
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		code int
		want string
	}{
		{"no dashes", nil, []string{"exec", "k", "true"}, exitUsage, `missing "--" before the command`},
		{"no key", nil, []string{"exec", "--", "true"}, exitUsage, "missing KEY"},
		{"two keys", nil, []string{"exec", "k", "j", "--", "true"}, exitUsage, `unexpected argument "j" before "--"`},
		{"no command", nil, []string{"exec", "k", "--"}, exitUsage, `missing the command after "--"`},
		{"unknown flag", nil, []string{"exec", "--bogus", "k", "--", "true"}, exitUsage, "flag provided but not defined: -bogus"},
		{"bad duration", nil, []string{"exec", "--ttl", "soon", "k", "--", "true"}, exitUsage, "invalid value"},
		{"negative wait", nil, []string{"exec", "--wait", "-1s", "k", "--", "true"}, exitUsage, "--wait -1s is negative"},
		{"zero ttl", nil, []string{"exec", "--ttl", "0", "k", "--", "true"}, exitUsage, "--ttl 0s must be at least 500ms"},
		{"grace too long", nil, []string{"exec", "--ttl", "10s", "--grace", "5s", "k", "--", "true"}, exitUsage,
			"--grace 5s does not fit in --ttl 10s: a lost lock's command gets SIGTERM grace + 1s before the lock's deadline, which must be at most half the ttl; use a --ttl of at least 12.5s"},
		{"grace too long, short ttl", nil, []string{"exec", "--ttl", "1s", "--grace", "300ms", "k", "--", "true"}, exitUsage,
			"SIGTERM grace + 250ms before the lock's deadline, which must be at most half the ttl; use a --ttl of at least 1.1s"},
		{"negative lock delay", nil, []string{"exec", "--lock-delay", "-1s", "k", "--", "true"}, exitUsage, "--lock-delay -1s is negative"},
		{"lock delay not whole ms", nil, []string{"exec", "--lock-delay", "1.5ms", "k", "--", "true"}, exitUsage, "--lock-delay 1.5ms is not a whole number of milliseconds"},
		{"lock delay beyond MaxTTL", nil, []string{"exec", "--ttl", "1h", "--lock-delay", "8760h", "k", "--", "true"}, exitUsage, "--ttl 1h0m0s plus --lock-delay 8760h0m0s exceeds 8760h0m0s"},
		{"negative grace", nil, []string{"exec", "--grace", "-1s", "k", "--", "true"}, exitUsage, "--grace -1s is negative"},
		{"exit code 0", nil, []string{"exec", "--conflict-exit-code", "0", "k", "--", "true"}, exitUsage, "--conflict-exit-code 0 is outside 1..255"},
		{"exit code 256", nil, []string{"exec", "--lost-exit-code", "256", "k", "--", "true"}, exitUsage, "--lost-exit-code 256 is outside 1..255"},
		{"no nodes", nil, []string{"exec", "k", "--", "true"}, exitUsage, "exec: no nodes: pass --nodes"},
		{"bad URL", nil, []string{"exec", "--nodes", "http://x:1", "k", "--", "true"}, exitFail, "--nodes: bad node URL"},
		{"bad env URL", map[string]string{nodesEnv: "redis://a:1,,redis://b:2"}, []string{"exec", "k", "--", "true"}, exitFail, "REDLOCK_NODES: entry 2 of the node list is empty"},
		{"unreachable", nil, append(slices.Clone(nodesOK), "k", "--", "true"), exitFail, "only 0 of 1 nodes answered PING, quorum is 1: node " + closed},
		{"command not found", nil, append(slices.Clone(nodesOK), "k", "--", "no-such-command-xyz"), exitNotFound, `cannot run "no-such-command-xyz": executable file not found`},
		{"command not executable", nil, append(slices.Clone(nodesOK), "k", "--", noExec), exitCannotRun, "permission denied"},
		{"duplicate --key", nil, []string{"exec", "--key", "a,b", "--key", "a", "--", "true"}, exitUsage, `key "a" is given twice`},
		{"empty --key entry", nil, []string{"exec", "--key", "a,,b", "--", "true"}, exitUsage, `an empty key in --key "a,,b"`},
		{"KEY and --key repeat", nil, []string{"exec", "--key", "a", "a", "--", "true"}, exitUsage, `key "a" is given twice`},
		{"newline in --key", nil, []string{"exec", "--key", "a\nb,c", "--", "true"}, exitUsage, `key "a\nb" contains a newline`},
		{"bad amnesia tolerance", nil, append(slices.Clone(nodesOK), "--amnesia-tolerance", "3", "k", "--", "true"), exitUsage, "amnesia"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.vars, tc.args...)
			requireOneLineError(t, code, errOut, tc.code, tc.want)
			if out != "" {
				t.Errorf("stdout %q", out)
			}
		})
	}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePortT(t)))
}

func TestExecHelp(t *testing.T) {
	code, out, errOut := cli(t, nil, "exec", "-h")
	if code != exitOK || errOut != "" {
		t.Fatalf("exec -h: exit code %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"usage: redlock exec [flags] KEY -- CMD [ARGS...]", "REDLOCK_TOKEN", "REDLOCK_KEY",
		"Exit status:", "75 ", "76 ", "126, 127", "-grace DURATION", "-wait DURATION", "-conflict-exit-code", "-lost-exit-code",
		"(default 30s)", "(default 5s, less when --ttl is below 12.5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec -h lacks %q:\n%s", want, out)
		}
	}
}

// TestGraceFits checks the arithmetic of --grace and --ttl: the defaults fit, minTTLFor
// is the shortest ttl that fits, and every ttl that fits leaves renew fraction + cancel
// margin below 1, as redlock.New requires.
func TestGraceFits(t *testing.T) {
	fits := func(grace, ttl time.Duration) bool { return grace+killSafety(ttl) <= ttl/2 }
	if !fits(execDefaultGrace, execDefaultTTL) {
		t.Fatalf("default grace %v + %v does not fit in half the default ttl %v", execDefaultGrace, killSafety(execDefaultTTL), execDefaultTTL)
	}
	for _, tc := range []struct{ grace, safety, minTTL time.Duration }{
		{0, 250 * time.Millisecond, 500 * time.Millisecond},
		{100 * time.Millisecond, 250 * time.Millisecond, 700 * time.Millisecond},
		{time.Second, 250 * time.Millisecond, 2500 * time.Millisecond},
		{5 * time.Second, 1250 * time.Millisecond, 12500 * time.Millisecond},
		{time.Minute, 15 * time.Second, 150 * time.Second},
		// Rounded up to a whole millisecond that fits, never down to one that does not.
		{1, 250 * time.Millisecond, 501 * time.Millisecond},
		{250*time.Millisecond + 200*time.Microsecond, 250 * time.Millisecond, 1001 * time.Millisecond},
		{10*time.Second + 100*time.Microsecond, 2500*time.Millisecond + 100*time.Microsecond, 25001 * time.Millisecond},
		{3504 * time.Hour, 876 * time.Hour, redlock.MaxTTL},
	} {
		t.Run(tc.grace.String(), func(t *testing.T) {
			got, ok := minTTLFor(tc.grace)
			if !ok || got != tc.minTTL || killSafety(got) != tc.safety {
				t.Errorf("minTTLFor(%v) = %v with safety %v, want %v with %v", tc.grace, got, killSafety(got), tc.minTTL, tc.safety)
			}
			if got%time.Millisecond != 0 || !fits(tc.grace, got) || fits(tc.grace, got-time.Millisecond) {
				t.Errorf("minTTLFor(%v) = %v is not the shortest ttl that fits", tc.grace, got)
			}
			for _, ttl := range []time.Duration{got, 2 * got, 100 * got} {
				if m := float64(tc.grace+killSafety(ttl)) / float64(ttl); 1.0/3+m >= 1 {
					t.Errorf("ttl %v: renew fraction 1/3 + cancel margin %v ≥ 1", ttl, m)
				}
			}
		})
	}
}

// TestGraceBeyondAnyTTL: a --grace that no --ttl up to MaxTTL can hold has no shortest ttl,
// and exec says how long a grace can be instead of naming a ttl it would refuse; a --grace
// that does not fit a --ttl that is too short names a ttl it accepts.
func TestGraceBeyondAnyTTL(t *testing.T) {
	for _, g := range []time.Duration{3504*time.Hour + time.Millisecond, 8000 * time.Hour, time.Duration(1<<63 - 1)} {
		if ttl, ok := minTTLFor(g); ok {
			t.Errorf("minTTLFor(%v) = %v, ok; want none", g, ttl)
		}
	}
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	_, err := parseExec(e, []string{"--ttl", "8760h", "--grace", "8000h", "k", "--", "true"})
	if err == nil || !strings.Contains(err.Error(), "--grace can be at most 3504h0m0s, for --ttl 8760h0m0s") {
		t.Fatalf("--grace 8000h: %v", err)
	}
	// --ttl is cut to whole milliseconds before --grace is checked against it, as the lock
	// gets it: 1000.9ms holds no more grace than 1s does.
	if _, err := parseExec(e, []string{"--ttl", "1000.9ms", "--grace", "250.4ms", "k", "--", "true"}); err == nil {
		t.Error("--ttl 1000.9ms --grace 250.4ms accepted; 1s holds at most 250ms")
	}
	if cfg, err := parseExec(e, []string{"--ttl", "1000.9ms", "k", "--", "true"}); err != nil || cfg.ttl != time.Second {
		t.Errorf("--ttl 1000.9ms: %v, %v; want 1s", cfg, err)
	}
	if _, err := parseExec(e, []string{"--ttl", "500ms", "--grace", "1ns", "k", "--", "true"}); err == nil || !strings.Contains(err.Error(), "or --grace 0") {
		t.Errorf("--ttl 500ms --grace 1ns: %v; want it to offer --grace 0", err)
	}
	for _, args := range [][]string{{"--ttl", "500ms", "--grace", "1ns"}, {"--ttl", "1s", "--grace", "250.2ms"}, {"--ttl", "25s", "--grace", "10.0001s"}} {
		_, err := parseExec(e, append(args, "k", "--", "true"))
		if err == nil {
			t.Fatalf("%v accepted", args)
		}
		_, after, ok := strings.Cut(err.Error(), "use a --ttl of at least ")
		ttl, _, _ := strings.Cut(after, ",")
		if !ok {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := parseExec(e, []string{"--ttl", ttl, "--grace", args[3], "k", "--", "true"}); err != nil {
			t.Errorf("%v: the suggested --ttl %s is refused too: %v", args, ttl, err)
		}
	}
}

// TestExecDefaultsCompose: every --ttl that exec accepts works without any other flag (the
// default grace shrinks to fit it), and a TTL too short for any grace is refused, saying so.
func TestExecDefaultsCompose(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	for _, ttl := range []string{"500ms", "501ms", "700ms", "1s", "2500ms", "5s", "10s", "12499ms", "12500ms", "30s", "1h", "8760h"} {
		cfg, err := parseExec(e, []string{"--ttl", ttl, "k", "--", "true"})
		if err != nil {
			t.Errorf("--ttl %s alone: %v", ttl, err)
			continue
		}
		if cfg.grace < 0 || cfg.grace > execDefaultGrace || cfg.grace+killSafety(cfg.ttl) > cfg.ttl/2 {
			t.Errorf("--ttl %s: default grace %v does not fit", ttl, cfg.grace)
		}
	}
	if cfg, err := parseExec(e, []string{"--ttl", "5s", "k", "--", "true"}); err != nil || cfg.grace != 2*time.Second {
		t.Errorf("--ttl 5s: grace %v, %v; want 2s", cfg.grace, err)
	}
	if cfg, err := parseExec(e, []string{"k", "--", "true"}); err != nil || cfg.grace != execDefaultGrace || cfg.lockDelay != redlock.DefaultLockDelay {
		t.Errorf("defaults: grace %v, lock delay %v, %v; want %v, %v", cfg.grace, cfg.lockDelay, err, execDefaultGrace, redlock.DefaultLockDelay)
	}
	// --lock-delay composes with every --ttl it leaves room for, up to MaxTTL in all.
	if cfg, err := parseExec(e, []string{"--ttl", "1h", "--lock-delay", "8759h", "k", "--", "true"}); err != nil || cfg.lockDelay != 8759*time.Hour {
		t.Errorf("--ttl 1h --lock-delay 8759h: %v, %v", cfg, err)
	}
	// An explicit --grace is kept, and checked.
	if _, err := parseExec(e, []string{"--ttl", "5s", "--grace", "5s", "k", "--", "true"}); !isUsage(err) {
		t.Errorf("--ttl 5s --grace 5s: %v, want a usage error", err)
	}
	if cfg, err := parseExec(e, []string{"--ttl", "10s", "--grace", "0s", "k", "--", "true"}); err != nil || cfg.grace != 0 {
		t.Errorf("--grace 0s: %v, %v", cfg, err)
	}
	for _, tc := range []struct{ ttl, want string }{
		{"499ms", "at least 500ms"},
		{"10", "10 has no unit; write 10s"},
		{"ten", "not a duration"},
		{"9999999h", "9999999h is beyond what a duration can hold (±2562047h47m16.854775807s"},
		{"-9999999h", "-9999999h is beyond what a duration can hold"},
	} {
		_, err := parseExec(e, []string{"--ttl", tc.ttl, "k", "--", "true"})
		if !isUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--ttl %s: %v, want a usage error saying %q", tc.ttl, err, tc.want)
		}
	}
}

func isUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue)
}

// TestExecOfADirectory: a directory is found but cannot run: 126, as shells say.
func TestExecOfADirectory(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	_, err := parseExec(e, []string{"k", "--", t.TempDir()})
	var xe *exitError
	if !errors.As(err, &xe) || xe.code != exitCannotRun {
		t.Fatalf("exec of a directory: %v, want exit status %d", err, exitCannotRun)
	}
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), &env{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}, []string{"--version"}); code != exitOK {
		t.Fatalf("--version: exit code %d", code)
	}
	if !strings.HasPrefix(out.String(), "redlock ") || !strings.Contains(out.String(), "go1.") {
		t.Fatalf("--version printed %q", out.String())
	}
}

// aclCommands is the command list docs/operations.md gives for an ACL user of the library
// and the CLI; TestRealExecNodesFileAuthACL runs exec and status as such a user.
const aclCommands = "+ping +hello +client|setname +eval +evalsha +get +set +pttl +incr +pexpire +del +time"

// TestRealExecNodesFileAuthACL: the node list comes from $REDLOCK_NODES_FILE and the password
// from $REDISCLI_AUTH, so neither is in argv; the user may run only the documented commands;
// the command run by exec does not see either variable unless --keep-node-env is given.
func TestRealExecNodesFileAuthACL(t *testing.T) {
	const pw = "Fi1eSecretPW"
	acl := append([]string{"--user", "alice", "on", ">" + pw, "~*", "resetchannels", "-@all"}, strings.Fields(aclCommands)...)
	cluster := redisproc.StartT(t, 3, redisproc.Config{ExtraArgs: acl})
	var lines []string
	for _, a := range cluster.Addrs() {
		lines = append(lines, "redis://alice@"+a)
	}
	file := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(file, []byte("# lock nodes\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{nodesFileEnv + "=" + file, authEnv + "=" + pw}
	code, out, errOut := runBin(t, env, "exec", "acl:job", "--", "sh", "-c", "env")
	if code != 0 {
		t.Fatalf("exec: exit code %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "REDLOCK_TOKEN=") || strings.Contains(out, nodesFileEnv) || strings.Contains(out, authEnv) || strings.Contains(out, pw) {
		t.Fatalf("the command's environment:\n%s", out)
	}
	code, out, errOut = runBin(t, env, "exec", "--keep-node-env", "acl:job", "--", "sh", "-c", "env")
	if code != 0 || !strings.Contains(out, nodesFileEnv+"="+file) || !strings.Contains(out, authEnv+"=") {
		t.Fatalf("exec --keep-node-env: exit code %d, stderr %q, environment:\n%s", code, errOut, out)
	}
	if code, _, errOut := runBin(t, env, "status", "acl:job"); code != 0 {
		t.Fatalf("status: exit code %d, stderr %q", code, errOut)
	}
	// A wrong password fails, and says nothing of it.
	code, _, errOut = runBin(t, []string{nodesFileEnv + "=" + file, authEnv + "=wrong" + pw}, "status", "acl:job")
	if code == 0 || strings.Contains(errOut, pw) {
		t.Fatalf("wrong password: exit code %d, stderr %q", code, errOut)
	}
}

// TestRealExecLockDelay: --lock-delay reaches the library. While the command runs, the keys
// carry ttl + delay (more than the ttl alone could give them); once redlock is killed with
// SIGKILL (a crash: no release), a waiting exec gets the lock only after more than twice the
// ttl, which without the delay it would have had within one ttl. A normal exit releases, and
// the next exec gets in at once.
func TestRealExecLockDelay(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 3)
	var admin []*redis.Client
	for _, addr := range cluster.Addrs() {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		defer rc.Close()
		admin = append(admin, rc)
	}
	dir := t.TempDir()
	killLeftovers(t, dir)
	const (
		key   = "delay"
		ttl   = time.Second
		delay = 3 * time.Second
	)
	holder := startBin(t, nil, "exec", "--nodes", nodes, "--ttl", ttl.String(), "--lock-delay", delay.String(), key, "--", "sh", "-c",
		childScript(`echo started > "$D/a"; exec sleep 60`), "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the holder's command to start", func() bool { return fileExists(filepath.Join(dir, "a")) })
	// The keys live ttl + delay on a quorum: the acquire may have been decided without a node
	// whose reply was late (a CI run under load found no key on node 0 at this point).
	var pttls []time.Duration
	in := 0
	for _, rc := range admin {
		p := rc.PTTL(t.Context(), key).Val()
		pttls = append(pttls, p)
		if p > ttl && p <= ttl+delay {
			in++
		}
	}
	if in < 2 {
		t.Fatalf("key PTTL on the nodes %v while the command runs, want a quorum (2 of 3) in (%v, %v]", pttls, ttl, ttl+delay)
	}
	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	holder.wait(t, 10*time.Second)
	code, out, errOut := runBin(t, nil, "exec", "--nodes", nodes, "--ttl", ttl.String(), "--wait", "30s", key, "--", "true")
	if code != 0 {
		t.Fatalf("waiting exec: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The last renewal before the kill was at most a renewal interval (ttl/3) earlier, plus
	// scheduling delays on a loaded machine; the keys then lived ttl + delay = 4s.
	if got := time.Since(killed); got < 2*ttl {
		t.Fatalf("the waiting exec got the lock %v after the crash, within 2 ttl: the delay was not applied", got)
	}
	start := time.Now()
	code, _, errOut = runBin(t, nil, "exec", "--nodes", nodes, "--ttl", ttl.String(), "--lock-delay", delay.String(), key, "--", "true")
	if code != 0 {
		t.Fatalf("exec with --lock-delay: exit code %d, stderr %q", code, errOut)
	}
	code, _, errOut = runBin(t, nil, "exec", "--nodes", nodes, "--ttl", ttl.String(), key, "--", "true")
	if code != 0 {
		t.Fatalf("exec right after a released run with --lock-delay: exit code %d, stderr %q (the release should clear the delay)", code, errOut)
	}
	t.Logf("crash to next holder: at least %v; two runs after a release: %v", time.Since(killed)-time.Since(start), time.Since(start))
}

// TestRealExecSameServerTwice: the same address twice is refused before anything is dialled
// (exit 1, entries counted from 1); one server under two addresses is refused by the
// library's INFO check (exit 2, nodes counted from 0, each with its address). docs/cli.md,
// "Nodes".
func TestRealExecSameServerTwice(t *testing.T) {
	t.Parallel()
	cluster, _ := startCluster(t, 2)
	a, b := cluster.Addrs()[0], cluster.Addrs()[1]
	_, port, _ := strings.Cut(a, ":")
	for _, tc := range []struct {
		nodes string
		code  int
		want  string
	}{
		{"redis://" + a + ",redis://" + b + ",redis://" + a + "/1", 1, "entries 1 and 3 are the same node " + a},
		{"redis://" + a + ",redis://" + b + ",redis://localhost:" + port, 2, "nodes 0 (" + a + ") and 2 (localhost:" + port + ") are the same Redis server"},
	} {
		code, out, errOut := runBin(t, nil, "exec", "--nodes", tc.nodes, "twice", "--", "echo", "RAN")
		if code != tc.code || out != "" {
			t.Errorf("%s: exit %d, stdout %q, want exit %d and no command run", tc.nodes, code, out, tc.code)
		}
		requireOneLine(t, errOut, tc.want)
	}
}
