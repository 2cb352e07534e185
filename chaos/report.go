package chaos

// The lab's report: per scenario a summary of its runs, as a text table, Markdown and an
// HTML page with timelines, and RunLab, which runs the scenarios to fill it.

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"runtime"
	"strings"
	"time"
)

// Report is the outcome of a lab run over some scenarios, ready to be written as markdown
// and as an HTML page.
type Report struct {
	Profile  Profile
	Seed     uint64
	Started  time.Time
	Elapsed  time.Duration
	Sections []Section
}

// Section is one scenario and its runs.
type Section struct {
	Scenario *Scenario
	Runs     []*Result
}

// Summary adds up the runs of one scenario.
type Summary struct {
	Runs           int
	Violations     int // mutual-exclusion violations
	Overlaps       int // overlapping pairs of critical sections
	StaleAccepted  int
	StaleRejected  int
	Acquisitions   int
	AcqPerSec      float64 // over all runs' busy time
	FaultAcqPerSec float64 // while node faults held, -1 for none
	WaitP99        time.Duration
	TokenProblems  int
	LostWrites     int
	Lin            string // the worst porcupine verdict: illegal, then unknown, then ok
	Failed         int    // runs that went against the expectation
}

// Summarize adds up the runs of a section.
func (s Section) Summarize() Summary {
	sum := Summary{Runs: len(s.Runs), Lin: LinOK}
	var busy, faultTime time.Duration
	var waits []time.Duration
	faultN := 0
	for _, r := range s.Runs {
		v := r.Verdict
		n, d := faultAcquisitions(r.History)
		faultN, faultTime = faultN+n, faultTime+d
		sum.Violations += v.Violations
		sum.Overlaps += len(v.Overlaps)
		sum.StaleAccepted += len(v.StaleAccepted)
		sum.StaleRejected += v.StaleRejected
		sum.Acquisitions += v.Acquisitions
		sum.TokenProblems += len(v.TokenProblems)
		sum.LostWrites += len(v.LostWrites)
		busy += r.History.Busy
		for _, hd := range acquisitions(r.History) {
			waits = append(waits, hd.Granted-hd.Asked)
		}
		switch {
		case v.Linearizable == LinIllegal:
			sum.Lin = LinIllegal
		case v.Linearizable == LinUnknown && sum.Lin == LinOK:
			sum.Lin = LinUnknown
		}
		if !r.OK() {
			sum.Failed++
		}
	}
	if busy > 0 {
		sum.AcqPerSec = float64(sum.Acquisitions) / busy.Seconds()
	}
	sum.WaitP99 = percentile(waits, 0.99)
	sum.FaultAcqPerSec = -1
	if faultTime > 0 {
		sum.FaultAcqPerSec = float64(faultN) / faultTime.Seconds()
	}
	return sum
}

// OK reports whether every run of every section behaved as expected.
func (rep *Report) OK() bool {
	for _, s := range rep.Sections {
		if s.Summarize().Failed > 0 {
			return false
		}
	}
	return true
}

func verdictWord(failed int) string {
	if failed == 0 {
		return "as expected"
	}
	return fmt.Sprintf("UNEXPECTED (%d runs)", failed)
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func (rep *Report) header() string {
	p := rep.Profile
	return fmt.Sprintf("Profile %s: TTL %v, node timeout %v, %d workload clients (%d in the retry storm), 5 real redis-server nodes per run, seed %d, %s, %s/%s, GOMAXPROCS %d. Started %s, took %v.",
		p.Name, p.TTL, p.NodeTimeout, p.Clients, p.StormClients, rep.Seed, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.GOMAXPROCS(0), rep.Started.Format(time.RFC3339), rep.Elapsed.Round(time.Second))
}

// WriteSummary writes the header line and the summary table, one row per scenario, as
// markdown.
func (rep *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	rep.summary(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func (rep *Report) summary(b *strings.Builder) {
	fmt.Fprintf(b, "%s\n\n", rep.header())
	b.WriteString("| scenario | expected | runs | ME violations (overlapping pairs) | stale writes accepted | stale writes rejected | acquisitions/s | during node faults | p99 wait | token claims | porcupine | lost writes | verdict |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|\n")
	for _, s := range rep.Sections {
		sum := s.Summarize()
		fmt.Fprintf(b, "| %s | %s | %d | %d (%d) | %d | %d | %.1f | %s | %s | %s | %s | %d | %s |\n",
			s.Scenario.Name, s.Scenario.Expect.Claim(), sum.Runs, sum.Violations, sum.Overlaps, sum.StaleAccepted,
			sum.StaleRejected, sum.AcqPerSec, rate(sum.FaultAcqPerSec), ms(sum.WaitP99), tokenWord(sum.TokenProblems), sum.Lin, sum.LostWrites,
			verdictWord(sum.Failed))
	}
}

// WriteMarkdown writes the report as markdown: the summary table with one row per
// scenario, then per scenario its story, a table with one row per run, and each run's
// faults, overlaps and refused writes.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Redlock chaos lab\n\n")
	rep.summary(&b)
	for _, s := range rep.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s (%s)\n\n%s\n\n", s.Scenario.Name, s.Scenario.Summary, s.Scenario.Group, s.Scenario.Story)
		b.WriteString("| run | seed | acquisitions | acquisitions/s | during node faults | p50 wait | p99 wait | ME violations | overlapping pairs | stale accepted | stale rejected | biggest token step | porcupine | verdict |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, r := range s.Runs {
			v := r.Verdict
			fmt.Fprintf(&b, "| %d | %d | %d | %.1f | %s | %s | %s | %d | %d | %d | %d | %d | %s | %s |\n",
				r.Run, r.Seed, v.Acquisitions, v.AcqPerSec, rate(v.FaultAcqPerSec), ms(v.WaitP50), ms(v.WaitP99), v.Violations, len(v.Overlaps),
				len(v.StaleAccepted), v.StaleRejected, v.BiggestJump, v.Linearizable, verdictWord(len(r.Problems)))
		}
		for _, r := range s.Runs {
			writeRunDetail(&b, r)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rate prints an acquisition rate, "-" for none measured.
func rate(r float64) string {
	if r < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f/s", r)
}

func tokenWord(problems int) string {
	if problems == 0 {
		return "U, O hold"
	}
	return fmt.Sprintf("%d broken", problems)
}

// writeRunDetail lists a run's faults, its overlaps with their tokens, and its problems.
func writeRunDetail(b *strings.Builder, r *Result) {
	h, v := r.History, r.Verdict
	fmt.Fprintf(b, "\nRun %d:\n\n", r.Run)
	fmt.Fprintf(b, "- critical sections per client: %d to %d (%d clients), longest wait %s\n",
		v.PerClientMin, v.PerClientMax, h.Clients, ms(v.WaitMax))
	for _, f := range h.Faults {
		where := ""
		if len(f.Nodes) > 0 {
			where += fmt.Sprintf(" nodes %v", f.Nodes)
		}
		if len(f.Clients) > 0 {
			where += fmt.Sprintf(" clients %v", f.Clients)
		}
		fmt.Fprintf(b, "- fault at %s–%s: %s%s (%s)\n", secs(f.At), secs(f.End), f.Kind, where, f.Note)
	}
	const maxListed = 5
	for i, o := range v.Overlaps {
		if i == maxListed {
			fmt.Fprintf(b, "- … and %d more overlapping pairs\n", len(v.Overlaps)-maxListed)
			break
		}
		a, bb := h.Holds[o.A], h.Holds[o.B]
		kind := "client %d was past its validity deadline"
		if o.BothValid {
			kind = "both locks valid (client %d's deadline had not passed): the lock was granted twice"
		}
		fmt.Fprintf(b, "- overlap %s–%s: client %d (token %d) and client %d (token %d, %+d); %s\n",
			secs(o.From), secs(o.To), a.Client, a.Token, bb.Client, bb.Token, int64(bb.Token)-int64(a.Token), fmt.Sprintf(kind, a.Client))
	}
	if v.StaleRejected > 0 {
		var ws []string
		for _, w := range h.Writes {
			if w.Applied >= 0 && !w.Accepted && !w.Vetoed {
				ws = append(ws, fmt.Sprintf("client %d token %d on %s at %s (store had %d)", w.Client, w.Token, w.Key, secs(w.Applied), w.Highest))
			}
		}
		if len(ws) > maxListed {
			ws = append(ws[:maxListed], fmt.Sprintf("… %d more", len(ws)-maxListed))
		}
		fmt.Fprintf(b, "- writes rejected: %s\n", strings.Join(ws, "; "))
	}
	if v.Transfers > 0 {
		var sum int64
		for _, bal := range h.Balances {
			sum += bal
		}
		fmt.Fprintf(b, "- transfers: %d reached the store, %d refused whole (a leg was stale); balances %v, sum %d\n",
			v.Transfers, v.TransfersRefused, h.Balances, sum)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(b, "- **problem:** %s\n", p)
	}
	if len(h.Notes) > 0 {
		fmt.Fprintf(b, "- script log:\n")
		for _, n := range h.Notes {
			fmt.Fprintf(b, "  - `%s`\n", strings.TrimSpace(n))
		}
	}
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms": ms, "rate": rate, "claim": func(e Expect) string { return e.Claim() }, "verdict": verdictWord, "tokens": tokenWord,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Redlock chaos lab</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
tr.bad td { background: #ffebee; }
.ok { color: #2e7d32; } .bad { color: #c62828; font-weight: bold; }
svg { border: 1px solid #ddd; margin: 8px 0 24px; font: 11px system-ui, sans-serif; }
svg .token { font-size: 9px; }
h2 { margin-top: 36px; border-bottom: 1px solid #ddd; }
</style></head><body>
<h1>Redlock chaos lab</h1>
<p>{{.Header}}</p>
<table id="summary"><tr><th>scenario</th><th>expected</th><th>runs</th><th>ME violations (pairs)</th><th>stale writes accepted</th><th>stale writes rejected</th><th>acquisitions/s</th><th>during node faults</th><th>p99 wait</th><th>token claims</th><th>porcupine</th><th>lost writes</th><th>verdict</th></tr>
{{range .Rows}}<tr{{if .Sum.Failed}} class="bad"{{end}}><td><a href="#{{.S.Scenario.Name}}">{{.S.Scenario.Name}}</a></td><td class="text">{{claim .S.Scenario.Expect}}</td><td>{{.Sum.Runs}}</td><td>{{.Sum.Violations}} ({{.Sum.Overlaps}})</td><td>{{.Sum.StaleAccepted}}</td><td>{{.Sum.StaleRejected}}</td><td>{{printf "%.1f" .Sum.AcqPerSec}}</td><td>{{rate .Sum.FaultAcqPerSec}}</td><td>{{ms .Sum.WaitP99}}</td><td class="text">{{tokens .Sum.TokenProblems}}</td><td class="text">{{.Sum.Lin}}</td><td>{{.Sum.LostWrites}}</td><td class="text {{if .Sum.Failed}}bad{{else}}ok{{end}}">{{verdict .Sum.Failed}}</td></tr>
{{end}}</table>
<p>An ME violation is a group of critical sections of one key that overlapped in time; the pairs count every two sections that did. A stale write is one whose token is below the highest the store had already admitted. Porcupine checks the store's history against a fenced-register model; "unknown" (the check timed out) counts as a failure.</p>
{{range .Rows}}<section id="{{.S.Scenario.Name}}"><h2>{{.S.Scenario.Name}}</h2>
<p><b>{{.S.Scenario.Summary}}</b> ({{.S.Scenario.Group}}). {{.S.Scenario.Story}}</p>
<table><tr><th>run</th><th>seed</th><th>acquisitions</th><th>acq/s</th><th>during node faults</th><th>p50 wait</th><th>p99 wait</th><th>ME violations</th><th>pairs</th><th>stale accepted</th><th>stale rejected</th><th>biggest token step</th><th>porcupine</th><th>verdict</th></tr>
{{range .S.Runs}}<tr{{if .Problems}} class="bad"{{end}}><td>{{.Run}}</td><td>{{.Seed}}</td><td>{{.Verdict.Acquisitions}}</td><td>{{printf "%.1f" .Verdict.AcqPerSec}}</td><td>{{rate .Verdict.FaultAcqPerSec}}</td><td>{{ms .Verdict.WaitP50}}</td><td>{{ms .Verdict.WaitP99}}</td><td>{{.Verdict.Violations}}</td><td>{{len .Verdict.Overlaps}}</td><td>{{len .Verdict.StaleAccepted}}</td><td>{{.Verdict.StaleRejected}}</td><td>{{.Verdict.BiggestJump}}</td><td class="text">{{.Verdict.Linearizable}}</td><td class="text">{{if .Problems}}<span class="bad">{{range .Problems}}{{.}}<br>{{end}}</span>{{else}}<span class="ok">as expected</span>{{end}}</td></tr>
{{end}}</table>
{{with .Show}}{{if .History.Notes}}<details><summary>script log of run {{.Run}}</summary><pre>{{range .History.Notes}}{{.}}
{{end}}</pre></details>{{end}}
<p>Timeline of run {{.Run}}{{if $.Partial .}} (its first {{$.Window .}}: the run has too many critical sections to draw them all){{end}}: per node, whose key it held (sampled); per client, its critical sections (hatched where it worked past its validity deadline), its writes (ticks: accepted, red circles: rejected); red bands: overlapping critical sections; yellow: faults.</p>
{{$.SVG .}}{{end}}
</section>
{{end}}</body></html>
`))

type pageRow struct {
	S    Section
	Sum  Summary
	Show *Result
}

type pageData struct {
	Header string
	Rows   []pageRow
}

// Partial reports whether the run's timeline shows only the beginning of the run.
func (pageData) Partial(r *Result) bool { return timelineWindow(r.History) < r.History.Duration }

// Window returns how much of the run the timeline shows, in seconds.
func (pageData) Window(r *Result) string { return secs(timelineWindow(r.History)) }

// SVG renders a run's timeline for the page.
func (pageData) SVG(r *Result) template.HTML { return template.HTML(timeline(r)) }

// WriteHTML writes the report as one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched): the summary table, and per scenario its runs and the timeline
// of one run.
func (rep *Report) WriteHTML(w io.Writer) error {
	d := pageData{Header: rep.header()}
	for _, s := range rep.Sections {
		d.Rows = append(d.Rows, pageRow{S: s, Sum: s.Summarize(), Show: showcase(s.Runs)})
	}
	return pageTmpl.Execute(w, d)
}

// LabOptions says what RunLab runs.
type LabOptions struct {
	Scenarios []*Scenario // nil: all
	Runs      int         // runs per scenario, at least 1
	Seed      uint64      // run i of every scenario uses seed Seed+i
	Profile   Profile
	// Progress, if set, is called after every run.
	Progress func(*Result)
}

// RunLab runs every selected scenario Runs times, one run at a time, and returns the report.
// It stops at the first run that could not be carried out (redis-server missing, ctx
// ended); runs that merely went against their expectation are in the report.
func RunLab(ctx context.Context, o LabOptions) (*Report, error) {
	if o.Runs < 1 {
		return nil, fmt.Errorf("chaos: runs %d, want at least 1", o.Runs)
	}
	scs := o.Scenarios
	if scs == nil {
		scs = Scenarios()
	}
	rep := &Report{Profile: o.Profile, Seed: o.Seed, Started: time.Now()}
	for _, s := range scs {
		sec := Section{Scenario: s}
		for run := range o.Runs {
			res, err := s.Run(ctx, o.Profile, run, o.Seed+uint64(run))
			if err != nil {
				return nil, fmt.Errorf("chaos: scenario %s, run %d: %w", s.Name, run, err)
			}
			sec.Runs = append(sec.Runs, res)
			if o.Progress != nil {
				o.Progress(res)
			}
		}
		rep.Sections = append(rep.Sections, sec)
	}
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}
