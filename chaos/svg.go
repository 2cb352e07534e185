package chaos

// The report's timelines: one SVG image per shown run, drawn from its history, with the
// marks tests read back (data-* attributes) to check the picture against the history.

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// Layout of a timeline, in SVG user units (pixels at 100 % zoom).
const (
	svgWidth  = 1160
	svgLabelW = 130 // room for row labels
	svgRight  = 20
	svgRowH   = 18
	svgBarH   = 12
	svgTop    = 34 // legend
	svgAxisH  = 30
)

// clientColor returns a distinct colour per client, never red: red marks trouble.
func clientColor(c int) string {
	palette := []string{"#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22"}
	if c < len(palette) {
		return palette[c]
	}
	hue := (c*47 + 200) % 360
	if hue < 20 || hue > 340 {
		hue = (hue + 60) % 360
	}
	return fmt.Sprintf("hsl(%d,55%%,45%%)", hue)
}

// timeline draws one run as an SVG image: per key, one row per node (who held the key
// there, sampled from outside the proxies) and one row per client (its critical sections,
// its writes accepted and refused); overlaps of critical sections are shaded red across the
// whole section, and faults are drawn on the rows they hit. Every mark carries data-*
// attributes naming the history entry it shows, so that tests can check the picture
// against the history.
func timeline(res *Result) string {
	d := newDrawing(res.History)
	keys := keysOf(d.h)
	d.start(len(keys))
	y := svgTop
	for _, key := range keys {
		y = d.section(key, y)
	}
	axis(&d.b, y, d.dur, d.x)
	d.b.WriteString(`</svg>`)
	return d.b.String()
}

// drawing is a timeline being drawn: the run's history, how much of it is shown, and the
// marks written so far.
type drawing struct {
	b     strings.Builder
	h     *History
	dur   time.Duration // the window shown, from the run's start
	plotW float64       // the plot's width, right of the row labels
	// holdOf is the hold whose key a node span shows, by key and holder id: the holds of a
	// lock over several keys share their holder id.
	holdOf   map[keyID]*Hold
	overlaps []Overlap
}

// keyID names a lock's key on a node: the key and the holder id it held.
type keyID struct{ key, id string }

func newDrawing(h *History) *drawing {
	d := &drawing{h: h, dur: timelineWindow(h), plotW: float64(svgWidth - svgLabelW - svgRight),
		holdOf: map[keyID]*Hold{}, overlaps: Overlaps(h)}
	for i := range h.Holds {
		d.holdOf[keyID{h.Holds[i].Key, h.Holds[i].LockID}] = &h.Holds[i]
	}
	return d
}

// x is the horizontal position of time t, clamped to the window.
func (d *drawing) x(t time.Duration) float64 {
	t = min(max(t, 0), d.dur)
	return float64(svgLabelW) + d.plotW*float64(t)/float64(d.dur)
}

// start writes the image's opening: its size and data attributes, a note when only the
// beginning of the run is drawn, the hatch pattern, the background and the legend.
func (d *drawing) start(keys int) {
	h := d.h
	rowsPerKey := 1 + h.Nodes + h.Clients // a title row, the nodes, the clients
	height := svgTop + keys*(rowsPerKey*svgRowH+8) + svgAxisH
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" data-scenario="%s" data-run="%d" data-duration-ns="%d" data-x0="%d" data-plot-width="%g">`,
		svgWidth, height, svgWidth, height, esc(h.Scenario), h.Run, int64(d.dur), svgLabelW, d.plotW)
	if d.dur < h.Duration {
		fmt.Fprintf(&d.b, `<title>the first %s of %s: the run has too many critical sections to draw them all</title>`, secs(d.dur), secs(h.Duration))
	}
	d.b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0.0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#333" stroke-width="2"/></pattern></defs>`)
	d.b.WriteString(`<rect x="0" y="0" width="100%" height="100%" fill="#ffffff"/>`)
	legend(&d.b, h)
}

// band is the rows of one key's section: its title row at top, then from rows down one
// row per node and one per client, down to bottom.
type band struct {
	key               string
	top, rows, bottom int
	nodes             int
}

func (k band) nodeY(n int) int   { return k.rows + n*svgRowH }
func (k band) clientY(c int) int { return k.rows + (k.nodes+c)*svgRowH }

// section draws the key's section from y down, in layers: the rows, the faults, the node
// spans, the critical sections, the writes and, on top, the overlaps. It returns the y of
// the next section.
func (d *drawing) section(key string, y int) int {
	h := d.h
	k := band{key: key, top: y, rows: y + svgRowH, nodes: h.Nodes}
	k.bottom = k.rows + (h.Nodes+h.Clients)*svgRowH
	fmt.Fprintf(&d.b, `<text x="4" y="%d" class="key" font-weight="bold">key %s</text>`, y+13, esc(key))
	d.rows(k)
	d.faults(k)
	d.spans(k)
	d.holds(k)
	d.writes(k)
	d.overlapMarks(k)
	return k.bottom + 8
}

// rows draws the backgrounds and labels of the section's node and client rows.
func (d *drawing) rows(k band) {
	for n := range d.h.Nodes {
		fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%g" height="%d" fill="#f4f4f4"/>`, svgLabelW, k.nodeY(n)+2, d.plotW, svgRowH-4)
		fmt.Fprintf(&d.b, `<text x="4" y="%d" class="label">node %d</text>`, k.nodeY(n)+13, n)
	}
	for c := range d.h.Clients {
		fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%g" height="%d" fill="#fafafa"/>`, svgLabelW, k.clientY(c)+2, d.plotW, svgRowH-4)
		fmt.Fprintf(&d.b, `<text x="4" y="%d" class="label" fill="%s">client %d</text>`, k.clientY(c)+13, clientColor(c), c)
	}
}

// faults draws the faults under everything else, on the rows they hit (a dashed line
// across the section for one that hits no row or has no length); their labels go in the
// key's title row, left to right.
func (d *drawing) faults(k band) {
	labelEnd := 0.0
	for _, f := range d.h.Faults {
		if f.At >= d.dur {
			continue
		}
		fx, fw := d.x(f.At), math.Max(d.x(f.End)-d.x(f.At), 2)
		title := fmt.Sprintf("%s at %s–%s: %s", f.Kind, secs(f.At), secs(f.End), f.Note)
		rows := []int{}
		for _, n := range f.Nodes {
			rows = append(rows, k.nodeY(n))
		}
		for _, c := range f.Clients {
			rows = append(rows, k.clientY(c))
		}
		fmt.Fprintf(&d.b, `<g class="fault" data-fault="%d" data-kind="%s"><title>%s</title>`, f.ID, esc(f.Kind), esc(title))
		for _, ry := range rows {
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#ffd54f" fill-opacity="0.55"/>`, fx, ry, fw, svgRowH)
		}
		if len(rows) == 0 || f.End == f.At {
			fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e65100" stroke-width="1.5" stroke-dasharray="4,2"/>`, fx, k.rows, fx, k.bottom)
		}
		lx := math.Max(fx+2, labelEnd+6)
		labelEnd = lx + 6.2*float64(len(f.Kind))
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" class="fault-label" fill="#e65100">%s</text></g>`, lx, k.top+12, esc(f.Kind))
	}
}

// spans draws the node rows: who held the key on each node, and when the node did not
// answer.
func (d *drawing) spans(k band) {
	for _, s := range d.h.Spans {
		if s.Key != k.key || s.LockID == "" && !s.Down || s.From >= d.dur {
			continue
		}
		sx, sw := d.x(s.From), math.Max(d.x(s.To)-d.x(s.From), 1)
		ry := k.nodeY(s.Node) + (svgRowH-svgBarH)/2
		switch hd := d.holdOf[keyID{s.Key, s.LockID}]; {
		case s.Down:
			fmt.Fprintf(&d.b, `<rect class="span down" data-node="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"><title>node %d did not answer %s–%s</title></rect>`,
				s.Node, sx, ry, sw, svgBarH, s.Node, secs(s.From), secs(s.To))
		case hd != nil:
			fmt.Fprintf(&d.b, `<rect class="span" data-node="%d" data-hold="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>node %d: client %d's key (token %d) %s–%s</title></rect>`,
				s.Node, hd.ID, sx, ry, sw, svgBarH, clientColor(hd.Client), s.Node, hd.Client, hd.Token, secs(s.From), secs(s.To))
		default:
			fmt.Fprintf(&d.b, `<rect class="span other" data-node="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="#9e9e9e"><title>node %d: a key of a failed attempt, %s–%s</title></rect>`,
				s.Node, sx, ry, sw, svgBarH, s.Node, secs(s.From), secs(s.To))
		}
	}
}

// holds draws the critical sections on the client rows, hatched past their validity
// deadline, with their token when there is room.
func (d *drawing) holds(k band) {
	x := d.x
	for _, hd := range d.h.Holds {
		if hd.Key != k.key || hd.Granted >= d.dur {
			continue
		}
		ry := k.clientY(hd.Client) + (svgRowH-svgBarH)/2
		hx, hw := x(hd.Granted), math.Max(x(hd.End)-x(hd.Granted), 1.5)
		fmt.Fprintf(&d.b, `<rect class="hold" data-hold="%d" data-client="%d" data-token="%d" data-granted-ns="%d" data-end-ns="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.85"><title>client %d, token %d: granted %s (asked %s), valid until %s, ended %s%s</title></rect>`,
			hd.ID, hd.Client, hd.Token, int64(hd.Granted), int64(hd.End), hx, ry, hw, svgBarH, clientColor(hd.Client),
			hd.Client, hd.Token, secs(hd.Granted), secs(hd.Asked), secs(hd.Until), secs(hd.End), lostNote(hd))
		// Hatched past the deadline when that is at least a pixel wide: a holder whose
		// validity is its last passing check (a session-held lock in the comparison lab)
		// always ends a few microseconds after it, writing, and that is not what the
		// hatching is for (a holder that went on working, paused or cut off).
		if px := x(hd.Until); hd.End > hd.Until && hd.Until > hd.Granted && x(hd.End)-px >= 1 {
			fmt.Fprintf(&d.b, `<rect class="past-until" data-hold="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"><title>client %d still working %s after its validity deadline %s</title></rect>`,
				hd.ID, px, ry, x(hd.End)-px, svgBarH, hd.Client, secs(hd.End-hd.Until), secs(hd.Until))
		}
		if hw > 60 {
			fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" class="token" fill="#fff">%d</text>`, hx+3, ry+10, hd.Token%1_000_000)
		}
	}
}

// writes draws the writes on the client rows: a line for one accepted, a crossed circle
// for one rejected, and a dashed line from its sending for one delivered late.
func (d *drawing) writes(k band) {
	for _, w := range d.h.Writes {
		if w.Key != k.key || w.Applied < 0 || w.Applied >= d.dur {
			continue
		}
		cy := k.clientY(w.Client)
		wx := d.x(w.Applied)
		if w.Delayed {
			fmt.Fprintf(&d.b, `<line class="inflight" data-write="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d32f2f" stroke-width="1.5" stroke-dasharray="3,3"/>`,
				w.ID, d.x(w.Sent), cy+svgRowH/2, wx, cy+svgRowH/2)
		}
		if w.Accepted {
			fmt.Fprintf(&d.b, `<line class="write accepted" data-write="%d" data-applied-ns="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-width="1"><title>write %d, token %d, accepted at %s</title></line>`,
				w.ID, int64(w.Applied), wx, cy+1, wx, cy+svgRowH-1, w.ID, w.Token, secs(w.Applied))
			continue
		}
		cx, cyc := wx, float64(cy+svgRowH/2)
		why := fmt.Sprintf("the store had admitted token %d", w.Highest)
		if w.Vetoed {
			why = fmt.Sprintf("refused with its transfer (writes %v), another leg of which was stale", w.Legs)
		}
		fmt.Fprintf(&d.b, `<g class="write rejected" data-write="%d" data-applied-ns="%d" data-token="%d"><title>write %d, token %d, REJECTED at %s: %s</title><circle cx="%.1f" cy="%.1f" r="7" fill="#fff" stroke="#d32f2f" stroke-width="2"/><path d="M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f" stroke="#d32f2f" stroke-width="2.5"/></g>`,
			w.ID, int64(w.Applied), w.Token, w.ID, w.Token, secs(w.Applied), esc(why),
			cx, cyc, cx-4, cyc-4, cx+4, cyc+4, cx-4, cyc+4, cx+4, cyc-4)
	}
}

// overlapMarks shades the overlaps of critical sections on top, across the section's rows.
func (d *drawing) overlapMarks(k band) {
	for _, o := range d.overlaps {
		if o.Key != k.key || o.From >= d.dur {
			continue
		}
		a, bb := d.h.Holds[o.A], d.h.Holds[o.B]
		what := "client %d worked past its validity deadline while client %d held the lock"
		if o.BothValid {
			what = "client %d and client %d both held a valid lock"
		}
		fmt.Fprintf(&d.b, `<rect class="overlap" data-a="%d" data-b="%d" data-from-ns="%d" data-to-ns="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="#e53935" fill-opacity="0.28" stroke="#c62828" stroke-width="1"><title>OVERLAP %s–%s: %s (tokens %d and %d)</title></rect>`,
			o.A, o.B, int64(o.From), int64(o.To), d.x(o.From), k.rows, math.Max(d.x(o.To)-d.x(o.From), 3), k.bottom-k.rows,
			secs(o.From), secs(o.To), esc(fmt.Sprintf(what, a.Client, bb.Client)), a.Token, bb.Token)
	}
}

// maxHoldsDrawn bounds the critical sections a timeline draws, so that a retry storm's page
// stays small enough to open: beyond it, only the beginning of the run is drawn.
const maxHoldsDrawn = 800

// timelineWindow returns how much of the run a timeline shows: all of it, or, for a run
// with more than maxHoldsDrawn critical sections, up to the grant of the first one beyond.
func timelineWindow(h *History) time.Duration {
	dur := max(h.Duration, time.Millisecond)
	if len(h.Holds) <= maxHoldsDrawn {
		return dur
	}
	granted := make([]time.Duration, len(h.Holds))
	for i, hd := range h.Holds {
		granted[i] = hd.Granted
	}
	slices.Sort(granted)
	return max(granted[maxHoldsDrawn], time.Millisecond)
}

// legend draws the key to the marks across the top of a timeline.
func legend(b *strings.Builder, h *History) {
	lx := svgLabelW
	item := func(swatch, label string) {
		fmt.Fprintf(b, `<g class="legend">%s<text x="%d" y="22">%s</text></g>`, swatch, lx+16, esc(label))
		lx += 24 + 7*len(label)
	}
	for c := range min(h.Clients, 4) {
		item(fmt.Sprintf(`<rect x="%d" y="12" width="12" height="12" fill="%s"/>`, lx, clientColor(c)), fmt.Sprintf("client %d", c))
	}
	if h.Clients > 4 {
		fmt.Fprintf(b, `<text x="%d" y="22">…</text>`, lx)
		lx += 18
	}
	item(fmt.Sprintf(`<rect x="%d" y="12" width="12" height="12" fill="#e53935" fill-opacity="0.4" stroke="#c62828"/>`, lx), "overlap")
	item(fmt.Sprintf(`<circle cx="%d" cy="18" r="6" fill="#fff" stroke="#d32f2f" stroke-width="2"/>`, lx+6), "write rejected")
	item(fmt.Sprintf(`<line x1="%d" y1="12" x2="%d" y2="24" stroke="#000"/>`, lx+6, lx+6), "write accepted")
	item(fmt.Sprintf(`<rect x="%d" y="12" width="12" height="12" fill="url(#hatch)"/>`, lx), "past deadline / node silent")
	item(fmt.Sprintf(`<rect x="%d" y="12" width="12" height="12" fill="#ffd54f"/>`, lx), "fault")
}

// axis draws the time axis at y, its ticks at the first round step (100ms to 10s) that
// gives a dozen or fewer.
func axis(b *strings.Builder, y int, dur time.Duration, x func(time.Duration) float64) {
	step := 100 * time.Millisecond
	for _, s := range []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second} {
		if dur/step <= 12 {
			break
		}
		step = s
	}
	fmt.Fprintf(b, `<g class="axis"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`, svgLabelW, y, svgWidth-svgRight, y)
	for t := time.Duration(0); t <= dur; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			x(t), y, x(t), y+5, x(t), y+18, secs(t))
	}
	b.WriteString(`</g>`)
}

// lostNote is the note on a critical section whose lock Do reported lost.
func lostNote(h Hold) string {
	if h.Lost {
		return "; Do reported the lock lost"
	}
	return ""
}

// secs writes a time of the run in seconds, to the millisecond.
func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// esc escapes text for the SVG.
func esc(s string) string { return html.EscapeString(s) }

// showcase picks the run whose timeline the report draws for a scenario: the first run
// that went against the expectation, else the first that shows an overlap or a refused
// write, else the first.
func showcase(runs []*Result) *Result {
	if len(runs) == 0 {
		return nil
	}
	ordered := slices.Clone(runs)
	slices.SortStableFunc(ordered, func(a, b *Result) int {
		score := func(r *Result) int {
			switch {
			case !r.OK():
				return 0
			case len(r.Verdict.Overlaps) > 0 || r.Verdict.StaleRejected > 0:
				return 1
			}
			return 2
		}
		return cmp.Compare(score(a), score(b))
	})
	return ordered[0]
}

// TimelineSVG draws a history as the lab's report draws a run: per key, a row per node (none
// when h.Nodes is 0) and per client, with the critical sections, the writes, the faults and
// the overlaps. The comparison lab (module compare/) draws its runs with it.
func TimelineSVG(h *History) string {
	return timeline(&Result{Scenario: h.Scenario, Run: h.Run, History: h})
}
