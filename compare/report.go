package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/chaos"
)

// Options says what Run compares.
type Options struct {
	Backends []string // nil: every backend; empty but not nil: an error
	Faults   []string // nil: the profile's; empty but not nil: none (the healthy runs only)
	Profile  Profile
	// Progress, if set, is told of each measurement as it ends.
	Progress func(string)
}

// Check reports what is wrong with o, as Run would before starting anything: no backend, an
// unknown or repeated backend or fault, a profile out of range. It starts nothing.
func (o Options) Check() error {
	_, _, err := o.resolve()
	return err
}

// resolve checks o and returns the backends, in the reports' order, and the faults to run.
func (o Options) resolve() ([]string, []string, error) {
	names := o.Backends
	if names == nil {
		names = BackendNames()
	}
	if len(names) == 0 {
		return nil, nil, errNoBackends
	}
	if err := checkNames("backend", names, func(n string) error { _, err := NewBackend(n); return err }); err != nil {
		return nil, nil, err
	}
	faults := o.Faults
	if faults == nil {
		faults = o.Profile.Faults
	}
	if err := checkNames("fault", faults, func(f string) error { _, err := faultByName(f); return err }); err != nil {
		return nil, nil, err
	}
	if o.Profile.TTL < 2*time.Second || o.Profile.TTL%time.Second != 0 || o.Profile.Clients < 2 || o.Profile.Contenders < 1 || o.Profile.PerfFor <= 0 {
		return nil, nil, fmt.Errorf("compare: profile %q: want a TTL of whole seconds ≥ 2 s (etcd's leases), ≥ 2 clients, ≥ 1 contender and a positive PerfFor", o.Profile.Name)
	}
	return sortedBackends(names), slices.Clone(faults), nil
}

// checkNames refuses a name that known refuses, and a name given twice.
func checkNames(kind string, names []string, known func(string) error) error {
	seen := map[string]bool{}
	for _, n := range names {
		if err := known(n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("compare: %s %q selected twice", kind, n)
		}
		seen[n] = true
	}
	return nil
}

// Report is the outcome of a comparison.
type Report struct {
	Profile  Profile        `json:"profile"`
	Started  time.Time      `json:"started"`
	Elapsed  time.Duration  `json:"elapsed_ns"`
	Machine  string         `json:"machine"`
	Backends []string       `json:"backends"`
	Perf     []*Perf        `json:"perf"`
	Faults   []*FaultResult `json:"faults"`
}

// Run measures every selected backend healthy, then runs every selected fault on a fresh
// instance of each, one run at a time. It stops at the first run that could not be carried
// out (a server missing, ctx ended); what a backend did under a fault is in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	names, faults, err := o.resolve()
	if err != nil {
		return nil, err
	}
	mks := map[string]func() Backend{}
	for _, n := range names {
		mks[n], _ = NewBackend(n) // checked by resolve
	}
	p := o.Profile
	p.Faults = faults // the report names the faults that were run
	rep := &Report{Profile: p, Started: time.Now(), Backends: names,
		Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	for _, n := range names {
		pf, err := RunPerf(ctx, mks[n], o.Profile)
		if err != nil {
			return nil, err
		}
		rep.Perf = append(rep.Perf, pf)
		say("%s healthy: %.0f acquisitions/s alone, %.0f/s with %d contenders", n, pf.Uncontended.PerSec, pf.Contended.PerSec, o.Profile.Contenders)
	}
	for _, f := range faults {
		for _, n := range names {
			r, err := RunFault(ctx, mks[n], f, o.Profile)
			if err != nil {
				return nil, err
			}
			rep.Faults = append(rep.Faults, r)
			say("%s / %s: %s", n, f, r.summary())
		}
	}
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}

// errNoBackends is returned for an empty selection.
var errNoBackends = errors.New("compare: no backend selected")

func (r *FaultResult) summary() string {
	if !r.Applicable {
		return "n/a"
	}
	if r.stepped() {
		return fmt.Sprintf("the machine's wall clock stepped %+.2f s during the run: set aside; ", r.ClockStep.Seconds()) + r.counts()
	}
	return r.counts()
}

func (r *FaultResult) counts() string {
	return fmt.Sprintf("%d overlaps (%d within both validities), stale writes accepted %d without tokens, %d with; lost %d / %d; another client after %s",
		r.Overlaps, r.BothValid, r.Store.Stale, r.Store.StaleFenced, r.Store.LostPlain, r.Store.LostFenced, recovery(r.Recovery))
}

func recovery(d time.Duration) string {
	if d < 0 {
		return "never (in the run)"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// sentence capitalises s's first letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func (rep *Report) results(fault string) []*FaultResult {
	var out []*FaultResult
	for _, r := range rep.Faults {
		if r.Fault == fault {
			out = append(out, r)
		}
	}
	return out
}

func (rep *Report) faultNames() []string {
	var out []string
	for _, f := range Faults {
		if len(rep.results(f.Name)) > 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

// table is one Markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t table) markdown(b *strings.Builder) {
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
}

func (rep *Report) perfTable() table {
	t := table{head: []string{"backend", "alone: acquisitions/s", "p50", "p99",
		fmt.Sprintf("%d contenders: acquisitions/s", rep.Profile.Contenders), "wait p50", "wait p99", "Jain fairness", "failed calls"}}
	for _, p := range rep.Perf {
		u, c := p.Uncontended, p.Contended
		t.rows = append(t.rows, []string{p.Backend, fmt.Sprintf("%.0f", u.PerSec), ms(u.P50), ms(u.P99),
			fmt.Sprintf("%.0f", c.PerSec), ms(c.P50), ms(c.P99), fmt.Sprintf("%.2f", c.Jain), fmt.Sprint(u.Errors + c.Errors)})
	}
	return t
}

func (rep *Report) faultTable(fault string) table {
	t := table{head: []string{"backend", "sections", "overlapping pairs", "of them within both validities",
		"stale writes accepted: no tokens", "with tokens", "lost writes: no tokens", "with tokens", "fresh writes refused by tokens", "another client holds after", "what was done"}}
	for _, r := range rep.results(fault) {
		if !r.Applicable {
			t.rows = append(t.rows, []string{r.Backend, "n/a", "", "", "", "", "", "", "", "", r.Note})
			continue
		}
		note := r.Note
		if r.stepped() {
			note += fmt.Sprintf("; THE MACHINE'S WALL CLOCK STEPPED %+.2f s during this run (NTP, or a paused virtual machine): "+
				"servers expire keys by it, clients time validity on the monotonic clock, so this run shows a clock jump, "+
				"not the backend, and the promises set it aside", r.ClockStep.Seconds())
		}
		t.rows = append(t.rows, []string{r.Backend, fmt.Sprint(r.Holds), fmt.Sprint(r.Overlaps), fmt.Sprint(r.BothValid),
			fmt.Sprint(r.Store.Stale), fmt.Sprint(r.Store.StaleFenced), fmt.Sprint(r.Store.LostPlain), fmt.Sprint(r.Store.LostFenced),
			fmt.Sprint(r.Store.RefusedNotStale), recovery(r.Recovery), note})
	}
	return t
}

// Promises returns, per backend, what its documentation promises (or warns of) and what the
// lab saw of it in the report's fault runs.
func (rep *Report) promiseTable() table {
	t := table{head: []string{"backend", "its documentation", "promises or warns", "the lab saw"}}
	for _, n := range rep.Backends {
		p, ok := promises[n]
		if !ok {
			continue
		}
		var rs []*FaultResult
		for _, r := range rep.Faults {
			if r.Backend == n {
				rs = append(rs, r)
			}
		}
		verdict := "no fault run"
		set := 0
		for _, r := range rs {
			if r.stepped() {
				set++
			}
		}
		if len(rs) > 0 {
			kept, why := p.seen(rs)
			if set > 0 {
				why += fmt.Sprintf("; %d run(s) set aside, the machine's clock stepped", set)
			}
			switch {
			case p.Warning && kept:
				verdict = "the failure warned of was not seen in these runs (" + why + ")"
			case p.Warning:
				verdict = "the failure warned of happened: " + why
			case kept:
				verdict = "kept: " + why
			default:
				verdict = "broken: " + why
			}
			verdict += alsoSeen(rs)
		}
		word := "promises"
		if p.Warning {
			word = "warns"
		}
		t.rows = append(t.rows, []string{n, p.Source, word + ": " + p.Text, verdict})
	}
	return t
}

// alsoSeen lists what a user would want to know of a backend's runs whatever its promise
// covers: overlaps within both validities, and writes the checking store lost or took stale.
// A verdict of "kept" on a promise that is only about fencing must not read as all clear
// when the lock itself gave two holders at once. Runs set aside are left out.
func alsoSeen(rs []*FaultResult) string {
	var seen []string
	for _, r := range rs {
		if !r.Applicable || r.stepped() {
			continue
		}
		var what []string
		if r.BothValid > 0 {
			what = append(what, fmt.Sprintf("%d overlaps within both validities", r.BothValid))
		}
		if r.Store.StaleFenced > 0 {
			what = append(what, fmt.Sprintf("%d stale writes taken despite tokens", r.Store.StaleFenced))
		}
		if r.Store.LostFenced > 0 {
			what = append(what, fmt.Sprintf("%d writes lost with tokens", r.Store.LostFenced))
		}
		if len(what) > 0 {
			seen = append(seen, r.Fault+": "+strings.Join(what, ", "))
		}
	}
	if len(seen) == 0 {
		return ""
	}
	return ". Seen in these runs: " + strings.Join(seen, "; ")
}

func (rep *Report) header() string {
	faults := "no faults (the healthy runs only)"
	if len(rep.Profile.Faults) > 0 {
		faults = "faults " + strings.Join(rep.Profile.Faults, ", ")
	}
	return fmt.Sprintf("Profile %s, %s: TTL %v, %d clients on one key per fault run, healthy runs of %v; %s; started %s, took %.0f s.",
		rep.Profile.Name, faults, rep.Profile.TTL, rep.Profile.Clients, rep.Profile.PerfFor, rep.Machine,
		rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Elapsed.Seconds())
}

// WriteMarkdown writes the report as Markdown: the healthy table, one table per fault, the
// promises, and every backend's recipe.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Which lock? The lab's comparison\n\n" + rep.header() + "\n\n")
	b.WriteString("## Healthy\n\n")
	rep.perfTable().markdown(&b)
	for _, f := range rep.faultNames() {
		ft, _ := faultByName(f)
		fmt.Fprintf(&b, "## Fault: %s\n\n%s.\n\n", f, sentence(ft.What))
		rep.faultTable(f).markdown(&b)
	}
	b.WriteString("## What each documentation promises\n\n")
	rep.promiseTable().markdown(&b)
	b.WriteString("## Recipes\n\n")
	for _, n := range rep.Backends {
		mk, _ := NewBackend(n)
		fmt.Fprintf(&b, "- **%s**: %s\n", n, mk().Recipe())
	}
	b.WriteString("\n" + definitions + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// definitions says how the columns are measured (docs/choosing.md gives the same).
const definitions = "How it is measured: each fault run starts the backend afresh with 3 clients on one key, each " +
	"looping acquire, 8 writes TTL/6 apart (a section outlives its first TTL, so it needs its renewals), each after checking that it still holds the lock (its deadline, what " +
	"its watchdog heard, its session), release. The writes go to two twin stores fed the same writes in the same " +
	"order: one accepts every write (no tokens), the other only a token at least the highest it has seen. Each " +
	"section reads the store's value as it begins and writes base+1, base+2, …. A write is stale when the store has " +
	"already applied a write of a section granted later; a write is lost when the store accepted it and its final " +
	"value does not account for it; a fresh write refused by tokens is one the checking store refused although it was not stale (its token was lower than an older holder's: tokens out of order). Two sections overlap when each began before the other ended; the overlap is " +
	"within both validities when the second was granted before the first's validity ran out (its deadline, or, for a " +
	"lock held as long as a session, its last check that passed)."

// WriteJSON writes the report as JSON (histories left out). A list with nothing in it (no
// fault run, no healthy measurement) is [], not null.
func (rep *Report) WriteJSON(w io.Writer) error {
	out := *rep
	if out.Faults == nil {
		out.Faults = []*FaultResult{}
	}
	if out.Perf == nil {
		out.Perf = []*Perf{}
	}
	if out.Backends == nil {
		out.Backends = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
}

type htmlFault struct {
	Name, What string
	Table      table
	Runs       []htmlRun
}

type htmlRun struct {
	Backend string
	Summary string
	SVG     template.HTML
}

// WriteHTML writes one self-contained page: the tables, and per fault every backend's
// timeline side by side (the chaos lab's drawing: per client its critical sections and
// writes, overlaps in red, the fault on the rows it hit).
func (rep *Report) WriteHTML(w io.Writer) error {
	d := struct {
		Header   string
		Perf     table
		Promises table
		Faults   []htmlFault
		Defs     string
	}{Header: rep.header(), Perf: rep.perfTable(), Promises: rep.promiseTable(), Defs: definitions}
	for _, f := range rep.faultNames() {
		ft, _ := faultByName(f)
		hf := htmlFault{Name: f, What: sentence(ft.What), Table: rep.faultTable(f)}
		for _, r := range rep.results(f) {
			run := htmlRun{Backend: r.Backend, Summary: r.summary()}
			if r.Applicable && r.History != nil {
				run.SVG = template.HTML(chaos.TimelineSVG(r.History)) // our own drawing, escaped inside
			} else {
				run.Summary = r.Note
			}
			hf.Runs = append(hf.Runs, run)
		}
		d.Faults = append(d.Faults, hf)
	}
	return pageTmpl.Execute(w, d)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Which lock? redlock's comparison lab</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:1em}
.run svg{width:100%;height:auto;border:1px solid #ddd}
.run h3{margin:.2em 0;font-size:1em}
.run p{margin:.2em 0 .5em;font-size:.85em}
</style></head><body>
<h1>Which lock? The comparison lab</h1>
<p>{{.Header}}</p>
<h2>Healthy</h2>
{{template "table" .Perf}}
{{range .Faults}}
<section class="fault" data-fault="{{.Name}}">
<h2>Fault: {{.Name}}</h2>
<p>{{.What}}.</p>
{{template "table" .Table}}
<div class="runs">{{range .Runs}}<div class="run" data-backend="{{.Backend}}"><h3>{{.Backend}}</h3><p>{{.Summary}}</p>{{.SVG}}</div>{{end}}</div>
</section>
{{end}}
<h2>What each documentation promises</h2>
{{template "table" .Promises}}
<p>{{.Defs}}</p>
</body></html>
{{define "table"}}<table><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}`))

// Head and Rows expose a table to the page template.
func (t table) Head() []string   { return t.head }
func (t table) Rows() [][]string { return t.rows }
