// Package harness measures github.com/quorumlock/redlock side by side with
// github.com/go-redsync/redsync/v4 on real redis-server processes on loopback, scenario by
// scenario (a–h; the load scenarios p, burst, held, ramp, starve, f0, hung; the multi-process
// scenarios procs and procsd), interleaving the two libraries in short slices so that the noise
// of a shared machine falls on both alike, and prints markdown tables with the ratios the
// targets name.
package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// Scenarios lists every scenario in the order they run: the healthy ones first, the
// fault scenarios last, so that nothing a fault leaves behind can disturb a healthy figure.
var Scenarios = []string{"a", "e", "g", "h", "f", "f0", "procs", "procsd", "sem", "rw", "p", "burst", "held", "starve", "ramp", "b", "c", "d", "hung"}

// LoadScenarios are the load scenarios, a subset of Scenarios.
var LoadScenarios = []string{"f0", "p", "burst", "held", "starve", "ramp", "hung"}

// Config sets what runs and for how long. Durations are per contender.
type Config struct {
	Scenarios []string // subset of Scenarios; empty means all

	Dur       time.Duration // a and e: measurement per contender
	FaultDur  time.Duration // b, c, d: steady-state measurement per contender
	First     time.Duration // b, c, d: the window right after the fault starts
	Settle    time.Duration // b, c, d: longest wait for the goroutine count to drain
	FDur      time.Duration // f: measurement per contender
	HDur      time.Duration // h: measurement per contender and N
	Slice     time.Duration // length of one interleaved slice
	BenchTime string        // g: -test.benchtime of testing.Benchmark, e.g. "1s" or "300x"
	MaxOps    int           // cap on cycles per slice

	Waiters int           // f: goroutines contending for the key
	Hold    time.Duration // f: how long a winner holds the lock
	Think   time.Duration // f: pause after a release before wanting the lock again

	HNodes []int // h: cluster sizes

	F0Dur time.Duration // f0: measurement per contender (f with hold 0 and think 0)

	PSizes []int         // p: numbers of goroutines
	PDur   time.Duration // p: measurement per contender and P

	BurstSizes []int // burst: numbers of concurrent Acquire

	HeldSizes []int         // held: numbers of locks held at once
	HeldHold  time.Duration // held: how long every lock is held

	RampFrom, RampTo int           // ramp: first and last number of goroutines (doubling)
	RampStep         time.Duration // ramp: length of one step
	RampRedsync      bool          // ramp: redsync too, after ours

	HungDur time.Duration // hung: measurement per contender and phase

	ProcsN     []int         // procs: numbers of worker processes on the key, per contender
	ProcsDur   time.Duration // procs: measurement per contender
	ProcsHold  time.Duration // procs: how long a winner holds the lock
	ProcsThink time.Duration // procs: pause after a release before wanting the lock again

	ProcsDistinct [][2]int // procsd: shapes processes × goroutines on distinct keys (ProcsDur each)

	StarveH    int           // starve: concurrent Do
	StarveTTL  time.Duration // starve: their TTL
	StarveHold time.Duration // starve: how long they hold
	StarveBusy int           // starve: busy-loop processes beside the benchmark

	DebugGoroutines bool // log what the goroutines left after each first window are doing

	Out io.Writer // the markdown report
	Log io.Writer // progress lines; nil for none
}

// Defaults returns the configuration of a full run (about five minutes for the scenarios
// other than the load ones, about four more for the load scenarios).
func Defaults() Config {
	return Config{
		Dur:       6 * time.Second,
		FaultDur:  4 * time.Second,
		First:     2 * time.Second,
		Settle:    10 * time.Second,
		FDur:      4 * time.Second,
		HDur:      1500 * time.Millisecond,
		Slice:     500 * time.Millisecond,
		BenchTime: "1s",
		MaxOps:    200_000,
		Waiters:   8,
		Hold:      2 * time.Millisecond,
		Think:     2 * time.Millisecond,
		HNodes:    []int{1, 3, 5, 7, 9},

		F0Dur:       4 * time.Second,
		PSizes:      []int{16, 64, 256, 1024},
		PDur:        2 * time.Second,
		BurstSizes:  []int{1000, 4000, 10000},
		HeldSizes:   []int{1000, 10000},
		HeldHold:    30 * time.Second,
		RampFrom:    16,
		RampTo:      8192,
		RampStep:    2 * time.Second,
		RampRedsync: true,
		HungDur:     3 * time.Second,
		ProcsN:      []int{8, 32, 64},
		ProcsDur:    5 * time.Second,
		ProcsHold:   2 * time.Millisecond,
		ProcsThink:  2 * time.Millisecond,

		ProcsDistinct: [][2]int{{32, 4}, {32, 16}},

		StarveH: starveDefaults.h, StarveTTL: starveDefaults.ttl, StarveHold: starveDefaults.hold, StarveBusy: starveDefaults.busy,
		Out: os.Stdout,
		Log: os.Stderr,
	}
}

// Result is what a run measured, for tests and callers.
type Result struct {
	Targets []Target
	Ran     []string // scenarios that ran
}

type runner struct {
	cfg   Config
	addrs []string // every node; scenarios other than h use the first five
	nodes []*redisproc.Node
	out   io.Writer
	res   *Result
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "sidebyside: "+format+"\n", args...)
	}
}

func (r *runner) want(s string) bool {
	return len(r.cfg.Scenarios) == 0 || slices.Contains(r.cfg.Scenarios, s)
}

func (r *runner) add(ts ...Target) { r.res.Targets = append(r.res.Targets, ts...) }

// Run starts the redis-server nodes, runs the selected scenarios and writes the report.
// The nodes are stopped (by PID, through redisproc) before Run returns, also on error or
// when ctx ends.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(Scenarios, ","))
		}
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (Debian: apt-get install -y redis-server): %w", err)
	}
	r := &runner{cfg: cfg, out: cfg.Out, res: &Result{}}
	n := 5
	if r.want("h") {
		n = max(n, slices.Max(cfg.HNodes))
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cluster, err := redisproc.Start(startCtx, n, redisproc.Config{})
	cancel()
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	r.addrs, r.nodes = cluster.Addrs(), cluster.Nodes()
	r.logf("started %d redis-server nodes (no persistence) on %s", n, strings.Join(r.addrs, " "))

	r.header(n)
	steps := []struct {
		ids []string
		run func(context.Context) error
	}{
		{[]string{"a", "e"}, r.scenarioAE},
		{[]string{"g"}, r.scenarioG},
		{[]string{"h"}, r.scenarioH},
		{[]string{"f"}, func(ctx context.Context) error { return r.scenarioF(ctx, "f") }},
		{[]string{"f0"}, func(ctx context.Context) error { return r.scenarioF(ctx, "f0") }},
		{[]string{"procs"}, r.scenarioProcs},
		{[]string{"procsd"}, r.scenarioProcsDistinct},
		{[]string{"sem"}, r.scenarioSem},
		{[]string{"rw"}, r.scenarioRW},
		{[]string{"p"}, r.scenarioP},
		{[]string{"burst"}, r.scenarioBurst},
		{[]string{"held"}, r.scenarioHeld},
		{[]string{"starve"}, r.scenarioStarve},
		{[]string{"ramp"}, r.scenarioRamp},
		{[]string{"b"}, func(ctx context.Context) error { return r.scenarioFault(ctx, "b") }},
		{[]string{"c"}, func(ctx context.Context) error { return r.scenarioFault(ctx, "c") }},
		{[]string{"d"}, func(ctx context.Context) error { return r.scenarioFault(ctx, "d") }},
		{[]string{"hung"}, r.scenarioHung},
	}
	for _, s := range steps {
		if !slices.ContainsFunc(s.ids, r.want) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return r.res, err
		}
		t0 := time.Now()
		if err := s.run(ctx); err != nil {
			return r.res, fmt.Errorf("scenario %s: %w", strings.Join(s.ids, "/"), err)
		}
		for _, id := range s.ids {
			if r.want(id) {
				r.res.Ran = append(r.res.Ran, id)
			}
		}
		r.logf("scenario %s done in %s", strings.Join(s.ids, "/"), time.Since(t0).Round(100*time.Millisecond))
	}
	r.summary()
	if err := cluster.Close(); err != nil {
		return r.res, err
	}
	r.logf("stopped the redis-server nodes")
	return r.res, ctx.Err()
}

// header writes the machine and the settings.
func (r *runner) header(n int) {
	w := r.out
	fmt.Fprintf(w, "# Side-by-side: quorumlock/redlock vs go-redsync/redsync\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs (GOMAXPROCS %d), %s, %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- Go %s; %s; %s\n", runtime.Version(), redisVersion(), depVersions())
	fmt.Fprintf(w, "- %d redis-server nodes on 127.0.0.1, no persistence; scenarios other than h use the first 5\n", n)
	fmt.Fprintf(w, "- both libraries: one go-redis client per node per contender, `redis.Options{Addr: …}` and nothing else; lock TTL 8 s (redsync's default expiry)\n")
	fmt.Fprintf(w, "- ours: `redlock.New(clients)` with default options (node timeout 100 ms); fencing tokens on (the default; the targets are measured so); rows marked WithoutFencing price the feature: plain SET NX PX, no token\n")
	fmt.Fprintf(w, "- redsync: `redsync.New(pools...)` and `NewMutex(key)` with default options (expiry 8 s, 32 tries, retry delay drawn from [50, 250) ms, timeout factor 0.05), and the same plus `WithFailFast(true)`\n")
	fmt.Fprintf(w, "- durations per contender: a/e %s, b/c/d first window %s + steady %s (goroutine drain cap %s), f %s, h %s; slices of %s, interleaved in rotating order\n",
		r.cfg.Dur, r.cfg.First, r.cfg.FaultDur, r.cfg.Settle, r.cfg.FDur, r.cfg.HDur, r.cfg.Slice)
	if r.want("procs") {
		fmt.Fprintf(w, "- procs: %v worker processes per contender, hold %s, think %s, %s per contender\n", r.cfg.ProcsN, r.cfg.ProcsHold, r.cfg.ProcsThink, r.cfg.ProcsDur)
	}
	if r.want("procsd") {
		fmt.Fprintf(w, "- procsd: processes × goroutines %v on distinct keys, %s per contender\n", r.cfg.ProcsDistinct, r.cfg.ProcsDur)
	}
	if slices.ContainsFunc(LoadScenarios, r.want) {
		fmt.Fprintf(w, "- load: f0 %s per contender; p P = %v, %s per contender and P; burst B = %v; held H = %v for %s; ramp %d → %d goroutines, steps of %s; hung %s per contender and phase\n",
			r.cfg.F0Dur, r.cfg.PSizes, r.cfg.PDur, r.cfg.BurstSizes, r.cfg.HeldSizes, r.cfg.HeldHold, r.cfg.RampFrom, r.cfg.RampTo, r.cfg.RampStep, r.cfg.HungDur)
	}
	fmt.Fprintln(w)
}

// summary writes every target of the run.
func (r *runner) summary() {
	if len(r.res.Targets) == 0 {
		return
	}
	w := r.out
	fmt.Fprintf(w, "## Summary of the targets\n\n")
	rows := make([][]string, len(r.res.Targets))
	pass := 0
	for i, t := range r.res.Targets {
		rows[i] = []string{t.Scenario, t.Name, t.Want, t.Got, t.status()}
		if t.Pass {
			pass++
		}
	}
	table(w, []string{"scenario", "target (ours)", "wanted", "measured", "status"}, rows)
	fmt.Fprintf(w, "%d of %d targets pass.\n", pass, len(r.res.Targets))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server (version unknown)"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + v
		}
	}
	return strings.TrimSpace(string(out))
}

func depVersions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dependency versions unknown"
	}
	var parts []string
	for _, d := range bi.Deps {
		switch d.Path {
		case "github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9", "github.com/redis/rueidis":
			parts = append(parts, d.Path+" "+d.Version)
		}
	}
	return strings.Join(parts, ", ")
}
