package harness

import (
	"context"
	"fmt"
	"math"
	"time"
)

// scenarioH measures the uncontended cycle on N = 1, 3, 5, … nodes, every (library, N)
// pair interleaved with all the others.
func (r *runner) scenarioH(ctx context.Context) error {
	ns := r.cfg.HNodes
	var cts []*contender
	for _, n := range ns {
		set, err := libSet(r.addrs[:n], fmt.Sprintf("h%d", n), fmt.Sprintf(" N=%d", n))
		if err != nil {
			closeAll(cts)
			return err
		}
		cts = append(cts, set...)
	}
	defer closeAll(cts)
	for _, c := range cts {
		c.warm(ctx)
	}
	r.logf("h: %d contenders × %s, interleaved", len(cts), r.cfg.HDur)
	sts := interleave(ctx, cts, r.cfg.HDur, r.cfg.Slice, r.cfg.MaxOps)

	w := r.out
	fmt.Fprintf(w, "## h: scaling with the number of nodes N (uncontended cycle, 1 goroutine)\n\n")
	head := []string{"N", "quorum"}
	for _, l := range libNames {
		head = append(head, l+" acquire p50", l+" ops/s")
	}
	head = append(head, "ours/redsync default ops/s")
	k := len(libNames)
	xs := make([]float64, len(ns))
	p50 := make([][]float64, k)
	for l := range p50 {
		p50[l] = make([]float64, len(ns))
	}
	rows := make([][]string, len(ns))
	var notesList []string
	for i, n := range ns {
		xs[i] = float64(n)
		row := []string{fmt.Sprint(n), fmt.Sprint(n/2 + 1)}
		for l := range libNames {
			st := sts[i*k+l]
			row = append(row, ms(st.acq.pct(50)), rate(st.opsPerSec()))
			p50[l][i] = float64(st.acq.pct(50))
			notesList = append(notesList, errNote(cts[i*k+l].name, st))
		}
		row = append(row, ratio(sts[i*k].opsPerSec(), sts[i*k+1].opsPerSec()))
		rows[i] = row
	}
	table(w, head, rows)
	var growth []string
	for l, name := range libNames {
		g := p50[l][len(ns)-1] / p50[l][0]
		growth = append(growth, fmt.Sprintf("%s: p50 grows %s from N=%d to N=%d, exponent %.2f", name, fmtRatio(g), ns[0], ns[len(ns)-1], slope(xs, p50[l])))
	}
	fmt.Fprintf(w, "Acquire p50 against N, fitted as p50 ∝ N^k over the rows (k < 1 is sub-linear):\n\n")
	notes(w, growth)
	notes(w, notesList)
	k0 := slope(xs, p50[0])
	ts := []Target{{Scenario: "h", Name: "acquire p50 grows sub-linearly with N (exponent k of p50 ∝ N^k)", Want: "k < 1",
		Got: fmt.Sprintf("k = %.2f", k0), Pass: !math.IsNaN(k0) && k0 < 1}}
	ts = append(ts, r.scenarioHParallel(ctx, cts, ns, xs)...)
	targetTable(w, ts)
	r.add(ts...)
	return nil
}

// hGoroutines is the concurrency of scenario h's second table.
const hGoroutines = 64

// scenarioHParallel is scenario h at hGoroutines goroutines on distinct keys (ours and redsync
// default, every (library, N) pair interleaved): ops/s, acquire p99, and the CPU-time cost of
// a lock, 1 / (ops/s), fitted against N.
func (r *runner) scenarioHParallel(ctx context.Context, all []*contender, ns []int, xs []float64) []Target {
	k := len(libNames)
	var cts []*contender
	for i := range ns {
		cts = append(cts, all[i*k], all[i*k+1]) // ours, redsync default
	}
	r.logf("h: %d contenders × %s at %d goroutines, interleaved", len(cts), r.cfg.HDur, hGoroutines)
	sts := interleaveWith(ctx, cts, r.cfg.HDur, r.cfg.Slice, func(c *contender, st *stats, d time.Duration) {
		c.runParallel(ctx, st, d, hGoroutines)
	})
	w := r.out
	fmt.Fprintf(w, "## h: scaling with the number of nodes N at %d goroutines (distinct keys)\n\n", hGoroutines)
	head := []string{"N", "ours ops/s", "ours acquire p99", "redsync default ops/s", "redsync default acquire p99", "ours/redsync ops/s", "ours/redsync p99"}
	cost := [2][]float64{make([]float64, len(ns)), make([]float64, len(ns))}
	rows := make([][]string, len(ns))
	var ns2 []string
	for i, n := range ns {
		o, rs := sts[2*i], sts[2*i+1]
		rows[i] = []string{fmt.Sprint(n), rate(o.opsPerSec()), ms(o.acq.pct(99)), rate(rs.opsPerSec()), ms(rs.acq.pct(99)),
			ratio(o.opsPerSec(), rs.opsPerSec()), fmtRatio(durRatio(o.acq.pct(99), rs.acq.pct(99)))}
		for l, st := range []*stats{o, rs} {
			cost[l][i] = 1 / st.opsPerSec()
			ns2 = append(ns2, errNote(cts[2*i+l].name, st))
		}
	}
	table(w, head, rows)
	ko, kr := slope(xs, cost[0]), slope(xs, cost[1])
	fmt.Fprintf(w, "The cost of a lock, 1 / (ops/s), against N, fitted as cost ∝ N^k: ours k = %.2f, redsync default k = %.2f (k < 1 is sub-linear).\n\n", ko, kr)
	notes(w, ns2)
	return []Target{{Scenario: "h", Name: fmt.Sprintf("cost per lock at %d goroutines grows sub-linearly with N (exponent k of 1/ops ∝ N^k)", hGoroutines),
		Want: "k < 1", Got: fmt.Sprintf("k = %.2f", ko), Pass: !math.IsNaN(ko) && ko < 1}}
}
