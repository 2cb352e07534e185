package main

// redlock status: one lock's state on every node, as a table or JSON, and the helpers for
// describing holders, TTLs and node errors that exec and top share.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

const statusAbout = `
Reads the lock KEY on every node, changing nothing, and prints one row per node: whether
it answered, the holder (the first 8 hex digits of the holder id), the key's remaining TTL
and its two fence counters: the slot counter, shared by every key of KEY's hash slot, which
the default --counter-layout slot mints tokens from, and the key counter, KEY's own, which
--counter-layout key mints from ('-' when absent). A summary follows: whether one holder
has the key on a quorum of nodes, and the lowest fencing token the next holder can get
(for a client of the layout --counter-layout names).

With --permits N, KEY is the name of a semaphore of N permits (the library's
Client.Semaphore): one row per permit key (its state, holder, TTL and next token) and how
many permits are held; --json prints one document whose "permit" array holds one lock
document per permit.

With --election, KEY is the name of an election (the library's Client.Election): its key
is shown as a lock key is (the holder is the leader's holder id, the tokens are terms), and
then its leader as Election.Leader reports it (term, value and holder), or "none".

With --rwlock, KEY is the name of a read/write lock (the library's Client.RWLock): its
writer key is shown as a lock key is, then per node the readers whose place has not expired
on that node's clock (their number and ids) and the writer intent (the client id of a writer
waiting for the readers to leave, and its TTL). The summary says whether the lock is held
for writing (a writer holds a quorum), for reading (a reader counts when its unexpired place
is on a quorum of nodes), free, or unknown.

--permits, --election and --rwlock are mutually exclusive.

The nodes come from --nodes, else $REDLOCK_NODES. Without --json the output is a table;
with --json it is one JSON document (see docs/cli.md for its fields).

Exit status: 0 when a quorum of nodes answered, whether the lock is held or free; 1 when
fewer did (the table or JSON is still printed, and one line on stderr says so); 2 for a
bad command line. --election reads the key and the leader separately, and exits 1 when
fewer than a quorum answered either.`

// statusNodeTimeout is status's default --node-timeout: a diagnostic had better wait for a
// slow node than report it as down, and a node that hangs costs only this once.
const statusNodeTimeout = 2 * time.Second

// cliNodeTimeout is the default --node-timeout of exec. It is longer than the
// library's default because a CLI run opens fresh connections (its first call to a node
// also dials and loads the scripts) and often runs on busy machines. It costs little: an
// acquire or renewal returns as soon as a quorum agrees, so only failures wait this long.
const cliNodeTimeout = 500 * time.Millisecond

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("status", "[flags] KEY", statusAbout)
	nodesFlag := fs.String("nodes", "", "comma-separated `URLS` of the Redis nodes (default $"+nodesEnv+")")
	asJSON := fs.Bool("json", false, "print one JSON document instead of the table")
	nodeTimeout, amnesia, permits := new(time.Duration), new(int), new(int)
	durationVar(fs, nodeTimeout, "node-timeout", statusNodeTimeout, "how long (a `DURATION`) to wait for each node")
	intVar(fs, amnesia, "amnesia-tolerance", redlock.DefaultAmnesiaTolerance, "`F` as in the library's WithAmnesiaTolerance: raises the quorum; must match the lock's users")
	intVar(fs, permits, "permits", 0, "read KEY as the name of a semaphore of `N` permits (the library's Client.Semaphore), one row per permit; 0 for a lock key")
	election := fs.Bool("election", false, "read KEY as the name of an election (the library's Client.Election): its key as a lock's, and its leader")
	rwlock := fs.Bool("rwlock", false, "read KEY as the name of a read/write lock (the library's Client.RWLock): its writer key as a lock's, its readers and writer intent")
	var layout layoutFlag
	fs.Var(&layout, "counter-layout", layoutUsage(", those of the clients whose next token is shown"))
	var tlsf tlsFlags
	tlsf.register(fs)
	pos, err := parseInterspersed(fs, e, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("status: want exactly one KEY, got %d arguments (run 'redlock status -h' for help)", len(pos))
	}
	key := pos[0]
	if *nodeTimeout <= 0 {
		return usageErrorf("status: --node-timeout %v must be positive", *nodeTimeout)
	}
	if *permits < 0 || *permits > redlock.MaxPermits {
		return usageErrorf("status: --permits %d: want 1 to %d for a semaphore, or 0 for a lock key", *permits, redlock.MaxPermits)
	}
	if kinds := btoi(*permits > 0) + btoi(*election) + btoi(*rwlock); kinds > 1 {
		return usageErrorf("status: --election, --rwlock and --permits are mutually exclusive: KEY names one thing (run 'redlock status -h' for help)")
	}
	r, err := openReader(e, "status", readerOptions{nodes: *nodesFlag, tls: &tlsf, nodeTimeout: *nodeTimeout, amnesia: *amnesia, layout: redlock.CounterLayout(layout)})
	if err != nil {
		return err
	}
	defer r.close()
	c := r.c
	switch {
	case *permits > 0:
		return semaphoreStatus(ctx, e, c, key, *permits, *asJSON)
	case *election:
		return electionStatus(ctx, e, c, key, *asJSON)
	case *rwlock:
		return rwLockStatus(ctx, e, c, key, *asJSON)
	}

	st, err := c.Status(ctx, key)
	switch {
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("status: bad KEY: %s", bare(err))
	case err != nil:
		return fmt.Errorf("status: %s", bare(err))
	}
	probeFailed(st)
	if *asJSON {
		if err := writeStatusJSON(e.stdout, st); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	} else {
		writeStatusTable(e.stdout, st)
	}
	return tooFewAnswered(st, strconv.Quote(key))
}

// tooFewAnswered is status's error for a read that fewer than a quorum of nodes answered,
// naming what, its state unknown, and the first node's failure; nil when a quorum answered.
func tooFewAnswered(st *redlock.Status, what string) error {
	n := answered(st)
	if n >= st.Quorum {
		return nil
	}
	first := ""
	for _, ns := range st.Nodes {
		if ns.Err != nil {
			first = "; first failure: " + withNodeHint(ns.Addr, bare(ns.Err))
			break
		}
	}
	return fmt.Errorf("status: only %d of %d nodes answered, quorum is %d: the state of %s is unknown%s", n, len(st.Nodes), st.Quorum, what, first)
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// answered returns how many nodes answered a status read.
func answered(st *redlock.Status) int {
	n := 0
	for _, ns := range st.Nodes {
		if ns.Err == nil {
			n++
		}
	}
	return n
}

// holderNodes returns how many nodes hold the key for holder.
func holderNodes(st *redlock.Status, holder string) int {
	n := 0
	for _, ns := range st.Nodes {
		if ns.Err == nil && holder != "" && ns.Holder == holder {
			n++
		}
	}
	return n
}

// quorumTTL returns how long the quorum holder keeps a quorum if it does not renew: the
// Q-th longest of its keys' TTLs. 0 when no holder has a quorum.
func quorumTTL(st *redlock.Status) time.Duration {
	if !st.HeldByQuorum() {
		return 0
	}
	var ttls []time.Duration
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Holder == st.Holder {
			ttls = append(ttls, ns.TTL)
		}
	}
	slices.Sort(ttls)
	slices.Reverse(ttls)
	if len(ttls) < st.Quorum {
		return 0
	}
	return ttls[st.Quorum-1]
}

// shortID returns the first 8 characters of a holder id, "-" for none.
func shortID(id string) string {
	if id == "" {
		return "-"
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// fmtTTL formats a remaining TTL to the millisecond.
func fmtTTL(d time.Duration) string { return d.Round(time.Millisecond).String() }

// nodeErrText returns a node's error without the "redlock: node N (ADDR): " prefix that the
// table's other columns already show, with what withNodeHint adds for its address.
func nodeErrText(err error) string {
	var ne *redlock.NodeError
	if errors.As(err, &ne) {
		return oneLine(withNodeHint(ne.Addr, ne.Err.Error()))
	}
	return oneLine(err.Error())
}

// probeFailed runs the wrong-scheme probes (probeFailures) of the nodes whose read in st
// failed, in parallel, before their errors are printed one by one.
func probeFailed(st *redlock.Status) {
	addrs := make([]string, len(st.Nodes))
	errs := make([]error, len(st.Nodes))
	for i, ns := range st.Nodes {
		addrs[i], errs[i] = ns.Addr, ns.Err
	}
	probeFailures(addrs, errs)
}

// bare returns an error's message without the "redlock: " prefixes that the library puts
// on its errors: the dispatcher adds one of its own.
func bare(err error) string { return bareText(err.Error()) }

// bareText is bare for a message of the library's that is not an error value, such as
// QuorumError.Detail: on one line, without the "redlock: " prefixes.
func bareText(msg string) string {
	return oneLine(strings.ReplaceAll(msg, "redlock: ", ""))
}

// stateWord is the one-word state of the lock: held, free or unknown.
func stateWord(st *redlock.Status) string {
	switch {
	case answered(st) < st.Quorum:
		return "unknown"
	case st.HeldByQuorum():
		return "held"
	}
	return "free"
}

// describeHolder says in one phrase who holds the lock according to st.
func describeHolder(st *redlock.Status) string {
	n := answered(st)
	switch {
	case n < st.Quorum:
		return fmt.Sprintf("only %d of %d nodes answered, quorum is %d", n, len(st.Nodes), st.Quorum)
	case st.HeldByQuorum():
		return fmt.Sprintf("held by %s on %d of %d nodes, for about %s unless renewed",
			shortID(st.Holder), holderNodes(st, st.Holder), len(st.Nodes), fmtTTL(quorumTTL(st)))
	}
	keys := 0
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Holder != "" {
			keys++
		}
	}
	if keys > 0 {
		return fmt.Sprintf("no holder has a quorum, but %d of %d nodes hold a key (a split vote, or keys about to expire)", keys, len(st.Nodes))
	}
	return fmt.Sprintf("no holder on any of the %d nodes that answered", n)
}

// writeStatusTable prints the per-node table and the summary.
func writeStatusTable(w io.Writer, st *redlock.Status) {
	fmt.Fprintf(w, "lock %q on %d nodes, quorum %d\n\n", st.Key, len(st.Nodes), st.Quorum)
	writeStatusBody(w, st)
}

// writeStatusBody is writeStatusTable after its title line: the per-node table, the summary
// and the next token.
func writeStatusBody(w io.Writer, st *redlock.Status) {
	writeStatusRows(w, st)
	if st.HeldByQuorum() && answered(st) >= st.Quorum {
		fmt.Fprintf(w, "\n%s\n", describeHolder(st))
	} else {
		fmt.Fprintf(w, "\n%s: %s\n", stateWord(st), describeHolder(st))
	}
	writeNextToken(w, st)
}

// writeStatusRows prints the per-node table of a lock key's status.
func writeStatusRows(w io.Writer, st *redlock.Status) {
	tw := newTable(w)
	fmt.Fprintf(tw, "node\taddress\tanswered\tholder\tttl\tslot counter\tkey counter\twaiters\terror\n")
	for _, ns := range st.Nodes {
		addr := ns.Addr
		if addr == "" {
			addr = "-"
		}
		if ns.Err != nil {
			fmt.Fprintf(tw, "%d\t%s\tno\t-\t-\t-\t-\t-\t%s\n", ns.Node, addr, nodeErrText(ns.Err))
			continue
		}
		ttl := "-"
		if ns.Holder != "" {
			ttl = fmtTTL(ns.TTL)
		}
		fmt.Fprintf(tw, "%d\t%s\tyes\t%s\t%s\t%s\t%s\t%s\t\n", ns.Node, addr, shortID(ns.Holder), ttl, counterCell(ns.SlotCounter), counterCell(ns.KeyCounter), waitersCell(ns.Waiters))
	}
	_ = tw.Flush()
}

// writeNextToken prints the next-token line of a lock key's status.
func writeNextToken(w io.Writer, st *redlock.Status) {
	if st.NextTokenAtLeast != 0 {
		fmt.Fprintf(w, "next token: at least %v\n", st.NextTokenAtLeast)
	} else {
		fmt.Fprintf(w, "next token: unknown (too few nodes answered)\n")
	}
}

// statusDoc is the --json output. Its fields are documented in docs/cli.md; keep them stable.
type statusDoc struct {
	Key      string `json:"key"`
	State    string `json:"state"` // "held", "free" or "unknown"
	Quorum   int    `json:"quorum"`
	Total    int    `json:"total"`
	Answered int    `json:"answered"`
	// Holder is the full holder id found on a quorum of nodes, "" when none.
	Holder      string `json:"holder"`
	HolderNodes int    `json:"holder_nodes"`
	// TTLMillis is how long Holder keeps a quorum without renewing, 0 when not held.
	TTLMillis        int64           `json:"ttl_ms"`
	NextTokenAtLeast uint64          `json:"next_token_at_least"` // 0 when unknown
	Nodes            []nodeStatusDoc `json:"nodes"`
}

type nodeStatusDoc struct {
	Node      int    `json:"node"`
	Addr      string `json:"addr"`
	Answered  bool   `json:"answered"`
	Error     string `json:"error"`  // "" when answered
	Holder    string `json:"holder"` // "" when the key is absent
	TTLMillis int64  `json:"ttl_ms"`
	// Counter is the larger of SlotCounter, the counter of the key's hash slot (shared by
	// every key of the slot), and KeyCounter, the key's own counter: 0 when absent.
	Counter     uint64 `json:"counter"`
	SlotCounter uint64 `json:"slot_counter"`
	KeyCounter  uint64 `json:"key_counter"`
	// Waiters is the number of places in the key's waiter queue on the node (other
	// processes' Acquire calls waiting their turn), -1 when the node would not say.
	Waiters int `json:"waiters"`
}

// waitersCell is a node's waiter count in a table: "?" when the node would not say.
func waitersCell(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

// counterCell is a fence counter in a table: "-" when the node has none.
func counterCell(t redlock.Token) string {
	if t == 0 {
		return "-"
	}
	return t.String()
}

// nodeDocs is the JSON of each node's view of a lock (status --json, top --json).
func nodeDocs(st *redlock.Status) []nodeStatusDoc {
	out := make([]nodeStatusDoc, 0, len(st.Nodes))
	for _, ns := range st.Nodes {
		nd := nodeStatusDoc{Node: ns.Node, Addr: ns.Addr, Answered: ns.Err == nil, Waiters: ns.Waiters}
		if ns.Err != nil {
			nd.Error = nodeErrText(ns.Err)
		} else {
			nd.Holder, nd.TTLMillis = ns.Holder, ns.TTL.Milliseconds()
			nd.Counter, nd.SlotCounter, nd.KeyCounter = uint64(ns.Counter), uint64(ns.SlotCounter), uint64(ns.KeyCounter)
		}
		out = append(out, nd)
	}
	return out
}

// newStatusDoc is the JSON of one lock key's status.
func newStatusDoc(st *redlock.Status) statusDoc {
	return statusDoc{
		Key: st.Key, State: stateWord(st), Quorum: st.Quorum, Total: len(st.Nodes), Answered: answered(st),
		Holder: st.Holder, HolderNodes: holderNodes(st, st.Holder), TTLMillis: quorumTTL(st).Milliseconds(),
		NextTokenAtLeast: uint64(st.NextTokenAtLeast), Nodes: nodeDocs(st),
	}
}

func writeStatusJSON(w io.Writer, st *redlock.Status) error {
	doc := newStatusDoc(st)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
