package chaos

// Tests of the report's outputs and of the timeline against the history it draws.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// syntheticResult is a small hand-made run with every kind of mark: a holder pausing past
// its deadline while another takes over (an overlap), writes accepted and rejected, a write
// delivered late, a client pause, a node restart and node spans.
func syntheticResult() *Result {
	s := time.Millisecond
	h := &History{Scenario: "synthetic", Nodes: 3, Clients: 2, Quorum: 2, TTL: time.Second, Keys: []string{"k"},
		Duration: 3000 * s, Busy: 3000 * s,
		Holds: []Hold{
			{ID: 0, Client: 0, Key: "k", Token: 100, LockID: "a", Asked: 0, Granted: 100 * s, Until: 1100 * s, End: 2200 * s, Role: "paused"},
			{ID: 1, Client: 1, Key: "k", Token: 105, LockID: "b", Asked: 200 * s, Granted: 1300 * s, Until: 2300 * s, End: 1600 * s},
			{ID: 2, Client: 1, Key: "k", Token: 107, LockID: "c", Asked: 1700 * s, Granted: 2400 * s, Until: 3400 * s, End: 2600 * s},
		},
		Writes: []Write{
			{ID: 0, Client: 0, Hold: 0, Key: "k", Token: 100, Sent: 150 * s, Applied: 150 * s, Acked: 150 * s, Accepted: true, Order: 0},
			{ID: 1, Client: 0, Hold: 0, Key: "k", Token: 100, Sent: 500 * s, Applied: 2700 * s, Acked: -1, Highest: 107, Order: 4, Delayed: true},
			{ID: 2, Client: 1, Hold: 1, Key: "k", Token: 105, Sent: 1350 * s, Applied: 1350 * s, Acked: 1350 * s, Accepted: true, Highest: 100, Order: 1},
			{ID: 3, Client: 0, Hold: 0, Key: "k", Token: 100, Sent: 2150 * s, Applied: 2150 * s, Acked: 2150 * s, Highest: 105, Order: 2},
			{ID: 4, Client: 1, Hold: 2, Key: "k", Token: 107, Sent: 2450 * s, Applied: 2450 * s, Acked: 2450 * s, Accepted: true, Highest: 105, Order: 3},
		},
		Faults: []Fault{
			{ID: 0, Kind: "client paused", At: 300 * s, End: 2100 * s, Clients: []int{0}, Note: "GC"},
			{ID: 1, Kind: "node restart", At: 1000 * s, End: 1050 * s, Nodes: []int{1}, Note: "kill -9"},
		},
		Spans: []NodeSpan{
			{Key: "k", Node: 0, From: 100 * s, To: 1100 * s, LockID: "a"},
			{Key: "k", Node: 1, From: 100 * s, To: 1000 * s, LockID: "a"},
			{Key: "k", Node: 1, From: 1000 * s, To: 1050 * s, Down: true},
			{Key: "k", Node: 1, From: 1300 * s, To: 1600 * s, LockID: "b"},
			{Key: "k", Node: 2, From: 1300 * s, To: 1600 * s, LockID: "b"},
			{Key: "k", Node: 2, From: 1700 * s, To: 1800 * s, LockID: "zz"},
		},
		Stored:  map[string][]int{"k": {0, 2, 4}},
		Highest: map[string]redlock.Token{"k": 107},
	}
	return &Result{Scenario: "synthetic", History: h, Verdict: Check(h, DefaultLinTimeout)}
}

// svgMark is one element of a timeline with its classes and attributes.
type svgMark struct {
	name    string
	classes []string
	attrs   map[string]string
}

func (m svgMark) is(class string) bool { return slices.Contains(m.classes, class) }

func (m svgMark) num(t *testing.T, attr string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(m.attrs[attr], 64)
	if err != nil {
		t.Fatalf("<%s class=%v>: attribute %s=%q: %v", m.name, m.classes, attr, m.attrs[attr], err)
	}
	return f
}

// parseSVG parses one timeline with encoding/xml and returns its root and its elements.
func parseSVG(t *testing.T, svg string) (svgMark, []svgMark) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var marks []svgMark
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the timeline is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			m := svgMark{name: se.Name.Local, attrs: map[string]string{}}
			for _, a := range se.Attr {
				m.attrs[a.Name.Local] = a.Value
				if a.Name.Local == "class" {
					m.classes = strings.Fields(a.Value)
				}
			}
			marks = append(marks, m)
		}
	}
	if len(marks) == 0 || marks[0].name != "svg" {
		t.Fatal("the timeline does not start with <svg>")
	}
	return marks[0], marks[1:]
}

// checkTimeline checks that a run's timeline shows exactly what its history holds: one bar
// per critical section where it was held, one mark per write the store decided (rejected
// ones as rejected), one band per overlap between the right holds, and each fault.
func checkTimeline(t *testing.T, res *Result) {
	t.Helper()
	h := res.History
	root, marks := parseSVG(t, timeline(res))
	x0, plotW := root.num(t, "data-x0"), root.num(t, "data-plot-width")
	dur := root.num(t, "data-duration-ns")
	window := timelineWindow(h)
	if dur != float64(window) {
		t.Errorf("svg duration %v, want %v", dur, window)
	}
	xOf := func(ns float64) float64 { return x0 + plotW*min(max(ns, 0), dur)/dur }
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 0.06 {
			t.Errorf("%s at x=%.2f, want %.2f", what, got, want)
		}
	}

	var holds, accepted, rejected, faults []int
	var overlaps [][2]int
	for _, m := range marks {
		switch {
		case m.is("hold"):
			id := int(m.num(t, "data-hold"))
			holds = append(holds, id)
			hd := h.Holds[id]
			near(fmt.Sprintf("hold %d", id), m.num(t, "x"), xOf(float64(hd.Granted)))
			if int(m.num(t, "data-client")) != hd.Client || m.attrs["data-token"] != hd.Token.String() {
				t.Errorf("hold %d drawn for client %s token %s, want %d and %d", id, m.attrs["data-client"], m.attrs["data-token"], hd.Client, hd.Token)
			}
		case m.is("write") && m.is("accepted"):
			id := int(m.num(t, "data-write"))
			accepted = append(accepted, id)
			near(fmt.Sprintf("write %d", id), m.num(t, "x1"), xOf(float64(h.Writes[id].Applied)))
		case m.is("write") && m.is("rejected"):
			rejected = append(rejected, int(m.num(t, "data-write")))
		case m.is("overlap"):
			overlaps = append(overlaps, [2]int{int(m.num(t, "data-a")), int(m.num(t, "data-b"))})
			near("overlap", m.num(t, "x"), xOf(m.num(t, "data-from-ns")))
		case m.is("fault"):
			faults = append(faults, int(m.num(t, "data-fault")))
		}
	}
	var wantHolds, wantAcc, wantRej, wantFaults []int
	var wantOverlaps [][2]int
	for _, hd := range h.Holds {
		if hd.Granted < window {
			wantHolds = append(wantHolds, hd.ID)
		}
	}
	for _, w := range h.Writes {
		switch {
		case w.Applied < 0 || w.Applied >= window:
		case w.Accepted:
			wantAcc = append(wantAcc, w.ID)
		default:
			wantRej = append(wantRej, w.ID)
		}
	}
	for _, o := range res.Verdict.Overlaps {
		if o.From < window {
			wantOverlaps = append(wantOverlaps, [2]int{o.A, o.B})
		}
	}
	for range keysOf(h) { // faults are drawn in every key's section
		for _, f := range h.Faults {
			if f.At < window {
				wantFaults = append(wantFaults, f.ID)
			}
		}
	}
	for _, c := range []struct {
		what      string
		got, want []int
	}{{"holds", holds, wantHolds}, {"accepted writes", accepted, wantAcc}, {"rejected writes", rejected, wantRej}, {"faults", faults, wantFaults}} {
		slices.Sort(c.got)
		slices.Sort(c.want)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s drawn %v, history %v", c.what, c.got, c.want)
		}
	}
	slices.SortFunc(overlaps, func(a, b [2]int) int { return a[0]*1e6 + a[1] - b[0]*1e6 - b[1] })
	slices.SortFunc(wantOverlaps, func(a, b [2]int) int { return a[0]*1e6 + a[1] - b[0]*1e6 - b[1] })
	if !slices.Equal(overlaps, wantOverlaps) {
		t.Errorf("overlaps drawn %v, found %v", overlaps, wantOverlaps)
	}
}

// TestTimelineWindow: a run with more critical sections than a page can hold is drawn up to
// the grant of the first one beyond the limit, and the marks still match the history there.
func TestTimelineWindow(t *testing.T) {
	h := &History{Scenario: "many", Nodes: 1, Clients: 2, Keys: []string{"k"}}
	for i := range 3 * maxHoldsDrawn {
		at := time.Duration(i) * time.Millisecond
		h.Holds = append(h.Holds, Hold{ID: i, Client: i % 2, Key: "k", Token: redlock.Token(i + 1), LockID: fmt.Sprint(i),
			Asked: at, Granted: at, Until: at + time.Second, End: at + time.Millisecond/2})
	}
	h.Duration = time.Duration(3*maxHoldsDrawn) * time.Millisecond
	res := &Result{History: h, Verdict: Check(h, DefaultLinTimeout)}
	if got, want := timelineWindow(h), time.Duration(maxHoldsDrawn)*time.Millisecond; got != want {
		t.Fatalf("window %v, want %v", got, want)
	}
	checkTimeline(t, res)
}

func TestTimelineMatchesHistory(t *testing.T) {
	res := syntheticResult()
	v := res.Verdict
	if len(v.Overlaps) != 1 || v.StaleRejected != 2 || len(v.StaleAccepted) != 0 || v.Linearizable != LinOK {
		t.Fatalf("synthetic history checks: %+v", v)
	}
	checkTimeline(t, res)
	// A mark that lies is caught: drop the rejected-write marks from the picture.
	_, marks := parseSVG(t, timeline(res))
	n := 0
	for _, m := range marks {
		if m.is("rejected") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d rejected-write marks, want 2", n)
	}
}

// svgRe finds the timelines in a page.
var svgRe = regexp.MustCompile(`(?s)<svg .*?</svg>`)

func TestReportOutputs(t *testing.T) {
	res := syntheticResult()
	sc := &Scenario{Name: "synthetic", Group: groupClient, Summary: "a hand-made run", Story: "A pauses; B takes over.",
		Expect: Expect{Violation: true, Rejections: true}}
	rep := &Report{Profile: Quick, Seed: 1, Started: time.Unix(0, 0), Sections: []Section{{Scenario: sc, Runs: []*Result{res}}}}
	if !rep.OK() {
		t.Fatalf("report not OK: %v", res.Problems)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| scenario | expected | runs | ME violations (overlapping pairs) | stale writes accepted | stale writes rejected | acquisitions/s | during node faults | p99 wait |",
		"| synthetic | mutual exclusion breaks, fencing rejects the stale writes | 1 | 1 (1) | 0 | 2 | 1.0 | - | 1100 ms | U, O hold | ok | 0 | as expected |",
		"## synthetic",
		"- overlap 1.300s–1.600s: client 0 (token 100) and client 1 (token 105, +5); client 0 was past its validity deadline",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	svgs := svgRe.FindAllString(page.String(), -1)
	if len(svgs) != 1 {
		t.Fatalf("%d timelines in the page, want 1", len(svgs))
	}
	if svgs[0] != timeline(res) {
		t.Error("the page's timeline differs from the run's")
	}
	for _, bad := range []string{"<script", "http://", "https://", "src="} {
		if strings.Contains(strings.ReplaceAll(page.String(), `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("the page is not self-contained: it has %q", bad)
		}
	}
}

// TestTimelinePastUntil: a critical section is hatched past its validity deadline when it
// went on working visibly beyond it, and not for the microseconds a holder whose validity is
// its last passing check always takes to write after it.
func TestTimelinePastUntil(t *testing.T) {
	h := &History{Scenario: "past", Nodes: 1, Clients: 2, Keys: []string{"k"}, Duration: 10 * time.Second}
	h.Holds = []Hold{
		{ID: 0, Client: 0, Key: "k", Token: 1, LockID: "a", Granted: time.Second, Until: 2 * time.Second, End: 2*time.Second + 3*time.Microsecond},
		{ID: 1, Client: 1, Key: "k", Token: 2, LockID: "b", Granted: 3 * time.Second, Until: 4 * time.Second, End: 6 * time.Second},
		{ID: 2, Client: 0, Key: "k", Token: 3, LockID: "c", Granted: 7 * time.Second, Until: 9 * time.Second, End: 8 * time.Second},
	}
	svg := TimelineSVG(h)
	marks := regexp.MustCompile(`class="past-until" data-hold="(\d+)"[^>]*><title>([^<]*)</title>`).FindAllStringSubmatch(svg, -1)
	if len(marks) != 1 || marks[0][1] != "1" {
		t.Fatalf("past-until marks %v, want one, on hold 1", marks)
	}
	if want := "client 1 still working 2.000s after its validity deadline 4.000s"; marks[0][2] != want {
		t.Errorf("mark titled %q, want %q", marks[0][2], want)
	}
}
