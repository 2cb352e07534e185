package harness

import (
	"fmt"
	"io"
	"strings"
)

// Target is one of the benchmark's targets, evaluated on figures from one run.
type Target struct {
	Scenario string // "a" … "h"
	Name     string // what is compared
	Want     string // the threshold, e.g. "≥ 1.2×"
	Got      string // the measured value
	Pass     bool
}

func (t Target) status() string {
	if t.Pass {
		return "PASS"
	}
	return "FAIL"
}

// table writes a markdown table.
func table(w io.Writer, head []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "--:"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

// targetTable writes the targets of one scenario with their status.
func targetTable(w io.Writer, ts []Target) {
	rows := make([][]string, len(ts))
	for i, t := range ts {
		rows[i] = []string{t.Name, t.Want, t.Got, t.status()}
	}
	table(w, []string{"target (ours)", "wanted", "measured", "status"}, rows)
}

// atLeast and atMost build targets on ratios.
func atLeast(scn, name string, got, want float64) Target {
	return Target{Scenario: scn, Name: name, Want: "≥ " + fmtRatio(want), Got: fmtMeasured(got, want), Pass: got >= want}
}

func atMost(scn, name string, got, want float64) Target {
	return Target{Scenario: scn, Name: name, Want: "≤ " + fmtRatio(want), Got: fmtMeasured(got, want), Pass: got <= want}
}

// fmtMeasured is fmtRatio(got), with as many more digits as it takes not to print a
// measurement that misses (or meets) its threshold as the threshold itself ("≥ 1.50×,
// 1.50×, FAIL" for 1.4966).
func fmtMeasured(got, want float64) string {
	g := fmtRatio(got)
	if g != fmtRatio(want) || got == want {
		return g
	}
	for digits := 3; digits <= 6; digits++ {
		if g = fmt.Sprintf("%.*f×", digits, got); g != fmt.Sprintf("%.*f×", digits, want) {
			break
		}
	}
	return g
}

// errNote returns a short description of the last error of a contender, for the notes
// under a table.
func errNote(name string, st *stats) string {
	if st.lastErr == nil {
		return ""
	}
	msg := st.lastErr.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	return fmt.Sprintf("%s, last error: `%s`", name, strings.ReplaceAll(msg, "`", "'"))
}

func notes(w io.Writer, ns []string) {
	for _, n := range ns {
		if n != "" {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	fmt.Fprintln(w)
}
