// Command sidebyside measures github.com/quorumlock/redlock against
// github.com/go-redsync/redsync/v4 on redis-server processes it starts on loopback, and
// prints markdown tables (scenarios a–h; procs and procsd across processes; the load scenarios
// p, burst, held, starve, ramp, f0 and hung). Usage: see bench/run.sh, or -h.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench/harness"
)

func main() {
	harness.RunWorkerIfAsked() // a worker process of scenario procs never returns from it
	testing.Init()             // registers -test.benchtime, which scenario g sets for testing.Benchmark
	cfg := harness.Defaults()
	scen := flag.String("scenarios", strings.Join(harness.Scenarios, ","), "comma-separated scenarios to run ("+strings.Join(harness.Scenarios, ",")+")")
	flag.DurationVar(&cfg.Dur, "dur", cfg.Dur, "a/e: measurement per contender")
	flag.DurationVar(&cfg.FaultDur, "fault-dur", cfg.FaultDur, "b/c/d: steady-state measurement per contender")
	flag.DurationVar(&cfg.First, "first", cfg.First, "b/c/d: window measured right after the fault starts")
	flag.DurationVar(&cfg.Settle, "settle", cfg.Settle, "b/c/d: longest wait for the goroutine count to drain after the first window")
	flag.DurationVar(&cfg.FDur, "f-dur", cfg.FDur, "f: measurement per contender")
	flag.DurationVar(&cfg.HDur, "h-dur", cfg.HDur, "h: measurement per contender and N")
	flag.DurationVar(&cfg.Slice, "slice", cfg.Slice, "length of one interleaved slice")
	flag.StringVar(&cfg.BenchTime, "benchtime", cfg.BenchTime, "g: testing.Benchmark duration or count (e.g. 1s, 500x)")
	flag.IntVar(&cfg.Waiters, "f-goroutines", cfg.Waiters, "f: goroutines contending for one key")
	flag.DurationVar(&cfg.Hold, "f-hold", cfg.Hold, "f: how long a winner holds the lock")
	flag.DurationVar(&cfg.Think, "f-think", cfg.Think, "f: pause after a release before wanting the lock again")
	flag.IntVar(&cfg.MaxOps, "max-ops", cfg.MaxOps, "cap on cycles per slice")
	flag.DurationVar(&cfg.F0Dur, "f0-dur", cfg.F0Dur, "f0: measurement per contender (f with hold 0, think 0)")
	flag.Var((*intList)(&cfg.PSizes), "p-sizes", "p: comma-separated numbers of goroutines")
	flag.DurationVar(&cfg.PDur, "p-dur", cfg.PDur, "p: measurement per contender and P")
	flag.Var((*intList)(&cfg.BurstSizes), "burst-sizes", "burst: comma-separated numbers of concurrent Acquire (the target is on the largest)")
	flag.Var((*intList)(&cfg.HeldSizes), "held-sizes", "held: comma-separated numbers of locks held at once with Client.Do")
	flag.DurationVar(&cfg.HeldHold, "held-hold", cfg.HeldHold, "held: how long every lock is held (TTL 3 s)")
	flag.IntVar(&cfg.RampFrom, "ramp-from", cfg.RampFrom, "ramp: goroutines at the first step")
	flag.IntVar(&cfg.RampTo, "ramp-to", cfg.RampTo, "ramp: most goroutines (doubling from -ramp-from)")
	flag.DurationVar(&cfg.RampStep, "ramp-step", cfg.RampStep, "ramp: length of one step")
	flag.BoolVar(&cfg.RampRedsync, "ramp-redsync", cfg.RampRedsync, "ramp: ramp redsync too, after ours")
	flag.DurationVar(&cfg.HungDur, "hung-dur", cfg.HungDur, "hung: measurement per contender and phase (healthy, node SIGSTOPped)")
	flag.Var((*intList)(&cfg.ProcsN), "procs-n", "procs: comma-separated numbers of worker processes on one key, per contender")
	flag.Var((*shapeList)(&cfg.ProcsDistinct), "procsd-shapes", "procsd: comma-separated processes×goroutines on distinct keys")
	flag.DurationVar(&cfg.ProcsDur, "procs-dur", cfg.ProcsDur, "procs: measurement per contender")
	flag.DurationVar(&cfg.ProcsHold, "procs-hold", cfg.ProcsHold, "procs: how long a winner holds the lock")
	flag.DurationVar(&cfg.ProcsThink, "procs-think", cfg.ProcsThink, "procs: pause after a release before wanting the lock again")
	flag.IntVar(&cfg.StarveH, "starve-h", cfg.StarveH, "starve: concurrent Do")
	flag.DurationVar(&cfg.StarveTTL, "starve-ttl", cfg.StarveTTL, "starve: the Do calls' TTL")
	flag.DurationVar(&cfg.StarveHold, "starve-hold", cfg.StarveHold, "starve: how long they hold")
	flag.IntVar(&cfg.StarveBusy, "starve-busy", cfg.StarveBusy, "starve: busy-loop processes beside the benchmark")
	timeout := flag.Duration("timeout", 15*time.Minute, "hard limit for the whole run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.BoolVar(&cfg.DebugGoroutines, "debug-goroutines", false, "log on stderr what the goroutines left after each first window of b/c/d are doing")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sidebyside: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	for _, s := range strings.Split(*scen, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}
	if *quiet {
		cfg.Log = nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	if _, err := harness.Run(ctx, cfg); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

// shapeList is a flag of comma-separated PxG shapes.
type shapeList [][2]int

func (l *shapeList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, sh := range *l {
		s[i] = fmt.Sprintf("%dx%d", sh[0], sh[1])
	}
	return strings.Join(s, ",")
}

func (l *shapeList) Set(v string) error {
	var out [][2]int
	for _, f := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(f), "x")
		p, err1 := strconv.Atoi(a)
		g, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || p < 1 || g < 1 {
			return fmt.Errorf("%q is not a shape PxG of positive integers", f)
		}
		out = append(out, [2]int{p, g})
	}
	*l = out
	return nil
}

// intList is a flag of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
