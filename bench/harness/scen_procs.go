package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// workerEnv, when set in a process's environment, makes that process a worker of scenario
// procs instead of whatever it would have been: the sidebyside binary or the harness's test
// binary re-executes itself with it (an environment variable rather than a flag, so that
// the test binary's own flag parsing never sees it). Its value is the worker's JSON config.
const workerEnv = "REDLOCK_BENCH_PROCS_WORKER"

// procsWorker is the configuration of one worker process.
type procsWorker struct {
	Lib   string        // "ours", "ours-poll" (WithoutWakeups) or "redsync"
	Addrs []string      // the nodes
	Key   string        // the one key every worker of the contender wants
	Hold  time.Duration // how long a winner holds the lock
	Think time.Duration // pause after a release before wanting the lock again
}

// procsSlice is what one worker measured in one slice; it is the JSON line the worker
// writes on its stdout after each "run" line it read on stdin.
type procsSlice struct {
	N        int             // acquisitions
	Waits    []time.Duration // wanting the lock → having it, for each acquisition
	Censored int             // waits still open when the slice ended
	AcqErr   int             // acquire errors other than the slice's end
	RelFail  int
	Err      string // the last error, "" for none
}

// RunWorkerIfAsked runs a worker of scenario procs and exits the process when workerEnv is
// set; otherwise it returns at once. Call it first thing in main (and in TestMain of the
// package's tests, whose binary the harness re-executes when run from tests).
func RunWorkerIfAsked() {
	spec, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	if err := runWorker(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "procs worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runWorker builds its contender, warms it, then serves "run <duration>" lines until its
// stdin ends: each runs the contended loop for that long and answers with a procsSlice.
func runWorker(spec string, in io.Reader, out io.Writer) error {
	var w procsWorker
	if err := json.Unmarshal([]byte(spec), &w); err != nil {
		return fmt.Errorf("bad %s: %w", workerEnv, err)
	}
	var im impl
	var err error
	switch w.Lib {
	case "ours":
		im, err = newOurs(w.Addrs)
	case "ours-poll":
		im, err = newOurs(w.Addrs, redlock.WithoutWakeups())
	case "redsync":
		im = newRsync(w.Addrs, false)
	default:
		err = fmt.Errorf("unknown library %q", w.Lib)
	}
	if err != nil {
		return err
	}
	defer im.close()
	ctx := context.Background()
	// Warm: dial every node and load the scripts, on a key of this worker's own.
	warmKey := fmt.Sprintf("%s:warm:%d", w.Key, os.Getpid())
	for range 3 {
		h, err := im.try(ctx, warmKey)
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if err := im.release(ctx, h); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	if err := enc.Encode(procsSlice{}); err != nil { // ready
		return err
	}
	for sc.Scan() {
		arg, ok := strings.CutPrefix(sc.Text(), "run ")
		if !ok {
			return fmt.Errorf("unexpected command %q", sc.Text())
		}
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		if err := enc.Encode(workerSlice(ctx, im, w, d)); err != nil {
			return err
		}
	}
	return sc.Err()
}

// workerSlice is the loop of runContended for one goroutine: want the lock, wait for it,
// hold it, release it, think; until d has passed.
func workerSlice(ctx context.Context, im impl, w procsWorker, d time.Duration) procsSlice {
	deadline := time.Now().Add(d)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var s procsSlice
	for {
		want := time.Now()
		if !want.Before(deadline) {
			break
		}
		h, err := im.wait(sctx, w.Key)
		if err != nil {
			if sctx.Err() != nil {
				s.Censored++
				break
			}
			s.AcqErr++
			s.Err = err.Error()
			continue
		}
		s.Waits = append(s.Waits, time.Since(want))
		s.N++
		sleep(ctx, w.Hold)
		if err := im.release(ctx, h); err != nil { // also after the deadline
			s.RelFail++
			s.Err = err.Error()
		}
		sleep(ctx, w.Think)
	}
	return s
}

// procGroup is the worker processes of one contender.
type procGroup struct {
	name  string
	procs []*workerProc
	st    fStats
}

type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	dec    *json.Decoder
	stderr *bytes.Buffer
}

// startGroup starts n worker processes of lib, each re-executing this binary, and waits
// until every one has warmed up.
func startGroup(name string, n int, w procsWorker) (*procGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	g := &procGroup{name: name, st: fStats{perG: make([]int, n)}}
	for range n {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			g.stop()
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			g.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			g.stop()
			return nil, err
		}
		g.procs = append(g.procs, &workerProc{cmd: cmd, stdin: stdin, dec: json.NewDecoder(stdout), stderr: &stderr})
	}
	for _, p := range g.procs {
		var ready procsSlice
		if err := p.dec.Decode(&ready); err != nil {
			err = p.fail(err)
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

func (p *workerProc) fail(err error) error {
	return fmt.Errorf("worker %d: %w (stderr: %q)", p.cmd.Process.Pid, err, strings.TrimSpace(p.stderr.String()))
}

// slice runs every worker of the group for d at once and adds what they measured.
func (g *procGroup) slice(d time.Duration) error {
	start := time.Now()
	for _, p := range g.procs {
		if _, err := fmt.Fprintf(p.stdin, "run %s\n", d); err != nil {
			return p.fail(err)
		}
	}
	res := make([]procsSlice, len(g.procs))
	errs := make([]error, len(g.procs))
	var wg sync.WaitGroup
	for i, p := range g.procs {
		wg.Go(func() {
			if err := p.dec.Decode(&res[i]); err != nil {
				errs[i] = p.fail(err)
			}
		})
	}
	wg.Wait()
	g.st.elapsed += time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, s := range res {
		g.st.perG[i] += s.N
		for _, w := range s.Waits {
			g.st.waits.add(w)
		}
		g.st.censored += s.Censored
		g.st.acqErr += s.AcqErr
		g.st.relFail += s.RelFail
		if s.Err != "" {
			g.st.lastErr = errors.New(s.Err)
		}
	}
	return nil
}

// stop ends the workers: their stdin closes, they release what they hold and exit; one
// that has not exited after 10 s is killed.
func (g *procGroup) stop() {
	for _, p := range g.procs {
		_ = p.stdin.Close()
	}
	for _, p := range g.procs {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

// scenarioProcs measures contention across processes (issue 12, item 4): ProcsN worker
// processes on one key, each holding the lock ProcsHold and pausing ProcsThink, for ours
// with wake-ups (the default), ours without (polling with the retry pause, as before), and
// redsync, interleaved in slices.
func (r *runner) scenarioProcs(ctx context.Context) error {
	n, dur := r.cfg.ProcsN, r.cfg.ProcsDur
	addrs := r.addrs[:5]
	libs := []struct{ name, lib string }{
		{"ours, wake-ups (default)", "ours"},
		{"ours, WithoutWakeups (polling)", "ours-poll"},
		{"redsync default", "redsync"},
	}
	var groups []*procGroup
	defer func() {
		for _, g := range groups {
			g.stop()
		}
	}()
	for _, l := range libs {
		g, err := startGroup(l.name, n, procsWorker{Lib: l.lib, Addrs: addrs, Key: "procs:" + l.lib, Hold: r.cfg.ProcsHold, Think: r.cfg.ProcsThink})
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		groups = append(groups, g)
	}
	slice := max(r.cfg.Slice, time.Second)
	if dur < slice {
		slice = dur
	}
	r.logf("procs: %d contenders × %s, %d processes on one key, interleaved in slices of %s", len(groups), dur, n, slice)
	for round := 0; ctx.Err() == nil; round++ {
		ran := false
		for j := range groups {
			g := groups[(j+round)%len(groups)]
			left := dur - g.st.elapsed
			if left <= 0 {
				continue
			}
			ran = true
			if err := g.slice(min(slice, left)); err != nil {
				return fmt.Errorf("%s: %w", g.name, err)
			}
		}
		if !ran {
			break
		}
	}

	w := r.out
	fmt.Fprintf(w, "## procs: contended across %d processes on one key, 5 healthy nodes\n\n", n)
	fmt.Fprintf(w, "%d worker processes per contender (the benchmark binary re-executed, one go-redis client per node and one Client or Redsync each), "+
		"each wanting the lock, acquiring it (ours: `Acquire`; redsync: `LockContext`, started again when its tries run out), holding it %s, "+
		"releasing it, pausing %s and wanting it again; %s per contender in slices of %s, interleaved. Wait = from wanting the lock to having it; "+
		"waits still open at a slice's end are censored. Jain's index is over the processes' acquisition counts.\n\n",
		n, r.cfg.ProcsHold, r.cfg.ProcsThink, dur, slice)
	rs := &groups[2].st
	rsRate := float64(rs.total()) / rs.elapsed.Seconds()
	rows := make([][]string, len(groups))
	var ns []string
	for i, g := range groups {
		st := &g.st
		acqRate := float64(st.total()) / st.elapsed.Seconds()
		counts := make([]string, len(st.perG))
		for k, x := range st.perG {
			counts[k] = fmt.Sprint(x)
		}
		rows[i] = []string{g.name, rate(acqRate), ratio(acqRate, rsRate),
			ms(st.waits.pct(50)), ms(st.waits.pct(99)), ms(st.waits.max()),
			fmtRatio(durRatio(st.waits.pct(99), rs.waits.pct(99))),
			fmt.Sprintf("%.3f", jain(st.perG)), strings.Join(counts, " "),
			fmt.Sprint(st.censored), fmt.Sprintf("%d/%d", st.acqErr, st.relFail)}
		if st.lastErr != nil {
			ns = append(ns, fmt.Sprintf("%s, last error: `%v`", g.name, st.lastErr))
		}
	}
	table(w, []string{"contender", "acquisitions/s", "vs redsync default", "wait p50", "wait p99", "wait max",
		"p99 vs redsync default", "Jain fairness", "acquisitions per process", "censored", "errors acq/rel"}, rows)
	notes(w, ns)
	ours := &groups[0].st
	j := jain(ours.perG)
	ts := []Target{
		atLeast("procs", "wake-ups: acquisitions/s vs redsync default", (float64(ours.total())/ours.elapsed.Seconds())/rsRate, 1.5),
		atMost("procs", "wake-ups: wait p99 vs redsync default", durRatio(ours.waits.pct(99), rs.waits.pct(99)), 0.1),
		{Scenario: "procs", Name: "wake-ups: Jain fairness across processes", Want: "≥ 0.95", Got: fmt.Sprintf("%.3f", j), Pass: j >= 0.95},
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
