package harness

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// maxSamples bounds the latency samples kept per series, so memory stays bounded whatever
// the duration flags say. Past it, samples are dropped (counts and rates stay exact).
const maxSamples = 2_000_000

// series is a list of latency samples.
type series struct {
	d      []time.Duration
	sorted bool
}

func (s *series) add(d time.Duration) {
	if len(s.d) < maxSamples {
		s.d = append(s.d, d)
		s.sorted = false
	}
}

// pct returns the q-th percentile (0 < q ≤ 100) by nearest rank, or -1 with no samples.
func (s *series) pct(q float64) time.Duration {
	if len(s.d) == 0 {
		return -1
	}
	if !s.sorted {
		slices.Sort(s.d)
		s.sorted = true
	}
	i := int(math.Ceil(q/100*float64(len(s.d)))) - 1
	i = max(0, min(i, len(s.d)-1))
	return s.d[i]
}

func (s *series) max() time.Duration { return s.pct(100) }

// stats is what one contender measured in one phase of a scenario.
type stats struct {
	ops      int           // completed acquire+release cycles (both succeeded)
	acqFail  int           // acquire attempts that returned an error
	relFail  int           // releases that returned an error
	elapsed  time.Duration // wall time spent in this contender's slices
	slices   int
	acq, rel series    // latency of successful acquires; of every release call
	rates    []float64 // ops/s of each slice, in order: slice i of two contenders ran in the same round
	lastErr  error     // the last error seen, for the notes
	grMax    int       // most goroutines (without the proxies') left at the end of a slice, relative to its start
}

// merge adds the counts and samples of o (one goroutine's share of a slice) to s; the
// slice's wall time and rate are the caller's to add.
func (s *stats) merge(o *stats) {
	s.ops += o.ops
	s.acqFail += o.acqFail
	s.relFail += o.relFail
	for _, d := range o.acq.d {
		s.acq.add(d)
	}
	for _, d := range o.rel.d {
		s.rel.add(d)
	}
	if o.lastErr != nil {
		s.lastErr = o.lastErr
	}
}

func (s *stats) opsPerSec() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

// jain returns Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are equal,
// 1/n when one takes everything. It returns NaN when all are zero.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// slope returns the least-squares slope of ln y against ln x: the exponent k of y ∝ x^k.
func slope(xs, ys []float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for i := range xs {
		if xs[i] <= 0 || ys[i] <= 0 {
			continue
		}
		x, y := math.Log(xs[i]), math.Log(ys[i])
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if n < 2 || den == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / den
}

// ms formats a duration in milliseconds with three significant digits; "–" for none.
func ms(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.3f ms", v)
}

// rate formats operations per second.
func rate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// ratio formats a/b with enough digits to show small values like 0.007.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmtRatio(a / b)
}

func fmtRatio(r float64) string {
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0):
		return "–"
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f×", r)
	case r >= 0.01:
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.4f×", r)
}

func durRatio(a, b time.Duration) float64 {
	if a < 0 || b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// us formats a duration in microseconds.
func us(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// pairedRatios returns the median and quartiles of a.rates[i] / b.rates[i] over the rounds
// both ran: a spread for a ratio whose two sides were measured seconds apart.
func pairedRatios(a, b *stats) (p25, p50, p75 float64, n int) {
	var rs []float64
	for i := 0; i < len(a.rates) && i < len(b.rates); i++ {
		if b.rates[i] > 0 {
			rs = append(rs, a.rates[i]/b.rates[i])
		}
	}
	if len(rs) == 0 {
		return math.NaN(), math.NaN(), math.NaN(), 0
	}
	slices.Sort(rs)
	at := func(q float64) float64 { return rs[max(0, int(math.Ceil(q*float64(len(rs))))-1)] }
	return at(0.25), at(0.5), at(0.75), len(rs)
}

// spread formats pairedRatios.
func spread(a, b *stats) string {
	p25, p50, p75, n := pairedRatios(a, b)
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", fmtRatio(p50), fmtRatio(p25), fmtRatio(p75))
}
