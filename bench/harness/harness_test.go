package harness

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryScenarioShort runs every scenario but the load ones for a very short time, to show
// the harness works end to end (TestLoadScenariosShort runs the load ones). The figures are
// meaningless at these durations; only the shape of the report is checked.
func TestEveryScenarioShort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH; skipping (Debian: apt-get install -y redis-server)")
	}
	if testing.Short() {
		t.Skip("takes about a minute; skipped with -short")
	}
	var out bytes.Buffer
	cfg := Defaults()
	cfg.Dur, cfg.FaultDur, cfg.First, cfg.Settle = 150*time.Millisecond, 150*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond
	cfg.FDur, cfg.HDur, cfg.Slice = 200*time.Millisecond, 60*time.Millisecond, 50*time.Millisecond
	cfg.BenchTime = "30x"
	cfg.HNodes = []int{1, 3, 5}
	cfg.ProcsN, cfg.ProcsDur, cfg.ProcsDistinct = []int{3}, 300*time.Millisecond, [][2]int{{2, 2}}
	cfg.Scenarios = nonLoadScenarios()
	cfg.Out, cfg.Log = &out, nil
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Scenarios {
		if !strings.Contains(out.String(), "## "+s+":") {
			t.Errorf("no table for scenario %s", s)
		}
	}
	if len(res.Ran) != len(cfg.Scenarios) {
		t.Errorf("ran %v, want all of %v", res.Ran, cfg.Scenarios)
	}
	if len(res.Targets) == 0 || !strings.Contains(out.String(), "Summary of the targets") {
		t.Error("no targets evaluated")
	}
}

// nonLoadScenarios returns the scenarios that are not in LoadScenarios: a–h (one caller,
// contention on one key, node count, faults) and the multi-process ones.
func nonLoadScenarios() []string {
	var s []string
	for _, id := range Scenarios {
		if !slices.Contains(LoadScenarios, id) {
			s = append(s, id)
		}
	}
	return s
}

// TestLoadScenariosShort runs the load scenarios (p, burst, held, ramp, f0,
// hung) with tiny sizes and durations: each must produce its table and its targets.
func TestLoadScenariosShort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH; skipping (Debian: apt-get install -y redis-server)")
	}
	if testing.Short() {
		t.Skip("takes about half a minute; skipped with -short")
	}
	var out bytes.Buffer
	cfg := Defaults()
	cfg.Scenarios = LoadScenarios
	cfg.Slice = 50 * time.Millisecond
	cfg.F0Dur = 200 * time.Millisecond
	cfg.PSizes, cfg.PDur = []int{4, 64}, 150*time.Millisecond
	cfg.BurstSizes = []int{50, 200}
	cfg.HeldSizes, cfg.HeldHold = []int{20, 100}, 1200*time.Millisecond
	cfg.StarveH, cfg.StarveHold, cfg.StarveBusy = 20, 1200*time.Millisecond, 1
	cfg.RampFrom, cfg.RampTo, cfg.RampStep = 4, 32, 150*time.Millisecond
	cfg.HungDur = 300 * time.Millisecond
	cfg.Out, cfg.Log = &out, nil
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Ran, LoadScenarios) {
		t.Errorf("ran %v, want %v", res.Ran, LoadScenarios)
	}
	for _, s := range LoadScenarios {
		if !strings.Contains(out.String(), "## "+s+":") {
			t.Errorf("no table for scenario %s", s)
		}
		if !slices.ContainsFunc(res.Targets, func(x Target) bool { return x.Scenario == s }) {
			t.Errorf("no target for scenario %s", s)
		}
	}
	for _, want := range []string{"floor: go-redis, batched pipelines", "floor: rueidis", "renewals per round trip", "node 5 SIGSTOPped", "Summary of the targets"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestSelectedScenarioOnly(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	var out bytes.Buffer
	cfg := Defaults()
	cfg.Scenarios = []string{"e"}
	cfg.Dur, cfg.Slice = 100*time.Millisecond, 50*time.Millisecond
	cfg.Out, cfg.Log = &out, nil
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "## a:") || !strings.Contains(out.String(), "## e:") {
		t.Errorf("want only the e table:\n%s", out.String())
	}
	if len(res.Ran) != 1 || res.Ran[0] != "e" {
		t.Errorf("ran %v, want [e]", res.Ran)
	}
	if _, err := Run(context.Background(), Config{Scenarios: []string{"z"}}); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestStats(t *testing.T) {
	var s series
	for i := 1; i <= 100; i++ {
		s.add(time.Duration(i))
	}
	if got := s.pct(50); got != 50 {
		t.Errorf("p50 = %v, want 50", got)
	}
	if got := s.pct(99); got != 99 {
		t.Errorf("p99 = %v, want 99", got)
	}
	if got := jain([]int{5, 5, 5, 5}); got != 1 {
		t.Errorf("jain equal = %v", got)
	}
	if got := jain([]int{8, 0, 0, 0}); got != 0.25 {
		t.Errorf("jain one = %v", got)
	}
	if got := slope([]float64{1, 2, 4}, []float64{3, 6, 12}); math.Abs(got-1) > 1e-9 {
		t.Errorf("slope linear = %v", got)
	}
	if got := slope([]float64{1, 4, 9}, []float64{1, 2, 3}); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("slope sqrt = %v", got)
	}
}

// TestMain lets the test binary serve as a worker process of scenario procs, which
// re-executes the running binary.
func TestMain(m *testing.M) {
	RunWorkerIfAsked()
	os.Exit(m.Run())
}

// TestProcsShort runs scenario procs with 8 worker processes per contender, and procsd with
// 2 × 2, for a moment: the worker processes start, serve their slices and exit, and the
// tables and the targets come out. The figures mean nothing at this size.
func TestProcsShort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH; skipping (Debian: apt-get install -y redis-server)")
	}
	var out bytes.Buffer
	cfg := Defaults()
	cfg.Scenarios = []string{"procs", "procsd"}
	cfg.ProcsN, cfg.ProcsDur, cfg.Slice = []int{8}, 300*time.Millisecond, 150*time.Millisecond
	cfg.ProcsDistinct = [][2]int{{2, 2}}
	cfg.Out, cfg.Log = &out, nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Ran, []string{"procs", "procsd"}) {
		t.Fatalf("ran %v", res.Ran)
	}
	for _, want := range []string{"## procs:", "ours, wake-ups (default)", "ours, WithoutWakeups (polling)", "redsync default", "Jain fairness across processes",
		"## procsd: 2 processes × 2 goroutines", "ours, TryAcquire + Release", "redsync, TryLockContext + Unlock", "WithNodeConcurrency(4)", "failed Acquire calls"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := len(res.Targets); n != 6 {
		t.Errorf("%d targets, want 6", n)
	}
}

// TestMeasuredNotPrintedAsThreshold: a ratio that misses its threshold by less than the
// printed digits is shown with more of them, so a FAIL never reads "≥ 1.50×, 1.50×".
func TestMeasuredNotPrintedAsThreshold(t *testing.T) {
	for _, tc := range []struct {
		tg   Target
		want string
	}{
		{atLeast("x", "n", 1.4966, 1.5), "1.497×"},
		{atMost("x", "n", 0.2004, 0.2), "0.2004×"},
		{atLeast("x", "n", 1.5, 1.5), "1.50×"},
		{atLeast("x", "n", 1.62, 1.5), "1.62×"},
	} {
		if tc.tg.Got != tc.want {
			t.Errorf("%v: got printed %q, want %q", tc.tg, tc.tg.Got, tc.want)
		}
	}
}
