package main

// Printing redlock top's table: the header lines, one row per lock, and, on a terminal,
// the redraw in place, cut to the terminal's size. The --json documents are in top_json.go.

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quorumlock/redlock"
)

// topKeyWidth is how many bytes of a key the table shows before shortening it.
const topKeyWidth = 40

// render prints one snapshot: a JSON document with --json, else the table, redrawn in
// place in the live view.
func (t *topper) render(w io.Writer, s *topSnap) error {
	if t.cfg.asJSON {
		return writeTopJSON(w, s, t.addrs)
	}
	var b bytes.Buffer
	t.writeTable(&b, s)
	if !t.cfg.live {
		_, err := w.Write(b.Bytes())
		return err
	}
	// Redraw in place: home, each line cleared to its end, the rest of the screen cleared.
	var screen strings.Builder
	screen.WriteString("\x1b[H")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, line := range lines {
		screen.WriteString(line)
		screen.WriteString("\x1b[K\n")
	}
	screen.WriteString("\x1b[J")
	_, err := io.WriteString(w, screen.String())
	return err
}

// writeTable prints the snapshot as text. On a terminal, rows that do not fit are counted
// instead of shown, lines are cut at its width, and disagreements are in bold red.
func (t *topper) writeTable(w io.Writer, s *topSnap) {
	head := []string{
		fmt.Sprintf("redlock top  %s  %d nodes, quorum %d%s", s.at.Format("15:04:05"), len(s.nodes), s.quorum, t.liveNote()),
		t.nodesLine(s),
		t.locksLine(s),
		"",
	}
	for _, l := range head {
		fmt.Fprintln(w, t.cut(l))
	}
	rows, marks := tableRows(len(s.nodes), s.locks, s.rws)
	more := 0
	if room := t.cfg.rows - len(head) - 2; t.cfg.live && t.cfg.rows > 0 && len(marks) > max(room, 0) {
		// the column titles and the "more" line take the two lines left
		more = len(marks) - max(room, 0)
		rows, marks = rows[:len(rows)-more], marks[:len(marks)-more]
	}
	for i, l := range rows {
		l = t.cut(strings.TrimRight(l, " "))
		if i > 0 && marks[i-1] && t.cfg.color {
			l = "\x1b[1;31m" + l + "\x1b[0m"
		}
		fmt.Fprintln(w, l)
	}
	if more > 0 {
		fmt.Fprintln(w, t.cut(fmt.Sprintf("... %d more locks (a taller terminal, --match or --json shows them)", more)))
	}
	switch {
	case len(s.locks) > 0 || len(s.rws) > 0:
	case t.cfg.match != "":
		fmt.Fprintln(w, "(no locks held that match --match)")
	default:
		fmt.Fprintln(w, "(no locks held)")
	}
}

// nodesLine is the header line about the nodes: how many answered the scan, and the error
// of each that did not.
func (t *topper) nodesLine(s *topSnap) string {
	line := fmt.Sprintf("nodes: %d of %d answered", s.answered, len(s.nodes))
	for i, n := range s.nodes {
		if n.err != nil {
			line += fmt.Sprintf("; node %d (%s): %s", i, t.addrs[i], oneLine(withNodeHint(t.addrs[i], n.err.Error())))
		}
	}
	if s.answered < s.quorum {
		line += "; FEWER THAN A QUORUM: locks may be missing"
	}
	return line
}

// locksLine is the header line about the locks: how many are shown of those found, how many
// the nodes disagree about, and what --limit left out.
func (t *topper) locksLine(s *topSnap) string {
	line := fmt.Sprintf("locks: %d shown of %d found", len(s.locks), s.found)
	if s.hiddenFree > 0 {
		line += fmt.Sprintf(", %d free not shown (--all shows them)", s.hiddenFree)
	}
	disagree := 0
	for _, st := range s.locks {
		if viewOf(st).disagree {
			disagree++
		}
	}
	if disagree > 0 {
		line += fmt.Sprintf(", %d the nodes disagree about (!)", disagree)
	}
	if s.foundRW > 0 {
		line += fmt.Sprintf("; readers of %d read/write locks shown, of %d found", len(s.rws), s.foundRW)
		if s.hiddenRW > 0 {
			line += fmt.Sprintf(", %d without readers not shown (--all shows them)", s.hiddenRW)
		}
	}
	if s.cutScans > 0 {
		line += fmt.Sprintf("; the scan of %s stopped at --limit %d string keys: locks may be missing (raise --limit, or narrow the scan with --match)",
			countNodes(s.cutScans), t.cfg.limit)
	}
	if s.cutRWScans > 0 {
		line += fmt.Sprintf("; the scan of %s stopped at --limit %d keys in the readers sets: read/write locks may be missing (raise --limit)",
			countNodes(s.cutRWScans), t.cfg.limit)
	}
	if s.cutRWList {
		line += fmt.Sprintf("; more than --limit %d read/write locks found: %d read (raise --limit, or narrow with --match)", t.cfg.limit, t.cfg.limit)
	}
	if s.cutList {
		line += fmt.Sprintf("; more than --limit %d locks found: %d read, held ones first (raise --limit, or narrow with --match)", t.cfg.limit, t.cfg.limit)
	}
	return line
}

// countNodes is "1 node" or "K nodes".
func countNodes(k int) string {
	if k == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", k)
}

// tableRows lays out the column titles and one row per lock in aligned columns, and
// returns the lines (titles first) and, per row, whether it is a disagreement. The rows are
// in byte order of the lock keys, a read/write lock's readers row right after its writer key's.
func tableRows(nodes int, locks []*redlock.Status, rws []*redlock.RWStatus) ([]string, []bool) {
	type row struct {
		sortKey, line string
		mark          bool
	}
	var all []row
	for _, st := range locks {
		v := viewOf(st)
		all = append(all, row{st.Key, lockRow(st, v), v.disagree})
	}
	for _, rw := range rws {
		line, mark := readersRow(rw)
		all = append(all, row{rw.Writer.Key + "\x00", line, mark})
	}
	slices.SortStableFunc(all, func(a, b row) int { return strings.Compare(a.sortKey, b.sortKey) })
	var tb bytes.Buffer
	tw := newTable(&tb)
	titles := "\tkey\tstate\tholder\ton\tttl\tnext token"
	for i := range nodes {
		titles += "\tn" + strconv.Itoa(i)
	}
	fmt.Fprintln(tw, titles)
	marks := make([]bool, 0, len(all))
	for _, r := range all {
		fmt.Fprintln(tw, r.line)
		marks = append(marks, r.mark)
	}
	_ = tw.Flush()
	return strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n"), marks
}

// lockRow is one lock's row, tab-separated: the disagreement mark, the key, the state, the
// holder, on how many nodes it is, the quorum's TTL, the next token and one cell per node.
func lockRow(st *redlock.Status, v topView) string {
	mark := ""
	if v.disagree {
		mark = "!"
	}
	ttl, next := "-", "?"
	if st.HeldByQuorum() {
		ttl = fmtTTL(quorumTTL(st))
	}
	if st.NextTokenAtLeast != 0 {
		next = st.NextTokenAtLeast.String()
	}
	row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d/%d\t%s\t%s", mark, displayLockKey(st.Key), v.state, shortID(v.holder), v.on, len(st.Nodes), ttl, next)
	for _, ns := range st.Nodes {
		row += "\t" + nodeCell(ns, v.holder)
	}
	return row
}

// readersRow is a read/write lock's readers row, tab-separated, in the lock rows' columns
// (readersView says what each holds), and whether it is a disagreement.
func readersRow(rw *redlock.RWStatus) (string, bool) {
	v := readersViewOf(rw)
	mark, ttl := "", "-"
	if v.disagree {
		mark = "!"
	}
	if v.ttl > 0 {
		ttl = fmtTTL(v.ttl)
	}
	holder := fmt.Sprintf("%d readers", len(rw.Readers))
	if len(rw.Readers) == 1 {
		holder = "1 reader"
	}
	row := fmt.Sprintf("%s\trwlock %s readers\t%s\t%s\t%d/%d\t%s\t-", mark, displayKey(rw.Name), v.state, holder, v.on, len(rw.Nodes), ttl)
	for _, ns := range rw.Nodes {
		switch {
		case ns.Err != nil || ns.Readers < 0:
			row += "\t?"
		case ns.Readers == 0:
			row += "\t-"
		default:
			row += fmt.Sprintf("\t%dr", ns.Readers)
		}
	}
	return row, v.disagree
}

// liveNote is the header's note of the refresh interval, in the live view only.
func (t *topper) liveNote() string {
	if !t.cfg.live {
		return ""
	}
	return fmt.Sprintf("  every %v, Ctrl-C quits", t.cfg.interval)
}

// cut shortens a line to the terminal's width, when known.
func (t *topper) cut(l string) string {
	if !t.cfg.live || t.cfg.cols <= 0 || utf8.RuneCountInString(l) <= t.cfg.cols {
		return l
	}
	return string([]rune(l)[:t.cfg.cols])
}

// nodeCell is one node's cell in a lock's row: the remaining TTL of holder's key, "-" when
// the node has no key, "?" when it did not answer, and "!ID TTL" for another holder's key.
func nodeCell(ns redlock.NodeStatus, holder string) string {
	switch {
	case ns.Err != nil:
		return "?"
	case ns.Holder == "":
		return "-"
	case ns.Holder == holder:
		return fmtTTL(ns.TTL)
	}
	return "!" + shortID(ns.Holder) + " " + fmtTTL(ns.TTL)
}

// displayLockKey is a lock's key in the table: a semaphore's permit by the semaphore's name
// and the permit's number, as semaphore "NAME" #I; an election's key as election "NAME"; a
// read/write lock's writer key as rwlock "NAME" writer; any other key as displayKey shows it.
func displayLockKey(k string) string {
	if name, i, ok := redlock.ParsePermitKey(k); ok {
		return fmt.Sprintf("semaphore %s #%d", displayKey(name), i)
	}
	if name, ok := redlock.ParseElectionKey(k); ok {
		return "election " + displayKey(name)
	}
	if name, ok := redlock.ParseRWKey(k); ok {
		return "rwlock " + displayKey(name) + " writer"
	}
	return displayKey(k)
}

// displayKey quotes a key for the table, Go-style, so that control characters, invalid
// UTF-8 and spaces show as escapes and can neither move the cursor nor be mistaken for
// column breaks; a key longer than topKeyWidth bytes is cut and its length added.
func displayKey(k string) string { return cutQuote(k, topKeyWidth) }

// cutQuote quotes s Go-style; an s longer than most bytes is cut there (at a character's
// start), with its length added.
func cutQuote(s string, most int) string {
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	q := strconv.Quote(s[:cut])
	return fmt.Sprintf("%s...\"(%d bytes)", q[:len(q)-1], len(s))
}
