package harness

import (
	"context"
	"fmt"
	"math"
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
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
