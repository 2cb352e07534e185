package chaos

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
	h := res.History
	dur := timelineWindow(h)
	plotW := float64(svgWidth - svgLabelW - svgRight)
	x := func(t time.Duration) float64 {
		t = min(max(t, 0), dur)
		return float64(svgLabelW) + plotW*float64(t)/float64(dur)
	}
	// The hold whose key a node span shows, by key and holder id: the holds of a lock over
	// several keys share their holder id.
	type keyID struct{ key, id string }
	holdOf := map[keyID]*Hold{}
	for i := range h.Holds {
		holdOf[keyID{h.Holds[i].Key, h.Holds[i].LockID}] = &h.Holds[i]
	}
	keys := keysOf(h)
	rowsPerKey := 1 + h.Nodes + h.Clients // a title row, the nodes, the clients
	height := svgTop + len(keys)*(rowsPerKey*svgRowH+8) + svgAxisH

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" data-scenario="%s" data-run="%d" data-duration-ns="%d" data-x0="%d" data-plot-width="%g">`,
		svgWidth, height, svgWidth, height, esc(h.Scenario), h.Run, int64(dur), svgLabelW, plotW)
	if dur < h.Duration {
		fmt.Fprintf(&b, `<title>the first %s of %s: the run has too many critical sections to draw them all</title>`, secs(dur), secs(h.Duration))
	}
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0.0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#333" stroke-width="2"/></pattern></defs>`)
	b.WriteString(`<rect x="0" y="0" width="100%" height="100%" fill="#ffffff"/>`)
	legend(&b, h)

	overlaps := Overlaps(h)
	y := svgTop
	for _, key := range keys {
		secTop := y
		fmt.Fprintf(&b, `<text x="4" y="%d" class="key" font-weight="bold">key %s</text>`, y+13, esc(key))
		y += svgRowH
		nodeY := func(n int) int { return y + n*svgRowH }
		clientY := func(c int) int { return y + (h.Nodes+c)*svgRowH }
		secBottom := y + (h.Nodes+h.Clients)*svgRowH

		// Row backgrounds and labels.
		for n := range h.Nodes {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%g" height="%d" fill="#f4f4f4"/>`, svgLabelW, nodeY(n)+2, plotW, svgRowH-4)
			fmt.Fprintf(&b, `<text x="4" y="%d" class="label">node %d</text>`, nodeY(n)+13, n)
		}
		for c := range h.Clients {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%g" height="%d" fill="#fafafa"/>`, svgLabelW, clientY(c)+2, plotW, svgRowH-4)
			fmt.Fprintf(&b, `<text x="4" y="%d" class="label" fill="%s">client %d</text>`, clientY(c)+13, clientColor(c), c)
		}

		// Faults under everything else; their labels go in the key's title row, left to right.
		labelEnd := 0.0
		for _, f := range h.Faults {
			if f.At >= dur {
				continue
			}
			fx, fw := x(f.At), math.Max(x(f.End)-x(f.At), 2)
			title := fmt.Sprintf("%s at %s–%s: %s", f.Kind, secs(f.At), secs(f.End), f.Note)
			rows := []int{}
			for _, n := range f.Nodes {
				rows = append(rows, nodeY(n))
			}
			for _, c := range f.Clients {
				rows = append(rows, clientY(c))
			}
			fmt.Fprintf(&b, `<g class="fault" data-fault="%d" data-kind="%s"><title>%s</title>`, f.ID, esc(f.Kind), esc(title))
			for _, ry := range rows {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#ffd54f" fill-opacity="0.55"/>`, fx, ry, fw, svgRowH)
			}
			if len(rows) == 0 || f.End == f.At {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e65100" stroke-width="1.5" stroke-dasharray="4,2"/>`, fx, secTop+svgRowH, fx, secBottom)
			}
			lx := math.Max(fx+2, labelEnd+6)
			labelEnd = lx + 6.2*float64(len(f.Kind))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="fault-label" fill="#e65100">%s</text></g>`, lx, secTop+12, esc(f.Kind))
		}

		// Node rows: who held the key on each node.
		for _, s := range h.Spans {
			if s.Key != key || s.LockID == "" && !s.Down || s.From >= dur {
				continue
			}
			sx, sw := x(s.From), math.Max(x(s.To)-x(s.From), 1)
			ry := nodeY(s.Node) + (svgRowH-svgBarH)/2
			switch hd := holdOf[keyID{s.Key, s.LockID}]; {
			case s.Down:
				fmt.Fprintf(&b, `<rect class="span down" data-node="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"><title>node %d did not answer %s–%s</title></rect>`,
					s.Node, sx, ry, sw, svgBarH, s.Node, secs(s.From), secs(s.To))
			case hd != nil:
				fmt.Fprintf(&b, `<rect class="span" data-node="%d" data-hold="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>node %d: client %d's key (token %d) %s–%s</title></rect>`,
					s.Node, hd.ID, sx, ry, sw, svgBarH, clientColor(hd.Client), s.Node, hd.Client, hd.Token, secs(s.From), secs(s.To))
			default:
				fmt.Fprintf(&b, `<rect class="span other" data-node="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="#9e9e9e"><title>node %d: a key of a failed attempt, %s–%s</title></rect>`,
					s.Node, sx, ry, sw, svgBarH, s.Node, secs(s.From), secs(s.To))
			}
		}

		// Client rows: critical sections and writes.
		for _, hd := range h.Holds {
			if hd.Key != key || hd.Granted >= dur {
				continue
			}
			ry := clientY(hd.Client) + (svgRowH-svgBarH)/2
			hx, hw := x(hd.Granted), math.Max(x(hd.End)-x(hd.Granted), 1.5)
			fmt.Fprintf(&b, `<rect class="hold" data-hold="%d" data-client="%d" data-token="%d" data-granted-ns="%d" data-end-ns="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.85"><title>client %d, token %d: granted %s (asked %s), valid until %s, ended %s%s</title></rect>`,
				hd.ID, hd.Client, hd.Token, int64(hd.Granted), int64(hd.End), hx, ry, hw, svgBarH, clientColor(hd.Client),
				hd.Client, hd.Token, secs(hd.Granted), secs(hd.Asked), secs(hd.Until), secs(hd.End), lostNote(hd))
			if hd.End > hd.Until && hd.Until > hd.Granted {
				px := x(hd.Until)
				fmt.Fprintf(&b, `<rect class="past-until" data-hold="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"><title>client %d still working after its validity deadline %s</title></rect>`,
					hd.ID, px, ry, math.Max(x(hd.End)-px, 1), svgBarH, hd.Client, secs(hd.Until))
			}
			if hw > 60 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="token" fill="#fff">%d</text>`, hx+3, ry+10, hd.Token%1_000_000)
			}
		}
		for _, w := range h.Writes {
			if w.Key != key || w.Applied < 0 || w.Applied >= dur {
				continue
			}
			cy := clientY(w.Client)
			wx := x(w.Applied)
			if w.Delayed {
				fmt.Fprintf(&b, `<line class="inflight" data-write="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d32f2f" stroke-width="1.5" stroke-dasharray="3,3"/>`,
					w.ID, x(w.Sent), cy+svgRowH/2, wx, cy+svgRowH/2)
			}
			if w.Accepted {
				fmt.Fprintf(&b, `<line class="write accepted" data-write="%d" data-applied-ns="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-width="1"><title>write %d, token %d, accepted at %s</title></line>`,
					w.ID, int64(w.Applied), wx, cy+1, wx, cy+svgRowH-1, w.ID, w.Token, secs(w.Applied))
				continue
			}
			cx, cyc := wx, float64(cy+svgRowH/2)
			why := fmt.Sprintf("the store had admitted token %d", w.Highest)
			if w.Vetoed {
				why = fmt.Sprintf("refused with its transfer (writes %v), another leg of which was stale", w.Legs)
			}
			fmt.Fprintf(&b, `<g class="write rejected" data-write="%d" data-applied-ns="%d" data-token="%d"><title>write %d, token %d, REJECTED at %s: %s</title><circle cx="%.1f" cy="%.1f" r="7" fill="#fff" stroke="#d32f2f" stroke-width="2"/><path d="M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f" stroke="#d32f2f" stroke-width="2.5"/></g>`,
				w.ID, int64(w.Applied), w.Token, w.ID, w.Token, secs(w.Applied), esc(why),
				cx, cyc, cx-4, cyc-4, cx+4, cyc+4, cx-4, cyc+4, cx+4, cyc-4)
		}

		// Overlaps on top, across the section.
		for _, o := range overlaps {
			if o.Key != key || o.From >= dur {
				continue
			}
			a, bb := h.Holds[o.A], h.Holds[o.B]
			what := "client %d worked past its validity deadline while client %d held the lock"
			if o.BothValid {
				what = "client %d and client %d both held a valid lock"
			}
			fmt.Fprintf(&b, `<rect class="overlap" data-a="%d" data-b="%d" data-from-ns="%d" data-to-ns="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="#e53935" fill-opacity="0.28" stroke="#c62828" stroke-width="1"><title>OVERLAP %s–%s: %s (tokens %d and %d)</title></rect>`,
				o.A, o.B, int64(o.From), int64(o.To), x(o.From), secTop+svgRowH, math.Max(x(o.To)-x(o.From), 3), secBottom-secTop-svgRowH,
				secs(o.From), secs(o.To), esc(fmt.Sprintf(what, a.Client, bb.Client)), a.Token, bb.Token)
		}
		y = secBottom + 8
	}
	axis(&b, y, dur, x)
	b.WriteString(`</svg>`)
	return b.String()
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

func lostNote(h Hold) string {
	if h.Lost {
		return "; Do reported the lock lost"
	}
	return ""
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

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
