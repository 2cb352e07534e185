package main

// redlock status --rwlock NAME: a read/write lock's writer key, as status shows a lock key,
// and its readers and writer intent per node (the library's RWLock.Status).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/quorumlock/redlock"
)

// rwShownIDs is how many reader ids a cell or a summary line shows before "+N more".
const rwShownIDs = 4

// rwLockStatus reads and prints the read/write lock name. Like a lock's status, it fails
// (exit 1) when fewer than a quorum of nodes answered; the table or JSON is printed first.
func rwLockStatus(ctx context.Context, e *env, c *redlock.Client, name string, asJSON bool) error {
	st, err := c.RWLock(name).Status(ctx)
	switch {
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("status: bad read/write lock: %s", bare(err))
	case err != nil:
		return fmt.Errorf("status: %s", bare(err))
	}
	probeFailed(st.Writer)
	if asJSON {
		if err := writeRWJSON(e.stdout, st); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	} else {
		writeRWTable(e.stdout, st)
	}
	return tooFewAnswered(st.Writer, "read/write lock "+strconv.Quote(name))
}

// rwState is the one-word state of a read/write lock: "write" (a writer holds a quorum),
// "read" (some reader has an unexpired place on a quorum), "free", or "unknown" (fewer than
// a quorum of nodes answered, or, with no reader found, reported their readers).
func rwState(st *redlock.RWStatus) string {
	switch {
	case answered(st.Writer) < st.Quorum:
		return "unknown"
	case st.HeldForWriting():
		return "write"
	case st.HeldForReading():
		return "read"
	case st.ReadersAnswered < st.Quorum:
		return "unknown"
	}
	return "free"
}

// idList shows ids in short form, sep between them, at most rwShownIDs and then how many more.
func idList(ids []string, sep string) string {
	shown := make([]string, 0, min(len(ids), rwShownIDs))
	for _, id := range ids[:min(len(ids), rwShownIDs)] {
		shown = append(shown, shortID(id))
	}
	out := strings.Join(shown, sep)
	if more := len(ids) - len(shown); more > 0 {
		out += fmt.Sprintf("%s+%d more", sep, more)
	}
	return out
}

// describeRW is the summary line of a read/write lock's status.
func describeRW(st *redlock.RWStatus) string {
	n := len(st.Nodes)
	switch rwState(st) {
	case "write":
		return fmt.Sprintf("held for writing by %s on %d of %d nodes", shortID(st.Writer.Holder), holderNodes(st.Writer, st.Writer.Holder), n)
	case "read":
		who, each := fmt.Sprintf("%d readers", len(st.Readers)), "each has"
		if len(st.Readers) == 1 {
			who, each = "1 reader", "it has"
		}
		return fmt.Sprintf("held for reading by %s (%s): %s an unexpired place on at least a quorum (%d) of the %d nodes",
			who, idList(st.Readers, ", "), each, st.Quorum, n)
	case "free":
		return fmt.Sprintf("free: no writer, and no reader with an unexpired place on a quorum (%d) of the %d nodes", st.Quorum, n)
	}
	if k := answered(st.Writer); k < st.Quorum {
		return fmt.Sprintf("unknown: only %d of %d nodes answered, quorum is %d", k, n, st.Quorum)
	}
	return fmt.Sprintf("unknown: only %d of %d nodes reported their readers (the others' users may not run ZRANGE), quorum is %d", st.ReadersAnswered, n, st.Quorum)
}

// rwNotes are the lines after the summary: readers with places on fewer than a quorum of
// nodes, and the writer intents.
func rwNotes(st *redlock.RWStatus) []string {
	var notes []string
	held := map[string]bool{}
	for _, id := range st.Readers {
		held[id] = true
	}
	partial := map[string]bool{}
	intents := map[string]int{}
	for _, ns := range st.Nodes {
		for _, p := range ns.Places {
			if !held[p.ID] {
				partial[p.ID] = true
			}
		}
		if ns.Err == nil && ns.Intent != "" {
			intents[ns.Intent]++
		}
	}
	if len(partial) > 0 {
		notes = append(notes, fmt.Sprintf("%d more readers have unexpired places on fewer than a quorum of nodes (an acquire under way or being undone, or places about to expire)", len(partial)))
	}
	for _, id := range slices.Sorted(maps.Keys(intents)) {
		notes = append(notes, fmt.Sprintf("a writer waits: the intent of client %s is on %d of %d nodes, which refuse new readers outside a read phase until it expires", shortID(id), intents[id], len(st.Nodes)))
	}
	return notes
}

// writeRWTable prints the writer key as status prints a lock key, then one row per node of
// its readers and writer intent, and the summary.
func writeRWTable(w io.Writer, st *redlock.RWStatus) {
	ws := st.Writer
	fmt.Fprintf(w, "read/write lock %q, writer key %q, on %d nodes, quorum %d\n\n", st.Name, ws.Key, len(ws.Nodes), ws.Quorum)
	writeStatusRows(w, ws)
	fmt.Fprintf(w, "\nwriter: %s\n", describeHolder(ws))
	writeNextToken(w, ws)
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintf(tw, "node\treaders\treader ids\tintent\tintent ttl\tphase\n")
	for _, ns := range st.Nodes {
		if ns.Err != nil {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\n", ns.Node) // its error is in the table above
			continue
		}
		ids := "?"
		if ns.Readers >= 0 {
			all := make([]string, len(ns.Places))
			for i, p := range ns.Places {
				all[i] = p.ID
			}
			ids = cmp.Or(idList(all, " "), "-")
		}
		ttl := "-"
		if ns.Intent != "" {
			ttl = fmtTTL(ns.IntentTTL)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", ns.Node, waitersCell(ns.Readers), ids, shortID(ns.Intent), ttl, phaseCell(ns))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\n", describeRW(st))
	for _, n := range rwNotes(st) {
		fmt.Fprintln(w, n)
	}
}

// phaseCell is a node's reader phase: "readers wait", "read phase" with its time left, or "-".
func phaseCell(ns redlock.RWNodeStatus) string {
	switch ns.Phase {
	case "w":
		return fmt.Sprintf("readers wait (%d)", ns.Waiting)
	case "r":
		return fmt.Sprintf("read phase %s (%d to come)", fmtTTL(ns.PhaseTTL), ns.Waiting)
	}
	return "-"
}

// rwDoc is status --rwlock --json. Its fields are documented in docs/cli.md.
type rwDoc struct {
	RWLock string `json:"rwlock"`
	State  string `json:"state"` // "write", "read", "free" or "unknown" (rwState)
	Quorum int    `json:"quorum"`
	Total  int    `json:"total"`
	// Readers are the full ids of the readers with an unexpired place on a quorum, sorted.
	Readers         []string    `json:"readers"`
	ReadersAnswered int         `json:"readers_answered"`
	Writer          statusDoc   `json:"writer"` // the writer key as status --json shows a lock key
	Nodes           []rwNodeDoc `json:"nodes"`
}

type rwNodeDoc struct {
	Node     int    `json:"node"`
	Addr     string `json:"addr"`
	Answered bool   `json:"answered"`
	Error    string `json:"error"`   // "" when answered
	Readers  int    `json:"readers"` // unexpired places, -1 when the node would not say
	// Places are the readers' places, soonest to expire first (at most 1000).
	Places []placeDoc `json:"places"`
	// Intent is a waiting writer's Client id, "" when none; IntentTTLMillis its remaining time.
	Intent          string `json:"intent"`
	IntentTTLMillis int64  `json:"intent_ttl_ms"`
	// Phase is the reader phase: "w" readers wait, "r" a read phase, "" neither; PhaseTTLMillis
	// its remaining time; Waiting the readers marked waiting (in a read phase, still to come).
	Phase          string `json:"phase"`
	PhaseTTLMillis int64  `json:"phase_ttl_ms"`
	Waiting        int    `json:"waiting"`
}

type placeDoc struct {
	ID        string `json:"id"`
	TTLMillis int64  `json:"ttl_ms"`
}

func writeRWJSON(w io.Writer, st *redlock.RWStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(newRWDoc(st))
}

// newRWDoc is st as status --rwlock --json shows it (and top --json, in rwlocks[]).
func newRWDoc(st *redlock.RWStatus) rwDoc {
	doc := rwDoc{RWLock: st.Name, State: rwState(st), Quorum: st.Quorum, Total: len(st.Nodes), Readers: st.Readers,
		ReadersAnswered: st.ReadersAnswered, Writer: newStatusDoc(st.Writer), Nodes: make([]rwNodeDoc, 0, len(st.Nodes))}
	if doc.Readers == nil {
		doc.Readers = []string{}
	}
	for _, ns := range st.Nodes {
		nd := rwNodeDoc{Node: ns.Node, Addr: ns.Addr, Answered: ns.Err == nil, Readers: ns.Readers, Places: []placeDoc{},
			Intent: ns.Intent, IntentTTLMillis: ns.IntentTTL.Milliseconds(), Phase: ns.Phase, PhaseTTLMillis: ns.PhaseTTL.Milliseconds(), Waiting: ns.Waiting}
		if ns.Err != nil {
			nd.Error = nodeErrText(ns.Err)
		}
		for _, p := range ns.Places {
			nd.Places = append(nd.Places, placeDoc{ID: p.ID, TTLMillis: p.TTL.Milliseconds()})
		}
		doc.Nodes = append(doc.Nodes, nd)
	}
	return doc
}
