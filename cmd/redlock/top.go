package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

const topAbout = `
A live view of the locks on the nodes. Every --interval it scans each node's string keys
(SCAN ... TYPE string, MATCH --match when given; at most --limit names per node, the
library's own included) for lock keys: keys that have a TTL and hold a holder id (32
lowercase hex digits). The library's own keys (fence counters redlock:fence:* and
redlock:slot:*, RedisFence's redlock:highest:*, waiter queues) are told by their names and
not read; the default --limit covers a node's 16 384 slot counters many times over. It
reads every lock key found on every node as 'redlock status' does, and prints a table: per lock
its state, its holder (first 8 hex digits), on how many nodes that holder has its key, how
long it keeps a quorum without renewing, the next token, and the remaining TTL on each
node. A row marked '!' is a lock the nodes disagree about: a holder present on fewer than
a quorum of nodes (a different holder on some node, an acquire half done, or keys
expiring). Locks taken WithoutFencing are found too (their token is 0).

Only locks with a key on some node are shown; --all shows free ones too, as far as they
left something behind: a per-key fence counter (redlock:fence:*, written by clients of
--counter-layout key, and by versions before the slot layout), which outlives its lock by
days. A free lock of the default slot layout leaves nothing of its own (its tokens came
from the counter of its hash slot, shared with other keys), so --all cannot show it.

On a terminal the table is redrawn in place until Ctrl-C. With --once, or when stdout is
not a terminal, one snapshot is printed. --json prints one JSON document per line per
refresh (one with --once); see docs/cli.md for the fields.

Exit status: 0 after Ctrl-C or SIGTERM, or, for one snapshot, when a quorum of nodes
answered the scan; 1 for one snapshot that fewer answered (it is still printed, and one line
on stderr says so); 2 for a bad command line; 130 when interrupted before one snapshot
was printed.`

// topScanCount is the COUNT hint of top's SCANs: how many keys a node examines per call.
// A node of the slot layout holds up to 16 384 slot counters, so a whole scan of one takes
// about 17 calls.
const topScanCount = 1000

// topDefaultLimit is --limit's default: enough to scan every string key of a node that holds
// the slot layout's 16 384 counters, per-key counters of key-layout clients and tens of
// thousands of locks besides. A scan that stops at the limit says so.
const topDefaultLimit = 100_000

// topWorkers bounds how many Status reads of one refresh are in flight at once; the
// library batches them into pipelines per node.
const topWorkers = 16

// topKeyWidth is how many bytes of a key the table shows before shortening it.
const topKeyWidth = 40

type topConfig struct {
	interval time.Duration
	limit    int
	match    string
	all      bool
	asJSON   bool
	live     bool
	color    bool // stdout is a terminal: disagreements in colour, the screen redrawn
	rows     int  // the terminal's size, 0 when unknown
	cols     int
}

func runTop(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("top", "[flags]", topAbout)
	nodesFlag := fs.String("nodes", "", "comma-separated `URLS` of the Redis nodes (default $"+nodesEnv+")")
	interval := durationFlag(time.Second)
	fs.Var(&interval, "interval", "`D` between refreshes (default 1s)")
	limit := fs.Int("limit", topDefaultLimit, "at most `N` string keys examined per node (the library's own counted) and N locks listed per refresh")
	match := fs.String("match", "", "scan for and show only lock keys matching this Redis `GLOB` (as KEYS and SCAN MATCH: * ? [a-z] \\)")
	all := fs.Bool("all", false, "also show free locks that have a per-key fence counter but no key on any node")
	asJSON := fs.Bool("json", false, "print one JSON document per refresh instead of the table")
	once := fs.Bool("once", false, "print one snapshot and exit")
	nodeTimeout := fs.Duration("node-timeout", statusNodeTimeout, "how long to wait for each node, per call")
	amnesia := fs.Int("amnesia-tolerance", redlock.DefaultAmnesiaTolerance, "`F` as in the library's WithAmnesiaTolerance: raises the quorum; must match the lock's users")
	var layout layoutFlag
	fs.Var(&layout, "counter-layout", layoutUsage(", those of the clients whose next token is shown"))
	var tlsf tlsFlags
	tlsf.register(fs)
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	switch {
	case time.Duration(interval) <= 0:
		return usageErrorf("top: --interval %v must be positive", time.Duration(interval))
	case *limit <= 0:
		return usageErrorf("top: --limit %d must be at least 1", *limit)
	case *nodeTimeout <= 0:
		return usageErrorf("top: --node-timeout %v must be positive", *nodeTimeout)
	}
	r, err := openReader(e, "top", *nodesFlag, &tlsf, *nodeTimeout, *amnesia, redlock.CounterLayout(layout))
	if err != nil {
		return err
	}
	defer r.close()
	c, clients, urls := r.c, r.clients, r.urls

	cfg := topConfig{interval: time.Duration(interval), limit: *limit, match: *match, all: *all, asJSON: *asJSON}
	if f, ok := e.stdout.(*os.File); ok {
		cfg.rows, cfg.cols, cfg.color = terminalSize(int(f.Fd()))
	}
	cfg.live = !*once && (cfg.asJSON || cfg.color)
	addrs := make([]string, len(urls))
	for i, u := range urls {
		addrs[i] = u.opts.Addr
	}
	t := &topper{c: c, clients: clients, addrs: addrs, nodeTimeout: *nodeTimeout, cfg: cfg}
	for {
		snap, err := t.snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				if cfg.live {
					return nil // Ctrl-C or SIGTERM: the way to leave the live view
				}
				return &exitError{code: 128 + 2}
			}
			return fmt.Errorf("top: %s", bare(err))
		}
		if err := t.render(e.stdout, snap); err != nil {
			return fmt.Errorf("top: %w", err)
		}
		if !cfg.live {
			if snap.answered < snap.quorum {
				return fmt.Errorf("top: only %d of %d nodes answered the scan, quorum is %d: locks may be missing%s",
					snap.answered, len(snap.nodes), snap.quorum, snap.firstFailure())
			}
			return nil
		}
		timer := time.NewTimer(cfg.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// topper takes and prints top's snapshots.
type topper struct {
	c           *redlock.Client
	clients     []redis.UniversalClient
	addrs       []string
	nodeTimeout time.Duration
	cfg         topConfig
}

// topNode is what one node's scan found.
type topNode struct {
	err       error // nil when the scan answered
	examined  int   // string keys returned by SCAN
	truncated bool  // the scan stopped at --limit with names left
}

// topSnap is one refresh.
type topSnap struct {
	at         time.Time
	quorum     int
	nodes      []topNode
	answered   int               // nodes whose scan answered
	found      int               // distinct lock keys found, after --match
	truncated  bool              // a node's scan or the list of keys stopped at --limit
	cutScans   int               // nodes whose scan stopped at --limit
	cutList    bool              // more keys to read than --limit
	locks      []*redlock.Status // the locks shown, by key
	hiddenFree int               // free locks found but not shown (without --all)
}

func (s *topSnap) firstFailure() string {
	for i, n := range s.nodes {
		if n.err != nil {
			return fmt.Sprintf("; node %d: %s", i, tlsHint(oneLine(n.err.Error())))
		}
	}
	return ""
}

// snapshot scans every node for lock keys (scan), and reads each key's status on every
// node. Keys found holding a holder id come first: a key known only from a per-key fence
// counter is read only with --all (without it, it is counted as a free lock not shown), so
// the counters that key-layout clients leave for days never crowd held locks out of
// --limit. It returns an error only when ctx ends or the client is closed; a node that fails
// has its error in the snapshot.
func (t *topper) snapshot(ctx context.Context) (*topSnap, error) {
	snap := &topSnap{at: time.Now(), quorum: t.c.Quorum(), nodes: make([]topNode, len(t.clients))}
	found := make([]topFound, len(t.clients))
	var wg sync.WaitGroup
	for i, cl := range t.clients {
		wg.Go(func() { found[i], snap.nodes[i] = t.scan(ctx, cl) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	holders, counted := map[string]bool{}, map[string]bool{}
	for i, f := range found {
		if snap.nodes[i].err == nil {
			snap.answered++
		}
		if snap.nodes[i].truncated {
			snap.cutScans++
		}
		for _, k := range f.holders {
			if t.matches(k) {
				holders[k] = true
			}
		}
		for _, k := range f.counters {
			if t.matches(k) {
				counted[k] = true
			}
		}
	}
	held := slices.Sorted(maps.Keys(holders))
	var free []string // known only from a per-key counter
	for k := range counted {
		if !holders[k] {
			free = append(free, k)
		}
	}
	slices.Sort(free)
	snap.found = len(held) + len(free)
	read := held
	if t.cfg.all {
		read = append(read, free...)
	} else {
		snap.hiddenFree = len(free)
	}
	if len(read) > t.cfg.limit {
		read, snap.cutList = read[:t.cfg.limit], true
	}
	snap.truncated = snap.cutScans > 0 || snap.cutList

	sts := make([]*redlock.Status, len(read))
	errs := make([]error, len(read))
	next := make(chan int)
	for range min(topWorkers, len(read)) {
		wg.Go(func() {
			for i := range next {
				sts[i], errs[i] = t.c.Status(ctx, read[i])
			}
		})
	}
	for i := range read {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, redlock.ErrInvalidArgument) {
			snap.found-- // not a key a lock could have, whatever it holds
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.cfg.all || present(sts[i]) {
			snap.locks = append(snap.locks, sts[i])
		} else {
			snap.hiddenFree++ // released (or expired) between the scan and the read
		}
	}
	slices.SortFunc(snap.locks, func(a, b *redlock.Status) int { return strings.Compare(a.Key, b.Key) })
	return snap, nil
}

// matches reports whether a lock key passes --match.
func (t *topper) matches(key string) bool { return t.cfg.match == "" || redisGlob(t.cfg.match, key) }

// topFound is what one node's scan found: keys that hold a holder id and have a TTL, and
// the lock keys named by per-key fence counters.
type topFound struct {
	holders, counters []string
}

// scanPatterns are the MATCH patterns of one scan: all string keys, or with --match the keys
// it matches and the per-key fence counters (whose names are not their keys'), which give
// --all its free locks.
func (t *topper) scanPatterns() []string {
	if t.cfg.match == "" {
		return []string{""}
	}
	return []string{t.cfg.match, redlock.FencePrefix + "*"}
}

// scan returns the lock keys found on one node, at most --limit names examined over its
// patterns, each call (a SCAN, then one pipeline of GET and PTTL for the names it returned
// that are not the library's own) bounded by the node timeout. A lock key is a string key,
// not one of the library's own, that has a TTL and holds a holder id; a per-key fence
// counter names its lock key too, so that --all can show free locks of the key layout.
func (t *topper) scan(ctx context.Context, cl redis.UniversalClient) (topFound, topNode) {
	var n topNode
	var f topFound
	fail := func(what string, err error) (topFound, topNode) {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no reply to %s within %v", what, t.nodeTimeout)
		}
		n.err = err
		return f, n
	}
	for _, pattern := range t.scanPatterns() {
		var cursor uint64
		for {
			if n.examined == t.cfg.limit {
				n.truncated = true // names may be left: the budget is spent
				return f, n
			}
			cctx, cancel := context.WithTimeout(ctx, t.nodeTimeout)
			names, next, err := cl.ScanType(cctx, cursor, pattern, topScanCount, "string").Result()
			cancel()
			if err != nil {
				return fail("SCAN", err)
			}
			if left := t.cfg.limit - n.examined; len(names) > left {
				names, n.truncated = names[:left], true
			}
			n.examined += len(names)
			var candidates []string
			for _, name := range names {
				if k, ok := redlock.LockKeyOfCounter(name); ok {
					f.counters = append(f.counters, k)
				} else if name != "" && len(name) <= redlock.MaxKeyLen && !libraryKey(name) {
					candidates = append(candidates, name)
				}
			}
			if len(candidates) > 0 {
				found, err := t.holderKeys(ctx, cl, candidates)
				if err != nil {
					return fail("GET and PTTL", err)
				}
				f.holders = append(f.holders, found...)
			}
			if n.truncated {
				return f, n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return f, n
}

// holderKeys returns those of names that hold a holder id and have a TTL, read in one
// pipeline bounded by the node timeout. A key that vanished or changed type between the
// SCAN and the read is left out.
func (t *topper) holderKeys(ctx context.Context, cl redis.UniversalClient, names []string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, t.nodeTimeout)
	defer cancel()
	pipe := cl.Pipeline()
	gets := make([]*redis.StringCmd, len(names))
	ttls := make([]*redis.DurationCmd, len(names))
	for i, name := range names {
		gets[i] = pipe.Get(cctx, name)
		ttls[i] = pipe.PTTL(cctx, name)
	}
	_, _ = pipe.Exec(cctx) // each command's error is looked at below
	var keys []string
	for i, name := range names {
		v, gerr := gets[i].Result()
		ttl, terr := ttls[i].Result()
		for _, err := range []error{gerr, terr} {
			if err != nil && !isReply(err) {
				return nil, err
			}
		}
		if gerr == nil && terr == nil && ttl > 0 && holderLike(v) {
			keys = append(keys, name)
		}
	}
	return keys, nil
}

// isReply reports whether err is a reply of the server (redis.Nil for a key that is gone,
// WRONGTYPE for one that changed type), not a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// holderLike reports whether v looks like a holder id: 32 lowercase hex digits.
func holderLike(v string) bool {
	if len(v) != 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// libraryKey reports whether name is one of the library's own keys rather than a lock key:
// a fence counter of either layout, a RedisFence token key, or a waiter queue (no lock key
// may start with any of these prefixes).
func libraryKey(name string) bool {
	for _, p := range []string{redlock.FencePrefix, redlock.SlotCounterPrefix, redlock.HighestTokenPrefix, redlock.QueuePrefix, redlock.WaitersPrefix} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// present reports whether some node that answered has a key for the lock.
func present(st *redlock.Status) bool {
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Holder != "" {
			return true
		}
	}
	return false
}

// topView is what top derives from one lock's status.
type topView struct {
	state    string // "held", "partial", "free" or "unknown"
	disagree bool   // some holder has its key on fewer than a quorum of nodes
	holder   string // the quorum holder, else the holder on the most nodes ("" for none)
	on       int    // how many nodes have holder's key
}

func viewOf(st *redlock.Status) topView {
	counts := map[string]int{}
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Holder != "" {
			counts[ns.Holder]++
		}
	}
	var v topView
	for h, k := range counts {
		if k < st.Quorum {
			v.disagree = true
		}
		if k > v.on || (k == v.on && h < v.holder) {
			v.holder, v.on = h, k
		}
	}
	switch {
	case answered(st) < st.Quorum:
		v.state = "unknown"
	case st.HeldByQuorum():
		v.state = "held"
	case len(counts) > 0:
		v.state = "partial"
	default:
		v.state = "free"
	}
	return v
}

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
	var head []string
	head = append(head, fmt.Sprintf("redlock top  %s  %d nodes, quorum %d%s", s.at.Format("15:04:05"), len(s.nodes), s.quorum, t.liveNote()))
	line := fmt.Sprintf("nodes: %d of %d answered", s.answered, len(s.nodes))
	for i, n := range s.nodes {
		if n.err != nil {
			line += fmt.Sprintf("; node %d (%s): %s", i, t.addrs[i], tlsHint(oneLine(n.err.Error())))
		}
	}
	if s.answered < s.quorum {
		line += "; FEWER THAN A QUORUM: locks may be missing"
	}
	head = append(head, line)
	line = fmt.Sprintf("locks: %d shown of %d found", len(s.locks), s.found)
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
	if s.cutScans > 0 {
		nodes := "nodes"
		if s.cutScans == 1 {
			nodes = "node"
		}
		line += fmt.Sprintf("; the scan of %d %s stopped at --limit %d string keys: locks may be missing (raise --limit, or narrow the scan with --match)",
			s.cutScans, nodes, t.cfg.limit)
	}
	if s.cutList {
		line += fmt.Sprintf("; more than --limit %d locks found: %d read, held ones first (raise --limit, or narrow with --match)", t.cfg.limit, t.cfg.limit)
	}
	head = append(head, line, "")

	locks := s.locks
	more := 0
	if t.cfg.live && t.cfg.rows > 0 {
		room := max(t.cfg.rows-len(head)-2, 0) // the column titles and the "more" line
		if len(locks) > room {
			locks, more = locks[:room], len(locks)-room
		}
	}
	var tb bytes.Buffer
	tw := newTable(&tb)
	titles := "\tkey\tstate\tholder\ton\tttl\tnext token"
	for i := range s.nodes {
		titles += "\tn" + strconv.Itoa(i)
	}
	fmt.Fprintln(tw, titles)
	var marks []bool
	for _, st := range locks {
		v := viewOf(st)
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
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d/%d\t%s\t%s", mark, displayKey(st.Key), v.state, shortID(v.holder), v.on, len(st.Nodes), ttl, next)
		for _, ns := range st.Nodes {
			row += "\t" + nodeCell(ns, v.holder)
		}
		fmt.Fprintln(tw, row)
		marks = append(marks, v.disagree)
	}
	_ = tw.Flush()
	for _, l := range head {
		fmt.Fprintln(w, t.cut(l))
	}
	for i, l := range strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n") {
		l = t.cut(strings.TrimRight(l, " "))
		if i > 0 && marks[i-1] && t.cfg.color {
			l = "\x1b[1;31m" + l + "\x1b[0m"
		}
		fmt.Fprintln(w, l)
	}
	if more > 0 {
		fmt.Fprintln(w, t.cut(fmt.Sprintf("... %d more locks (a taller terminal, --match or --json shows them)", more)))
	}
	if len(s.locks) == 0 {
		fmt.Fprintln(w, "(no locks held)")
	}
}

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

// displayKey quotes a key for the table, Go-style, so that control characters, invalid
// UTF-8 and spaces show as escapes and can neither move the cursor nor be mistaken for
// column breaks; a key longer than topKeyWidth bytes is cut and its length added.
func displayKey(k string) string {
	if len(k) <= topKeyWidth {
		return strconv.Quote(k)
	}
	cut := topKeyWidth
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	q := strconv.Quote(k[:cut])
	return fmt.Sprintf("%s...\"(%d bytes)", q[:len(q)-1], len(k))
}

// topDoc is one --json document. Its fields are documented in docs/cli.md; keep them stable.
type topDoc struct {
	Time       string       `json:"time"` // RFC 3339, milliseconds
	Quorum     int          `json:"quorum"`
	Total      int          `json:"total"`
	Answered   int          `json:"answered"`
	Nodes      []topNodeDoc `json:"nodes"`
	Found      int          `json:"found"`
	Truncated  bool         `json:"truncated"`
	HiddenFree int          `json:"hidden_free"`
	Locks      []topLockDoc `json:"locks"`
}

type topNodeDoc struct {
	Node      int    `json:"node"`
	Addr      string `json:"addr"`
	Answered  bool   `json:"answered"`
	Error     string `json:"error"`
	Examined  int    `json:"examined"`
	Truncated bool   `json:"truncated"`
}

type topLockDoc struct {
	Key              string          `json:"key"`
	KeyBase64        string          `json:"key_base64"`
	State            string          `json:"state"`
	Disagree         bool            `json:"disagree"`
	Holder           string          `json:"holder"`
	HolderNodes      int             `json:"holder_nodes"`
	Quorum           bool            `json:"quorum"`
	TTLMillis        int64           `json:"ttl_ms"`
	NextTokenAtLeast uint64          `json:"next_token_at_least"`
	Nodes            []nodeStatusDoc `json:"nodes"`
}

func writeTopJSON(w io.Writer, s *topSnap, addrs []string) error {
	doc := topDoc{
		Time: s.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Quorum: s.quorum, Total: len(s.nodes), Answered: s.answered,
		Nodes: make([]topNodeDoc, 0, len(s.nodes)), Found: s.found, Truncated: s.truncated, HiddenFree: s.hiddenFree,
		Locks: make([]topLockDoc, 0, len(s.locks)),
	}
	for i, n := range s.nodes {
		nd := topNodeDoc{Node: i, Addr: addrs[i], Answered: n.err == nil, Examined: n.examined, Truncated: n.truncated}
		if n.err != nil {
			nd.Error = oneLine(n.err.Error())
		}
		doc.Nodes = append(doc.Nodes, nd)
	}
	for _, st := range s.locks {
		v := viewOf(st)
		ld := topLockDoc{
			Key: st.Key, KeyBase64: base64.StdEncoding.EncodeToString([]byte(st.Key)), State: v.state, Disagree: v.disagree,
			Holder: v.holder, HolderNodes: v.on, Quorum: st.HeldByQuorum(), TTLMillis: quorumTTL(st).Milliseconds(),
			NextTokenAtLeast: uint64(st.NextTokenAtLeast), Nodes: nodeDocs(st),
		}
		doc.Locks = append(doc.Locks, ld)
	}
	return json.NewEncoder(w).Encode(doc) // one line per document
}
