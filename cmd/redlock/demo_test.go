package main

// Tests of redlock demo, and the package's TestMain and in-process command-line helpers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/quorumlock/redlock/internal/redislog"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// binDir holds the CLI binary built by the tests that run it (binary_test.go); TestMain
// removes it.
var binDir string

func TestMain(m *testing.M) {
	redis.SetLogger(redislog.Discard{})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" { // the CLI binary built by the tests that run it
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

// cli runs the command line in-process with the given environment variables (nothing is
// read from the real environment) and returns the exit code, stdout and stderr.
func cli(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

// requireOneLineError checks that a failed run wrote exactly one "redlock: " line on stderr.
func requireOneLineError(t *testing.T, code int, stderr string, wantCode int, wantInMsg string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit code %d, want %d (stderr %q)", code, wantCode, stderr)
	}
	if !strings.HasPrefix(stderr, "redlock: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line starting with \"redlock: \": %q", stderr)
	}
	if !strings.Contains(stderr, wantInMsg) {
		t.Errorf("stderr %q does not mention %q", stderr, wantInMsg)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Errorf("stderr looks like a stack trace: %q", stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// checkDemoOutput checks the key lines of a successful demo.
func checkDemoOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"Act 1:", "Act 2:", "Act 3:",
		"payouts of S-1001: 3 with a sync.Mutex in each process (each locks only its own), 1 with redlock",
		"once A's keys had expired",
		"rejected: stale token ",
		"ok    B's token is greater than A's",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if got := strings.Count(out, "unpaid      paid S-1001"); got != 4 {
		t.Errorf("%d rows show an instance that saw S-1001 unpaid and paid it, want 4 (3 mutex + 1 redlock):\n%s", got, out)
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("output has a failed check:\n%s", out)
	}
	if got := lastLine(out); got != "demo: all outcomes as claimed" {
		t.Errorf("last line %q, want the all-claims line; output:\n%s", got, out)
	}
}

func TestDemoOnEmbeddedNodes(t *testing.T) {
	code, out, errOut := cli(t, nil, "demo", "--ttl", "200ms")
	if code != 0 || errOut != "" {
		t.Fatalf("exit code %d, stderr %q; output:\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "5 embedded nodes") {
		t.Errorf("output does not say it used 5 embedded nodes:\n%s", out)
	}
	checkDemoOutput(t, out)
}

// TestDemoOnNamedNodes takes the real-node path (URLs, PING check) against nodes the test
// starts itself; the flag wins over the environment variable.
func TestDemoOnNamedNodes(t *testing.T) {
	ns, err := embedded.Start(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	urls := strings.Join(ns.URLs(), ",")

	code, out, errOut := cli(t, map[string]string{nodesEnv: urls}, "demo", "--ttl", "100ms")
	if code != 0 || errOut != "" {
		t.Fatalf("with %s: exit code %d, stderr %q; output:\n%s", nodesEnv, code, errOut, out)
	}
	if !strings.Contains(out, "3 nodes from REDLOCK_NODES") || !strings.Contains(out, "quorum 2") {
		t.Errorf("output does not name the nodes from %s:\n%s", nodesEnv, out)
	}
	checkDemoOutput(t, out)

	code, out, errOut = cli(t, map[string]string{nodesEnv: "not a url"}, "demo", "--ttl", "100ms", "--nodes", urls)
	if code != 0 || errOut != "" {
		t.Fatalf("with --nodes: exit code %d, stderr %q; output:\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "3 nodes from --nodes") {
		t.Errorf("output does not name the nodes from --nodes:\n%s", out)
	}
}

func TestDemoBadNodes(t *testing.T) {
	// A loopback port that nobody listens on.
	closed := net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePortT(t)))

	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"scheme", nil, []string{"demo", "--nodes", "http://127.0.0.1:7000"}, "bad node URL"},
		{"garbage", nil, []string{"demo", "--nodes", "redis://127.0.0.1:7000,::nope"}, "bad node URL"},
		{"empty entry", nil, []string{"demo", "--nodes", "redis://127.0.0.1:7000,,redis://127.0.0.1:7001"}, "entry 2"},
		{"bad env", map[string]string{nodesEnv: "ftp://x"}, []string{"demo"}, "REDLOCK_NODES: bad node URL"},
		{"unreachable", nil, []string{"demo", "--nodes", "redis://" + closed}, closed + " (from --nodes) did not answer PING"},
		{"same node twice", nil, []string{"demo", "--nodes", "redis://" + closed + ",redis://" + closed + "/1"}, "entries 1 and 2 are the same node"},
		{"password hidden", nil, []string{"demo", "--nodes", "redis://u:s3cret@127.0.0.1:7000/notadb"}, "u:xxxxx@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.vars, tc.args...)
			requireOneLineError(t, code, errOut, exitFail, tc.want)
			if strings.Contains(errOut, "s3cret") {
				t.Errorf("password printed: %q", errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
		})
	}
}

func TestDemoBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"demo", "--ttl", "soon"}, "invalid value"},
		{[]string{"demo", "--ttl", "1ms"}, "outside [20ms, 1m0s]"},
		{[]string{"demo", "--ttl", "2h"}, "outside"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := cli(t, nil, tc.args...)
		requireOneLineError(t, code, errOut, exitUsage, tc.want)
	}
}

func TestUsage(t *testing.T) {
	code, out, errOut := cli(t, nil)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "usage: redlock <command>") || !strings.Contains(errOut, "\n  demo  ") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q; want exit 2 and the usage listing demo on stderr", code, out, errOut)
	}
	for _, arg := range []string{"-h", "--help", "help"} {
		code, out, errOut := cli(t, nil, arg)
		if code != exitOK || errOut != "" || !strings.Contains(out, "usage: redlock <command>") || !strings.Contains(out, "\n  demo  ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0 and the usage listing demo on stdout", arg, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"demo", "-h"}, {"help", "demo"}} {
		code, out, errOut := cli(t, nil, args...)
		if code != exitOK || errOut != "" || !strings.Contains(out, "usage: redlock demo [--nodes URLS] [--ttl D]") ||
			!strings.Contains(out, "-nodes URLS") || !strings.Contains(out, "-ttl D") {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", args, code, errOut, out)
		}
	}
	code, _, errOut = cli(t, nil, "frobnicate")
	requireOneLineError(t, code, errOut, exitUsage, `unknown command "frobnicate"`)
	code, _, errOut = cli(t, nil, "--verbose")
	requireOneLineError(t, code, errOut, exitUsage, `unknown flag "--verbose"`)
}

func TestLedgerFencing(t *testing.T) {
	l := newLedger()
	if err := l.pay("S", 10); err != nil {
		t.Fatalf("first payout: %v", err)
	}
	if err := l.pay("S", 10); err != nil {
		t.Errorf("payout with an equal token: %v, want accepted", err)
	}
	err := l.pay("S", 9)
	var stale *redlock.StaleTokenError
	if !errors.Is(err, redlock.ErrStaleToken) || !errors.As(err, &stale) ||
		stale.Resource != "S" || stale.Got != 9 || stale.Highest != 10 {
		t.Errorf("payout with a lower token: %v, want a StaleTokenError for S, 9 < 10", err)
	}
	if err := l.pay("T", 1); err != nil {
		t.Errorf("another settlement's low token: %v, want accepted (tokens are per settlement)", err)
	}
	if l.count("S") != 2 || l.highestToken("S") != 10 || !l.isPaid("T") || l.isPaid("U") {
		t.Errorf("ledger state: S %d payouts, highest %v; T paid %v; U paid %v",
			l.count("S"), l.highestToken("S"), l.isPaid("T"), l.isPaid("U"))
	}
}

func TestClaimsReportFailures(t *testing.T) {
	good := &demoResult{
		mutexPayouts: 3, redlockPayouts: 1, tokenA: 5, tokenB: 6, bAfterA: true,
		aPay:     &redlock.StaleTokenError{Resource: settlement2, Got: 5, Highest: 6},
		aRelease: fmt.Errorf("wrapped: %w", redlock.ErrNotHeld),
		final:    map[string]int{settlement1: 1, settlement2: 1},
	}
	var out bytes.Buffer
	if err := reportClaims(&out, good.claims()); err != nil || lastLine(out.String()) != "demo: all outcomes as claimed" {
		t.Fatalf("good result: err %v, output:\n%s", err, out.String())
	}

	bad := *good
	bad.redlockPayouts = 2
	bad.tokenB = 4
	out.Reset()
	err := reportClaims(&out, bad.claims())
	if err == nil {
		t.Fatal("a result with two payouts under redlock passed the checks")
	}
	for _, want := range []string{"2 of 8 claimed outcomes did not hold", "paid exactly once (got: paid 2 times)", "A 5, B 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(out.String(), "all outcomes as claimed") || strings.Count(out.String(), "FAIL") != 2 {
		t.Errorf("output of a failing run:\n%s", out.String())
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:pw@h:1/0":   "redis://u:xxxxx@h:1/0",
		"redis://:pw@h:1":      "redis://:xxxxx@h:1",
		"redis://u@h:1":        "redis://u@h:1",
		"redis://h:1":          "redis://h:1",
		"not a url at all":     "not a url at all",
		"rediss://a:b@c@h:10":  "rediss://a:xxxxx@h:10",
		"0://@:TopSecret#@0":   "0://@:xxxxx#xxxxx",
		"0://0:TopSecret":      "0://0:xxxxx",
		"redis://h:Top/Secret": "redis://h:xxxxx",
		"TopSecret@h:1":        "xxxxx@h:1",
		"redis://[::1]:7611":   "redis://[::1]:7611",
		"redis://[::1]:pw":     "redis://[::1]:xxxxx",
		"unix:///tmp/r.sock":   "unix:///tmp/r.sock",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNumericFlagErrorsSayWhy: every int and duration flag of every command says what is
// wrong with a bad value (flag's own error is a bare "parse error"), on one line, exit 2.
func TestNumericFlagErrorsSayWhy(t *testing.T) {
	durations := [][]string{{"exec", "--node-timeout"}, {"status", "--node-timeout"}, {"top", "--node-timeout"},
		{"elect", "--node-timeout"}, {"demo", "--ttl"}, {"exec", "--ttl"}, {"top", "--interval"}}
	ints := [][]string{{"exec", "--amnesia-tolerance"}, {"exec", "--conflict-exit-code"}, {"exec", "--lost-exit-code"},
		{"status", "--amnesia-tolerance"}, {"status", "--permits"}, {"top", "--limit"}, {"top", "--amnesia-tolerance"},
		{"elect", "--amnesia-tolerance"}, {"dev", "-n"}, {"dev", "--port"}, {"lab", "--runs"}, {"lab", "--seed"}}
	for _, f := range durations {
		for value, want := range map[string]string{"5": "5 has no unit; write 5s", "x": `"x" is not a duration`,
			"9999999h": "beyond what a duration can hold", "-5": "-5 has no unit, and is negative",
			// Numbers that a duration cannot be written with get no suggestion that would be refused.
			"1e3": `"1e3" is not a duration`, "NaN": `"NaN" is not a duration`, "1_000": `"1_000" is not a duration`} {
			code, _, errOut := cli(t, nil, f[0], f[1], value)
			requireOneLineError(t, code, errOut, exitUsage, want)
		}
	}
	for _, f := range ints {
		for value, want := range map[string]string{"x": `"x" is not a whole number`, "1e3": "1e3 is not a whole number", "1e400": "1e400 is not a whole number",
			"99999999999999999999": "is beyond what a"} {
			code, _, errOut := cli(t, nil, f[0], f[1], value)
			requireOneLineError(t, code, errOut, exitUsage, want)
		}
	}
}
