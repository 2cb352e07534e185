package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/faultproxy"
)

// faultDelay is the delay added each way by the slow node's proxy in scenario b.
const faultDelay = 20 * time.Millisecond

// Thresholds for "no goroutine growth", chosen here (no target names one): after the
// settle pause at most noLeak goroutines more than before the run, and right at the end
// of a run with a dead or hung node at most maxStragglers still working for it.
const (
	// noLeak also allows for the senders a Client keeps once it has used them (at most
	// WithNodeConcurrency per node, DefaultNodeConcurrency × 5 here), which wait for work until
	// Close.
	noLeak        = 5 + 5*redlock.DefaultNodeConcurrency
	maxStragglers = 50
	// releaseSlack is how much slower than acquire a release may be and still count as
	// "as fast as acquire".
	releaseSlack = 1.2
)

type faultKind struct {
	title string
	onset func(*faultproxy.Proxy) error
	what  string
}

var faultKinds = map[string]faultKind{
	"b": {
		title: "one node slow: +20 ms each way through a TCP proxy",
		onset: func(p *faultproxy.Proxy) error { p.SetDelay(faultDelay, faultDelay); return nil },
		what:  "node 5 is reached through a faultproxy that delays every chunk by 20 ms towards the node and 20 ms back",
	},
	"c": {
		title: "one node dead: connections refused",
		onset: func(p *faultproxy.Proxy) error { return p.SetRefuse(true) },
		what:  "node 5 is reached through a faultproxy; at the fault's onset it drops the open connections and refuses new ones (ECONNREFUSED)",
	},
	"d": {
		title: "one node hung",
		onset: func(p *faultproxy.Proxy) error { p.SetBlackhole(true); return nil },
		what: "node 5 is reached through a faultproxy that, from the fault's onset, swallows every byte both ways: connections stay open " +
			"and new ones are accepted, but nothing is ever answered, as with a SIGSTOPped server (a proxy rather than SIGSTOP so that " +
			"the healthy contenders, which talk to node 5 directly, can be interleaved with the faulty ones; a real SIGSTOP check follows)",
	},
}

// goroutineCount is what one library's first window did to the goroutine count (the fault
// proxies' own goroutines left out): the count before the fault, right after the window,
// and how long it took to come back to before + noLeak once the calls stopped.
type goroutineCount struct {
	before, end, last int
	took              time.Duration
	drained           bool
}

func (g goroutineCount) String() string {
	if g.drained {
		return fmt.Sprintf("%d → %d → %d in %.1f s", g.before, g.end, g.last, g.took.Seconds())
	}
	return fmt.Sprintf("%d → %d → still %d after %.0f s", g.before, g.end, g.last, g.took.Seconds())
}

func (g goroutineCount) drainStatus() string {
	if g.drained {
		return fmt.Sprintf("drained in %.1f s", g.took.Seconds())
	}
	return fmt.Sprintf("+%d after %.0f s", g.last-g.before, g.took.Seconds())
}

// scenarioFault runs b, c or d. Every library gets two clients: a healthy one talking to
// the five nodes directly and a degraded one reaching node 5 through its own faultproxy.
//
// Phase 1, one library at a time: wait for the goroutine count to settle, start the fault
// on that library's proxy, measure the first window, count goroutines right away and again
// after the settle pause. Phase 2: steady state, all six contenders interleaved.
func (r *runner) scenarioFault(ctx context.Context, id string) error {
	kind := faultKinds[id]
	addrs := r.addrs[:5]
	healthy, err := libSet(addrs, id+"h", " healthy")
	if err != nil {
		return err
	}
	defer closeAll(healthy)

	proxies := make([]*faultproxy.Proxy, 3)
	daddrs := make([][]string, 3)
	for i := range proxies {
		p, err := faultproxy.Start(addrs[4])
		if err != nil {
			return err
		}
		proxies[i] = p
		daddrs[i] = append(append([]string(nil), addrs[:4]...), p.Addr())
	}
	closeProxies := func() {
		for _, p := range proxies {
			_ = p.Close()
		}
	}
	degraded := make([]*contender, 0, 3)
	for k := range 3 {
		c, err := newLib(k, daddrs[k], id, " "+id)
		if err != nil {
			closeProxies()
			closeAll(degraded)
			return err
		}
		degraded = append(degraded, c)
	}
	// Proxies first: calls blocked on a hung node then fail at once instead of waiting for
	// go-redis's read timeout, and Client.Close of ours does not wait for them.
	cleaned := false
	cleanup := func() {
		if !cleaned {
			cleaned = true
			closeProxies()
			closeAll(degraded)
		}
	}
	defer cleanup()

	for _, c := range append(append([]*contender(nil), healthy...), degraded...) {
		c.warm(ctx)
	}

	first := make([]*stats, 3)
	before := make([]*stats, 3) // the same library's healthy client, right before the fault
	grs := make([]goroutineCount, 3)
	for k, c := range degraded {
		first[k], before[k] = &stats{}, &stats{}
		healthy[k].runSlice(ctx, before[k], r.cfg.First, r.cfg.MaxOps)
		g0 := quiesce(ctx, 5*time.Second)
		if err := kind.onset(proxies[k]); err != nil {
			return err
		}
		r.logf("%s: %s, first %s", id, c.name, r.cfg.First)
		c.runSlice(ctx, first[k], r.cfg.First, r.cfg.MaxOps)
		end := goroutines()
		if r.cfg.DebugGoroutines {
			r.logf("%s: goroutines right after the first window of %s:\n%s", id, c.name, goroutineSummary())
		}
		took, last, ok := drain(ctx, g0+noLeak, r.cfg.Settle)
		grs[k] = goroutineCount{before: g0, end: end, last: last, took: took, drained: ok}
	}

	cts := make([]*contender, 0, 6)
	for k := range degraded {
		cts = append(cts, healthy[k], degraded[k])
	}
	r.logf("%s: steady state, %d contenders × %s, interleaved", id, len(cts), r.cfg.FaultDur)
	sts := interleave(ctx, cts, r.cfg.FaultDur, r.cfg.Slice, r.cfg.MaxOps)

	w := r.out
	fmt.Fprintf(w, "## %s: %s\n\n", id, kind.title)
	fmt.Fprintf(w, "Healthy rows talk to the 5 nodes directly; faulty rows reach node 5 (of 5) through their own proxy: %s. "+
		"\"first\" is the first %s after the fault starts, measured for one library at a time and compared with the same library's healthy client measured for as long right before; "+
		"\"steady\" follows, all six rows interleaved, and is compared with the healthy steady row. "+
		"Goroutines (the proxies' own left out): count before the fault → right after the first window → once back to at most before + %d, polled every 100 ms for up to %s. "+
		"Stragglers (faulty steady rows): goroutines left at the end of a slice minus those at its start, the most over the slices; "+
		"rough, since other rows' stragglers live across slice boundaries.\n\n",
		kind.what, r.cfg.First, noLeak, r.cfg.Settle)
	head := []string{"contender", "phase", "ops/s", "vs own healthy", "acquire p50", "acquire p99", "release p50", "release p99",
		"release/acquire p99", "cycles", "failed acq/rel", "goroutines", "stragglers at slice end (max)"}
	var rows [][]string
	var ns []string
	row := func(name, phase string, st, base *stats, gr string) []string {
		strag := "" // only meaningful for a faulty client's steady slices
		if phase == "steady" && st != base {
			strag = fmt.Sprint(st.grMax)
		}
		return []string{name, phase, rate(st.opsPerSec()), ratio(st.opsPerSec(), base.opsPerSec()),
			ms(st.acq.pct(50)), ms(st.acq.pct(99)), ms(st.rel.pct(50)), ms(st.rel.pct(99)),
			fmtRatio(durRatio(st.rel.pct(99), st.acq.pct(99))),
			fmt.Sprint(st.ops), fmt.Sprintf("%d/%d", st.acqFail, st.relFail), gr, strag}
	}
	for k := range degraded {
		h, s := sts[2*k], sts[2*k+1]
		g := grs[k]
		rows = append(rows,
			row(healthy[k].name, "steady", h, h, ""),
			row(healthy[k].name, "before fault", before[k], before[k], ""),
			row(degraded[k].name, "first", first[k], before[k], g.String()),
			row(degraded[k].name, "steady", s, h, ""))
		ns = append(ns, errNote(degraded[k].name+" (first)", first[k]), errNote(degraded[k].name+" (steady)", s))
	}
	table(w, head, rows)
	notes(w, ns)

	oh, of, ost := sts[0], first[0], sts[1]
	g := grs[0]
	ts := []Target{
		atLeast(id, "ops/s in the first window vs healthy right before", of.opsPerSec()/before[0].opsPerSec(), 0.7),
		atLeast(id, "ops/s in steady state vs healthy", ost.opsPerSec()/oh.opsPerSec(), 0.7),
		{Scenario: id, Name: fmt.Sprintf("no goroutine leak: back to before + %d once calls stop", noLeak), Want: fmt.Sprintf("within %s", r.cfg.Settle),
			Got: g.drainStatus(), Pass: g.drained},
	}
	if id != "b" {
		ts = append(ts, Target{Scenario: id, Name: "stragglers right after the first window − before", Want: fmt.Sprintf("≤ %d", maxStragglers),
			Got: fmt.Sprint(g.end - g.before), Pass: g.end-g.before <= maxStragglers})
	}
	ts = append(ts,
		atMost(id, "release p50 / acquire p50 (steady)", durRatio(ost.rel.pct(50), ost.acq.pct(50)), releaseSlack),
		atMost(id, "release p99 / acquire p99 (steady)", durRatio(ost.rel.pct(99), ost.acq.pct(99)), releaseSlack),
	)
	targetTable(w, ts)
	r.add(ts...)

	if id == "d" {
		// Stop the faulty clients first, so that their stragglers do not run into the pause.
		cleanup()
		return r.sigstopCheck(ctx, oh)
	}
	return nil
}

// sigstopCheck is the literal version of d: node 5 stopped with SIGSTOP while one library
// at a time runs for the first-window duration on fresh clients.
func (r *runner) sigstopCheck(ctx context.Context, oursHealthy *stats) error {
	addrs := r.addrs[:5]
	node := r.nodes[4]
	fmt.Fprintf(r.out, "### d, SIGSTOP check: node 5 stopped with SIGSTOP, one library at a time, %s each, fresh clients\n\n", r.cfg.First)
	head := []string{"contender", "ops/s", "vs ours healthy (d)", "acquire p50", "acquire p99", "release p50", "release p99", "release/acquire p99", "cycles", "failed acq/rel", "goroutines"}
	var rows [][]string
	var ns []string
	var ours *stats
	for k := range 3 {
		c, err := newLib(k, addrs, fmt.Sprintf("dstop%d", k), " (SIGSTOP)")
		if err != nil {
			return err
		}
		c.warm(ctx)
		st := &stats{}
		before := quiesce(ctx, 5*time.Second)
		if err := node.Pause(); err != nil {
			c.impl.close()
			return err
		}
		r.logf("d: SIGSTOP check, %s", c.name)
		c.runSlice(ctx, st, r.cfg.First, r.cfg.MaxOps)
		end := goroutines()
		err = node.Resume()
		c.impl.close()
		if err != nil {
			return err
		}
		settled := quiesce(ctx, 5*time.Second)
		rows = append(rows, []string{c.name, rate(st.opsPerSec()), ratio(st.opsPerSec(), oursHealthy.opsPerSec()),
			ms(st.acq.pct(50)), ms(st.acq.pct(99)), ms(st.rel.pct(50)), ms(st.rel.pct(99)),
			fmtRatio(durRatio(st.rel.pct(99), st.acq.pct(99))), fmt.Sprint(st.ops),
			fmt.Sprintf("%d/%d", st.acqFail, st.relFail), fmt.Sprintf("%d → %d (resumed, closed: %d)", before, end, settled)})
		ns = append(ns, errNote(c.name, st))
		if k == 0 {
			ours = st
		}
	}
	table(r.out, head, rows)
	notes(r.out, ns)
	fmt.Fprintf(r.out, "A cross-check of d with a real SIGSTOP, compared with ours' healthy steady row of d. It is not interleaved, so it "+
		"carries no target; ours here: %s of healthy, release p99 / acquire p99 = %s.\n\n",
		ratio(ours.opsPerSec(), oursHealthy.opsPerSec()), fmtRatio(durRatio(ours.rel.pct(99), ours.acq.pct(99))))
	return nil
}
