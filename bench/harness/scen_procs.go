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
	"slices"
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
	Key   string        // the one key every worker of the contender wants (the prefix of its keys when Distinct)
	Hold  time.Duration // how long a winner holds the lock
	Think time.Duration // pause after a release before wanting the lock again
	// Distinct: Goroutines goroutines loop on fresh keys of their own, with no hold and no
	// think, using one attempt (Try) or the retrying acquire.
	Distinct   bool
	Goroutines int
	Try        bool
	// NodeConcurrency, when positive, is ours' WithNodeConcurrency (the default otherwise).
	NodeConcurrency int
}

// procsSlice is what one worker measured in one slice; it is the JSON line the worker
// writes on its stdout after each "run" line it read on stdin.
type procsSlice struct {
	N        int             // acquisitions
	Waits    []time.Duration // wanting the lock → having it, for each acquisition
	Censored int             // waits still open when the slice ended
	AcqErr   int             // acquire errors other than the slice's end
	RelFail  int
	Err      string        // the last error, "" for none
	CPU      time.Duration // the worker process's user and system CPU time over the slice
}

// RunWorkerIfAsked runs a worker of scenario procs and exits the process when workerEnv is
// set; otherwise it returns at once. Call it first thing in main (and in TestMain of the
// package's tests, whose binary the harness re-executes when run from tests).
func RunWorkerIfAsked() {
	if _, ok := os.LookupEnv(busyEnv); ok {
		runBusy(os.Stdin)
		os.Exit(0)
	}
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
	var opts []redlock.Option
	if w.NodeConcurrency > 0 {
		opts = append(opts, redlock.WithNodeConcurrency(w.NodeConcurrency))
	}
	switch w.Lib {
	case "ours":
		im, err = newOurs(w.Addrs, opts...)
	case "ours-poll":
		im, err = newOurs(w.Addrs, append(opts, redlock.WithoutWakeups())...)
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
	// Warm: dial every node and load the scripts, on keys of this worker's own. Tens of
	// workers start at once on a few cores, so a first try, or its release, may find the
	// nodes (or this process) too slow for the node timeout; the warm-up is not measured, so
	// it tries again, on a fresh key (a release that failed may have left the last one held),
	// up to warmTries times, and fails the run only then.
	const warmTries = 20
	var warmErr error
	for warmed, tries := 0, 0; warmed < 3; tries++ {
		if tries == warmTries {
			return fmt.Errorf("warm-up: %d of %d tries failed, the last: %w", tries-warmed, tries, warmErr)
		}
		h, err := im.try(ctx, fmt.Sprintf("%s:warm:%d:%d", w.Key, os.Getpid(), tries))
		if err == nil {
			err = im.release(ctx, h)
		}
		if err != nil {
			warmErr = err
			time.Sleep(100 * time.Millisecond) // a pause between tries of an unmeasured warm-up
			continue
		}
		warmed++
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
		c0 := selfCPU()
		s := workerSlice(ctx, im, w, d)
		s.CPU = selfCPU() - c0
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return sc.Err()
}

// workerSlice is the loop of runContended for one goroutine: want the lock, wait for it,
// hold it, release it, think; until d has passed. With Distinct, Goroutines goroutines loop
// on fresh keys instead (distinctSlice).
func workerSlice(ctx context.Context, im impl, w procsWorker, d time.Duration) procsSlice {
	if w.Distinct {
		return distinctSlice(ctx, im, w, d)
	}
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

// distinctSlice runs w.Goroutines goroutines, each taking and releasing fresh keys of its
// own (no contention at all) until d has passed: N counts the locks, AcqErr the acquire calls
// that failed before the slice's end.
func distinctSlice(ctx context.Context, im impl, w procsWorker, d time.Duration) procsSlice {
	deadline := time.Now().Add(d)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var mu sync.Mutex
	var s procsSlice
	var wg sync.WaitGroup
	pid := os.Getpid()
	for g := range w.Goroutines {
		wg.Go(func() {
			n, failed := 0, 0
			var last error
			for i := 0; sctx.Err() == nil; i++ {
				key := fmt.Sprintf("%s:%d:%d:%d:%d", w.Key, pid, g, deadline.UnixNano(), i)
				var h any
				var err error
				if w.Try {
					h, err = im.try(sctx, key)
				} else {
					h, err = im.wait(sctx, key)
				}
				if err != nil {
					if sctx.Err() == nil {
						failed++
						last = err
					}
					continue
				}
				n++
				_ = im.release(ctx, h) // also after the deadline
			}
			mu.Lock()
			defer mu.Unlock()
			s.N += n
			s.AcqErr += failed
			if last != nil {
				s.Err = last.Error()
			}
		})
	}
	wg.Wait()
	return s
}

// procGroup is the worker processes of one contender.
type procGroup struct {
	name  string
	procs []*workerProc
	st    fStats
	// servers are the nodes' PIDs, whose CPU time each slice adds to serverCPU; workerCPU adds
	// up the workers' own.
	servers              []int
	workerCPU, serverCPU time.Duration
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
	s0 := g.nodesCPU()
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
	g.serverCPU += g.nodesCPU() - s0
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, s := range res {
		g.workerCPU += s.CPU
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

// nodesCPU is the CPU time of the group's servers so far (0 without servers).
func (g *procGroup) nodesCPU() time.Duration { return pidsCPU(g.servers) }

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

// scenarioProcs measures contention across processes on one key: for each
// N of ProcsN, N worker processes on one key, each holding the lock ProcsHold and pausing
// ProcsThink, for ours with wake-ups (the default: the waiter queue), ours without (polling
// with the retry pause), and redsync, interleaved in slices. The targets: at 8 and 32
// processes against redsync, and at 64 against ours at 8 (no collapse as waiters grow).
func (r *runner) scenarioProcs(ctx context.Context) error {
	ours := map[int]float64{} // our acquisitions/s per N
	for _, n := range r.cfg.ProcsN {
		rate, err := r.procsOneKey(ctx, n)
		if err != nil {
			return err
		}
		ours[n] = rate
	}
	if at8, ok := ours[8]; ok && at8 > 0 {
		var ts []Target
		for _, n := range r.cfg.ProcsN {
			if n > 8 {
				ts = append(ts, atLeast("procs", fmt.Sprintf("wake-ups: acquisitions/s at %d processes vs ours at 8", n), ours[n]/at8, 0.8))
			}
		}
		if len(ts) > 0 {
			fmt.Fprintf(r.out, "## procs: growth with the number of processes\n\n")
			targetTable(r.out, ts)
			r.add(ts...)
		}
	}
	return nil
}

// runGroups runs every group's slices in rotating order until each has run for dur.
func runGroups(ctx context.Context, groups []*procGroup, dur, slice time.Duration) error {
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
	return ctx.Err()
}

// startGroups starts one group per contender; on error the ones started are stopped.
func startGroups(names []string, n int, workers []procsWorker) ([]*procGroup, error) {
	var groups []*procGroup
	for i, name := range names {
		g, err := startGroup(name, n, workers[i])
		if err != nil {
			stopGroups(groups)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func stopGroups(groups []*procGroup) {
	for _, g := range groups {
		g.stop()
	}
}

// procsOneKey measures n processes on one key and returns our acquisitions/s.
func (r *runner) procsOneKey(ctx context.Context, n int) (float64, error) {
	dur := r.cfg.ProcsDur
	addrs := r.addrs[:5]
	names := []string{"ours, wake-ups (default)", "ours, WithoutWakeups (polling)", "redsync default"}
	var workers []procsWorker
	for _, lib := range []string{"ours", "ours-poll", "redsync"} {
		workers = append(workers, procsWorker{Lib: lib, Addrs: addrs, Key: fmt.Sprintf("procs%d:%s", n, lib), Hold: r.cfg.ProcsHold, Think: r.cfg.ProcsThink})
	}
	groups, err := startGroups(names, n, workers)
	if err != nil {
		return 0, err
	}
	defer stopGroups(groups)
	slice := min(max(r.cfg.Slice, time.Second), dur)
	r.logf("procs: %d contenders × %s, %d processes on one key, interleaved in slices of %s", len(groups), dur, n, slice)
	if err := runGroups(ctx, groups, dur, slice); err != nil {
		return 0, err
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
	ourRate := float64(ours.total()) / ours.elapsed.Seconds()
	var ts []Target
	if p99, ok := procsTargets[n]; ok {
		j := jain(ours.perG)
		tag := fmt.Sprintf("wake-ups, %d processes: ", n)
		ts = append(ts,
			atLeast("procs", tag+"acquisitions/s vs redsync default", ourRate/rsRate, 1.5),
			atMost("procs", tag+"wait p99 vs redsync default", durRatio(ours.waits.pct(99), rs.waits.pct(99)), p99),
			Target{Scenario: "procs", Name: tag + "Jain fairness across processes", Want: "≥ 0.95", Got: fmt.Sprintf("%.3f", j), Pass: j >= 0.95},
		)
		if n > 8 {
			least := slices.Min(ours.perG)
			ts = append(ts, Target{Scenario: "procs", Name: tag + "every process served", Want: "≥ 1 each", Got: fmt.Sprintf("least %d", least), Pass: least > 0})
		}
	}
	if len(ts) > 0 {
		targetTable(w, ts)
		r.add(ts...)
	}
	return ourRate, nil
}

// procsTargets gives, per number of processes with targets against redsync, the wait p99
// wanted as a share of redsync's.
var procsTargets = map[int]float64{8: 0.1, 32: 0.2}

// scenarioProcsDistinct measures many processes without contention: for
// each shape P×G of ProcsDistinct, P worker processes of G goroutines each take and release
// fresh keys of their own, for ours (Acquire, and TryAcquire) and redsync (TryLock: one try;
// and Lock), interleaved in slices.
func (r *runner) scenarioProcsDistinct(ctx context.Context) error {
	for _, sh := range r.cfg.ProcsDistinct {
		if err := r.procsDistinct(ctx, sh[0], sh[1]); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) procsDistinct(ctx context.Context, p, g int) error {
	dur := r.cfg.ProcsDur
	addrs := r.addrs[:5]
	// The last row is ours with four pipelines per node, the default before 2026-12-05
	// (performance.md, "Pipelines per node"): the measurement behind DefaultNodeConcurrency.
	names := []string{"ours, Acquire + Release", "ours, TryAcquire + Release", "redsync, LockContext + Unlock", "redsync, TryLockContext + Unlock",
		"ours, Acquire + Release, WithNodeConcurrency(4)"}
	var workers []procsWorker
	for i, lib := range []string{"ours", "ours", "redsync", "redsync", "ours"} {
		w := procsWorker{Lib: lib, Addrs: addrs, Key: fmt.Sprintf("pd%dx%d:%d", p, g, i), Distinct: true, Goroutines: g, Try: i == 1 || i == 3}
		if i == 4 {
			w.NodeConcurrency = 4
		}
		workers = append(workers, w)
	}
	groups, err := startGroups(names, p, workers)
	if err != nil {
		return err
	}
	defer stopGroups(groups)
	for _, g := range groups {
		g.servers = r.nodePIDs(len(addrs))
	}
	slice := min(max(r.cfg.Slice, time.Second), dur)
	r.logf("procsd: %d contenders × %s, %d processes × %d goroutines on distinct keys, interleaved in slices of %s", len(groups), dur, p, g, slice)
	if err := runGroups(ctx, groups, dur, slice); err != nil {
		return err
	}
	w := r.out
	fmt.Fprintf(w, "## procsd: %d processes × %d goroutines on distinct keys, 5 healthy nodes\n\n", p, g)
	fmt.Fprintf(w, "%d worker processes per contender, each with %d goroutines that take and release fresh keys of their own, no hold, no pause; "+
		"%s per contender in slices of %s, interleaved. A failed call is one that returned an error before its slice ended.\n\n", p, g, dur, slice)
	rsTry := &groups[3].st
	rsRate := float64(rsTry.total()) / rsTry.elapsed.Seconds()
	rows := make([][]string, len(groups))
	var ns []string
	for i, gr := range groups {
		st := &gr.st
		lr := float64(st.total()) / st.elapsed.Seconds()
		n := time.Duration(max(st.total(), 1))
		rows[i] = []string{gr.name, rate(lr), ratio(lr, rsRate), fmt.Sprint(st.acqErr), us(gr.workerCPU / n), us(gr.serverCPU / n)}
		if st.lastErr != nil {
			ns = append(ns, fmt.Sprintf("%s, last error: `%v`", gr.name, st.lastErr))
		}
	}
	table(w, []string{"contender", "locks/s", "vs redsync TryLock", "failed calls", "worker CPU/lock", "redis-server CPU/lock"}, rows)
	notes(w, ns)
	fmt.Fprintf(w, "CPU per lock: worker = the %d worker processes (getrusage, each over its slices), redis-server = the five server processes (/proc, 10 ms ticks), "+
		"each divided by the locks taken. The machine's cores bound the two together: at this shape the rate follows their sum. "+
		"The last row is ours' Acquire with four pipelines in flight per node, the default before 2026-12-05, against one now (DefaultNodeConcurrency): "+
		"with a few goroutines per process, one pipeline per node makes the calls of a process's goroutines share round trips.\n\n", p)
	acq, try := &groups[0].st, &groups[1].st
	tag := fmt.Sprintf("%d×%d distinct keys: ", p, g)
	ts := []Target{
		atLeast("procsd", tag+"Acquire locks/s vs redsync TryLock", (float64(acq.total())/acq.elapsed.Seconds())/rsRate, 1.2),
		{Scenario: "procsd", Name: tag + "failed Acquire calls", Want: "0", Got: fmt.Sprint(acq.acqErr), Pass: acq.acqErr == 0},
		{Scenario: "procsd", Name: tag + "failed TryAcquire calls (healthy nodes)", Want: "0", Got: fmt.Sprint(try.acqErr), Pass: try.acqErr == 0},
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
