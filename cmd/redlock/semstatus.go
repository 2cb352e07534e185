package main

// redlock status --permits N NAME: a semaphore's permits, one row each.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/quorumlock/redlock"
)

// semaphoreStatus reads and prints the permits of semaphore name; like a lock's status, it
// fails (exit 1) when a quorum of nodes did not answer for some permit.
func semaphoreStatus(ctx context.Context, e *env, c *redlock.Client, name string, permits int, asJSON bool) error {
	st, err := c.Semaphore(name, permits).Status(ctx)
	switch {
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("status: bad semaphore: %s", bare(err))
	case err != nil:
		return fmt.Errorf("status: %s", bare(err))
	}
	for _, p := range st.Permit {
		probeFailed(p) // a permit's failed nodes in parallel; an address probed for an earlier permit is not probed again
	}
	if asJSON {
		if err := writeSemaphoreJSON(e.stdout, st); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	} else {
		writeSemaphoreTable(e.stdout, st)
	}
	for i, p := range st.Permit {
		if err := tooFewAnswered(p, fmt.Sprintf("permit %d of semaphore %q", i, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeSemaphoreTable prints one row per permit and how many are held.
func writeSemaphoreTable(w io.Writer, st *redlock.SemaphoreStatus) {
	q := 0
	if len(st.Permit) > 0 {
		q = st.Permit[0].Quorum
	}
	fmt.Fprintf(w, "semaphore %q, %d permits, quorum %d\n\n", st.Name, st.Permits, q)
	tw := newTable(w)
	fmt.Fprintf(tw, "permit\tkey\tstate\tholder\ton\tttl\tnext token\n")
	for i, p := range st.Permit {
		ttl := "-"
		if p.HeldByQuorum() {
			ttl = fmtTTL(quorumTTL(p))
		}
		next := "?"
		if p.NextTokenAtLeast != 0 {
			next = "≥ " + p.NextTokenAtLeast.String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", i, displayKey(p.Key), stateWord(p), shortID(p.Holder), holderNodes(p, p.Holder), len(p.Nodes), ttl, next)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d of %d permits held\n", st.Held, st.Permits)
	for _, f := range permitFailures(st) {
		fmt.Fprintln(w, f)
	}
}

// permitFailures names each node that did not answer for some permit, once, with its first
// failure (as the lock table's error column shows it): the rows above count such a node
// out of "on" without saying why.
func permitFailures(st *redlock.SemaphoreStatus) []string {
	var out []string
	seen := map[int]bool{}
	for i, p := range st.Permit {
		for _, ns := range p.Nodes {
			if ns.Err != nil && !seen[ns.Node] {
				seen[ns.Node] = true
				out = append(out, fmt.Sprintf("node %d (%s) did not answer for permit %d: %s", ns.Node, ns.Addr, i, nodeErrText(ns.Err)))
			}
		}
	}
	return out
}

// semaphoreDoc is status --permits --json. Its fields are documented in docs/cli.md.
type semaphoreDoc struct {
	Semaphore string      `json:"semaphore"`
	Permits   int         `json:"permits"`
	Held      int         `json:"held"`
	Permit    []statusDoc `json:"permit"` // each permit key as status --json shows a lock key
}

func writeSemaphoreJSON(w io.Writer, st *redlock.SemaphoreStatus) error {
	doc := semaphoreDoc{Semaphore: st.Name, Permits: st.Permits, Held: st.Held, Permit: make([]statusDoc, 0, len(st.Permit))}
	for _, p := range st.Permit {
		doc.Permit = append(doc.Permit, newStatusDoc(p))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
