package harness

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadSet returns the contenders of p and ramp on the given addresses: ours (TryAcquire)
// and redsync default (one LockContext call), then, with floors set, the two batching
// floors.
func loadSet(ctx context.Context, addrs []string, prefix string, floors bool) ([]*contender, error) {
	o, err := newOurs(addrs)
	if err != nil {
		return nil, err
	}
	cts := []*contender{
		{name: "ours", lib: "ours", impl: o, prefix: prefix + ":ours:"},
		{name: "redsync default", lib: "redsync default", impl: rsyncLock{newRsync(addrs, false)}, prefix: prefix + ":rs:"},
	}
	if !floors {
		return cts, nil
	}
	src, _, err := acquireLua()
	if err != nil {
		closeAll(cts)
		return nil, err
	}
	fb, err := newFloorBatch(ctx, addrs, src)
	if err != nil {
		closeAll(cts)
		return nil, err
	}
	cts = append(cts, &contender{name: "floor: go-redis, batched pipelines", lib: "floor", impl: fb, prefix: prefix + ":fb:"})
	fr, err := newFloorRueidis(addrs, src)
	if err != nil {
		closeAll(cts)
		return nil, err
	}
	return append(cts, &contender{name: "floor: rueidis (auto-pipelining)", lib: "floor", impl: fr, prefix: prefix + ":fr:"}), nil
}

// scenarioP measures throughput under parallel load: P goroutines on distinct keys, every
// (contender, P) pair interleaved with the others in slices.
func (r *runner) scenarioP(ctx context.Context) error {
	addrs := r.addrs[:5]
	cts, err := loadSet(ctx, addrs, "p", true)
	if err != nil {
		return err
	}
	defer closeAll(cts)
	for _, c := range cts {
		c.warm(ctx)
	}
	ps := r.cfg.PSizes
	// One contender per (implementation, P), all sharing the implementation's clients, so
	// that interleave rotates over every pair.
	var pairs []*contender
	pOf := map[*contender]int{}
	for _, p := range ps {
		for _, c := range cts {
			pc := &contender{name: c.name, lib: c.lib, impl: c.impl, prefix: fmt.Sprintf("%sP%d:", c.prefix, p)}
			pairs = append(pairs, pc)
			pOf[pc] = p
		}
	}
	r.logf("p: %d contenders × P = %v × %s, interleaved", len(cts), ps, r.cfg.PDur)
	// The CPU each pair's slices took, this process's (the client's) and the five servers':
	// one pair runs at a time, so a slice's CPU is its pair's.
	pids := r.nodePIDs(len(addrs))
	cpu := map[*contender]*cpuCost{}
	sts := interleaveWith(ctx, pairs, r.cfg.PDur, r.cfg.Slice, func(c *contender, st *stats, d time.Duration) {
		c0, s0 := selfCPU(), pidsCPU(pids)
		c.runParallel(ctx, st, d, pOf[c])
		e := cpu[c]
		if e == nil {
			e = &cpuCost{}
			cpu[c] = e
		}
		e.client += selfCPU() - c0
		e.server += pidsCPU(pids) - s0
	})

	w := r.out
	fmt.Fprintf(w, "## p: parallel load, P goroutines on distinct keys, 5 healthy nodes\n\n")
	fmt.Fprintf(w, "P goroutines each loop acquire + release on a fresh key every cycle, for %s per contender and P, in slices of %s interleaved over every (contender, P) pair. "+
		"Ours: one `TryAcquire` (default options, fencing on); redsync: one `NewMutex(key).LockContext(ctx)` (default options: it retries only when a quorum fails); a failed acquire counts as an error and the goroutine goes on with a new key. "+
		"locks/s = cycles in which both acquire and release succeeded, per second of wall time. "+
		"The floors send the library's real acquire script (lua/acquire.lua, with the fence counter) and the compare-and-delete to all 5 nodes and return at a quorum, with no library logic: "+
		"\"go-redis, batched pipelines\" puts each node call on a per-node queue from which %d sender goroutines per node take whatever is waiting (up to %d commands) and send it as one go-redis Pipeline; "+
		"\"rueidis\" is github.com/redis/rueidis v1.0.79, one goroutine per node call, its client pipelining concurrent calls by itself.\n\n",
		r.cfg.PDur, r.cfg.Slice, batchSenders, maxBatch)
	n := len(cts)
	rows := [][]string{}
	var ns []string
	var ts []Target
	cores := runtime.NumCPU()
	var ceil []string
	for i, p := range ps {
		ours, rs := sts[i*n], sts[i*n+1]
		for j := range cts {
			st := sts[i*n+j]
			cc := cpu[pairs[i*n+j]].perLock(st.ops)
			rows = append(rows, []string{fmt.Sprint(p), cts[j].name, rate(st.opsPerSec()),
				ms(st.acq.pct(50)), ms(st.acq.pct(99)), ms(st.rel.pct(99)), fmt.Sprint(st.ops),
				fmt.Sprintf("%d/%d", st.acqFail, st.relFail), ratio(ours.opsPerSec(), st.opsPerSec()), spread(ours, st),
				us(cc.client), us(cc.server)})
			ns = append(ns, errNote(fmt.Sprintf("P=%d %s", p, cts[j].name), st))
		}
		oc, rc := cpu[pairs[i*n]].perLock(ours.ops), cpu[pairs[i*n+1]].perLock(rs.ops)
		if oc.client > 0 && oc.server > 0 && rc.client > 0 && rc.server > 0 {
			oSum, rSum := oc.client+oc.server, rc.client+rc.server
			most := func(perLock time.Duration) float64 { return float64(cores) * float64(time.Second) / float64(perLock) }
			ceil = append(ceil, fmt.Sprintf("P=%d: ours %s per lock (client %s, servers %s), redsync %s (%s, %s): at most %s and %s locks/s on %d cores, a ratio of %s; measured %s and %s, %s",
				p, us(oSum), us(oc.client), us(oc.server), us(rSum), us(rc.client), us(rc.server),
				rate(most(oSum)), rate(most(rSum)), cores,
				ratio(float64(rSum), float64(oSum)), rate(ours.opsPerSec()), rate(rs.opsPerSec()), ratio(ours.opsPerSec(), rs.opsPerSec())))
		}
		switch {
		case p == 64:
			ts = append(ts, pTarget(p, ours, rs, 2))
		case p >= 256:
			ts = append(ts, pTarget(p, ours, rs, 2.5))
		}
	}
	table(w, []string{"P", "contender", "locks/s", "acquire p50", "acquire p99", "release p99", "cycles", "errors acq/rel", "ours/this locks/s", "per-round ours/this: median (IQR)",
		"client CPU/lock", "redis-server CPU/lock"}, rows)
	notes(w, ns)
	fmt.Fprintf(w, "CPU per lock: client = this process (getrusage over the contender's slices, the harness's loop included), redis-server = the five server processes (/proc, 10 ms ticks), each divided by the locks taken. "+
		"The client and the servers share the machine's %d cores, so their CPU per lock together bounds the rate. A rate close to its bound says the cores were that busy and the contender bound by CPU, not by waiting; two such rates are in the inverse ratio of their CPU per lock, and the columns say whose CPU it is:\n\n", cores)
	notes(w, ceil)
	var fl []string
	for i, p := range ps {
		ours, fb, fr := sts[i*n], sts[i*n+2], sts[i*n+3]
		fl = append(fl, fmt.Sprintf("P=%d: ours / go-redis batched floor %s, ours / rueidis floor %s", p,
			ratio(ours.opsPerSec(), fb.opsPerSec()), ratio(ours.opsPerSec(), fr.opsPerSec())))
	}
	fmt.Fprintf(w, "Ours against the floors (no target):\n\n")
	notes(w, fl)
	if len(ts) == 0 {
		fmt.Fprintf(w, "(No P = 64 or P ≥ 256 in this run: no targets.)\n\n")
		return nil
	}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}

func pTarget(p int, ours, rs *stats, want float64) Target {
	t := atLeast("p", fmt.Sprintf("P=%d: locks/s vs redsync default", p), ours.opsPerSec()/rs.opsPerSec(), want)
	t.Got += "; per round " + spread(ours, rs)
	return t
}

// rampStep is what one contender did during one step of the ramp.
type rampStep struct {
	g        int // goroutines running in the step
	ok, fail int64
	took     time.Duration
}

func (s rampStep) goodput() float64 { return float64(s.ok) / s.took.Seconds() }

// runRamp runs the ramp for one contender: goroutines loop acquire + release on fresh keys,
// starting with from of them and doubling every step until to, the new ones joining the
// running ones at each step.
func (r *runner) runRamp(ctx context.Context, c *contender, from, to int, step time.Duration) []rampStep {
	acqCtx, stop := context.WithCancel(ctx) // ends the acquires at the end; releases use ctx
	defer stop()
	var ok, fail atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	var steps []rampStep
	running := 0
	for g := from; g <= to && ctx.Err() == nil; g *= 2 {
		for ; running < g; running++ {
			pre := c.prefix + strconv.Itoa(running) + ":"
			wg.Go(func() {
				for i := 0; acqCtx.Err() == nil; i++ {
					h, err := c.impl.try(acqCtx, pre+strconv.Itoa(i))
					if err != nil {
						if acqCtx.Err() == nil {
							fail.Add(1)
						}
						continue
					}
					if c.impl.release(ctx, h) != nil {
						fail.Add(1)
						continue
					}
					ok.Add(1)
				}
			})
		}
		ok0, fail0 := ok.Load(), fail.Load()
		t0 := time.Now()
		sleep(ctx, step)
		steps = append(steps, rampStep{g: g, ok: ok.Load() - ok0, fail: fail.Load() - fail0, took: time.Since(t0)})
	}
	stop()
	return steps
}

// scenarioRamp doubles the offered concurrency step by step, ours and then redsync (one
// whole ramp each, not interleaved: goroutines join and never leave).
func (r *runner) scenarioRamp(ctx context.Context) error {
	addrs := r.addrs[:5]
	cts, err := loadSet(ctx, addrs, "ramp", false)
	if err != nil {
		return err
	}
	defer closeAll(cts)
	if !r.cfg.RampRedsync {
		cts[1].impl.close()
		cts = cts[:1]
	}
	all := make([][]rampStep, len(cts))
	for i, c := range cts {
		c.warm(ctx)
		quiesce(ctx, 5*time.Second)
		r.logf("ramp: %s, %d → %d goroutines, doubling every %s", c.name, r.cfg.RampFrom, r.cfg.RampTo, r.cfg.RampStep)
		all[i] = r.runRamp(ctx, c, r.cfg.RampFrom, r.cfg.RampTo, r.cfg.RampStep)
	}

	w := r.out
	fmt.Fprintf(w, "## ramp: offered concurrency doubled every %s from %d to %d goroutines, distinct keys, 5 healthy nodes\n\n", r.cfg.RampStep, r.cfg.RampFrom, r.cfg.RampTo)
	fmt.Fprintf(w, "Each goroutine loops acquire + release on a fresh key (ours `TryAcquire`, redsync one `LockContext`, as in p); at every step as many new goroutines join as are already running. "+
		"Goodput = cycles whose acquire and release both succeeded, per second of the step; failed = failed acquires and releases per second. "+
		"One whole ramp per library, one after the other (not interleaved: the goroutines of a ramp never leave until it ends).\n\n")
	head := []string{"goroutines"}
	for _, c := range cts {
		head = append(head, c.name+" goodput/s", c.name+" failed/s")
	}
	if len(cts) > 1 {
		head = append(head, "ours/redsync goodput")
	}
	var rows [][]string
	for i := range all[0] {
		row := []string{fmt.Sprint(all[0][i].g)}
		for k := range cts {
			if i < len(all[k]) {
				s := all[k][i]
				row = append(row, rate(s.goodput()), rate(float64(s.fail)/s.took.Seconds()))
			} else {
				row = append(row, "–", "–")
			}
		}
		if len(cts) > 1 && i < len(all[1]) {
			row = append(row, ratio(all[0][i].goodput(), all[1][i].goodput()))
		}
		rows = append(rows, row)
	}
	table(w, head, rows)
	if len(cts) == 1 {
		fmt.Fprintf(w, "redsync not run (-ramp-redsync=false).\n\n")
	}
	ours := all[0]
	if len(ours) == 0 {
		return nil
	}
	peak := slices.MaxFunc(ours, func(a, b rampStep) int { return cmp.Compare(a.goodput(), b.goodput()) })
	low := slices.MinFunc(ours, func(a, b rampStep) int { return cmp.Compare(a.goodput(), b.goodput()) })
	var after []rampStep
	for i, s := range ours {
		if s.g >= peak.g {
			after = ours[i:]
			break
		}
	}
	lowAfter := slices.MinFunc(after, func(a, b rampStep) int { return cmp.Compare(a.goodput(), b.goodput()) })
	fmt.Fprintf(w, "Ours peaks at %d goroutines (%s cycles/s); its lowest step is %d goroutines (%s of the peak), its lowest step from the peak on %d goroutines (%s of the peak).\n\n",
		peak.g, rate(peak.goodput()), low.g, ratio(low.goodput(), peak.goodput()), lowAfter.g, ratio(lowAfter.goodput(), peak.goodput()))
	t := atLeast("ramp", "goodput at every step vs the peak step's (lowest step)", low.goodput()/peak.goodput(), 0.8)
	t.Got += fmt.Sprintf(" at %d goroutines; peak at %d", low.g, peak.g)
	ts := []Target{t}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
