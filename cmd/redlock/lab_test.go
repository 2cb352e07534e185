package main

// Tests of redlock lab: its help, its command line and one quick run.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/chaos"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// labCLI runs `redlock lab args...` in-process and returns its stdout and error; it fails
// the test if anything went to stderr.
func labCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	err := runLab(context.Background(), e, args)
	if errOut.Len() > 0 {
		t.Errorf("lab wrote to stderr: %q", errOut.String())
	}
	return out.String(), err
}

func TestLabHelp(t *testing.T) {
	out, err := labCLI(t, "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h returned %v", err)
	}
	for _, want := range append([]string{"usage: redlock lab [--scenario NAME] [--runs N] [--seed S] [--out DIR]", "-quick"}, chaos.Names()...) {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestLabBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "nope"}, `unknown scenario "nope"`},
		{[]string{"--scenario", "baseline,nope"}, `unknown scenario "nope"`},
		{[]string{"--runs", "0"}, "--runs 0 is outside"},
		{[]string{"--runs", "x"}, "invalid value"},
		{[]string{"--out", " "}, "--out is empty"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		_, err := labCLI(t, tc.args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want a usage error mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestSelectScenarios(t *testing.T) {
	all, err := selectScenarios("all")
	if err != nil || len(all) != len(chaos.Names()) {
		t.Fatalf("all: %d scenarios, %v", len(all), err)
	}
	two, err := selectScenarios(" client-pause , baseline,client-pause")
	if err != nil || len(two) != 2 || two[0].Name != "client-pause" || two[1].Name != "baseline" {
		t.Fatalf("list: %v, %v", two, err)
	}
}

// TestRealLabRun runs one scenario through the command, quick profile, and checks what it
// prints and writes.
func TestRealLabRun(t *testing.T) {
	redisproc.Require(t)
	dir := filepath.Join(t.TempDir(), "out")
	out, err := labCLI(t, "--quick", "--scenario", "clock-jump-partition", "--runs", "1", "--seed", "7", "--out", dir)
	if err != nil {
		t.Fatalf("lab: %v\n%s", err, out)
	}
	for _, want := range []string{
		"redlock lab: 1 scenarios × 1 runs, profile quick (TTL 1s), seed 7",
		"clock-jump-partition     run 0 (seed 7):",
		"| scenario | expected | runs | ME violations (overlapping pairs) | stale writes accepted | stale writes rejected | acquisitions/s | during node faults | p99 wait |",
		"| clock-jump-partition | mutual exclusion breaks, fencing rejects the stale writes | 1 | 1 (",
		"report: " + filepath.Join(dir, "report.md"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| clock-jump-partition |") && !strings.HasSuffix(line, "| as expected |") {
			t.Errorf("summary row: %s", line)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `<svg `); n != 1 || !strings.Contains(string(page), `class="overlap"`) ||
		!strings.Contains(string(page), `class="write rejected"`) {
		t.Errorf("report.html: %d timelines, overlap shown %v, rejected write shown %v", n,
			strings.Contains(string(page), `class="overlap"`), strings.Contains(string(page), `class="write rejected"`))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "histories.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hs struct {
		Runs []struct {
			Scenario string
			Verdict  chaos.Verdict
			History  chaos.History
		}
	}
	if err := json.Unmarshal(raw, &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs.Runs) != 1 || hs.Runs[0].Verdict.StaleRejected == 0 || len(hs.Runs[0].History.Holds) == 0 {
		t.Errorf("histories.json: %+v", hs.Runs)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "## clock-jump-partition") {
		t.Errorf("report.md: %v", err)
	}
}

// TestRealLabOutNotWritable: an --out directory that cannot take the report is refused before
// the first scenario runs, not after minutes of runs.
func TestRealLabOutNotWritable(t *testing.T) {
	redisproc.Require(t)
	const dir = "/sys/kernel" // a directory that not even root can create files in
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skip(dir + " is writable here")
	}
	var out, errOut strings.Builder
	code := run(context.Background(), &env{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }},
		[]string{"lab", "--quick", "--out", dir})
	if code == exitOK || !strings.Contains(errOut.String(), "not writable") || strings.Contains(out.String(), "scenarios ×") {
		t.Fatalf("exit code %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
