// Command sidebyside measures github.com/quorumlock/redlock against
// github.com/go-redsync/redsync/v4 on redis-server processes it starts on loopback, and
// prints markdown tables (issue 6, scenarios a–h). Usage: see bench/run.sh, or -h.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench/harness"
)

func main() {
	testing.Init() // registers -test.benchtime, which scenario g sets for testing.Benchmark
	cfg := harness.Defaults()
	scen := flag.String("scenarios", strings.Join(harness.Scenarios, ","), "comma-separated scenarios to run (a,b,c,d,e,f,g,h)")
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
