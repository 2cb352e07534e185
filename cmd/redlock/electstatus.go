package main

// redlock status --election NAME: an election's key, as status shows a lock key, and its
// leader as Election.Leader reports it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/quorumlock/redlock"
)

// electionStatus reads and prints the election name: its key on every node and its leader,
// both read in parallel. Like a lock's status, it fails (exit 1) when fewer than a quorum
// of nodes answered either read; the table or JSON is printed first.
func electionStatus(ctx context.Context, e *env, c *redlock.Client, name string, asJSON bool) error {
	el := c.Election(name)
	if el.Key() == "" { // a bad name: Leader returns why, without sending anything
		_, err := el.Leader(ctx)
		return usageErrorf("status: bad election: %s", bare(err))
	}
	var st *redlock.Status
	var leader redlock.LeaderInfo
	var err, lerr error
	var wg sync.WaitGroup
	wg.Go(func() { st, err = c.Status(ctx, el.Key()) })
	wg.Go(func() { leader, lerr = el.Leader(ctx) })
	wg.Wait()
	switch {
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("status: bad election: %s", bare(err))
	case err != nil:
		return fmt.Errorf("status: %s", bare(err))
	case lerr != nil && !errors.Is(lerr, redlock.ErrNoLeader) && ctx.Err() != nil:
		return fmt.Errorf("status: %s", bare(lerr)) // the context ended: nothing to show
	}
	ev := electionView{name: name, st: st, leader: leader, err: lerr}
	if asJSON {
		if err := writeElectionJSON(e.stdout, ev); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	} else {
		writeElectionTable(e.stdout, ev)
	}
	if err := tooFewAnswered(st, "election "+strconv.Quote(name)); err != nil {
		return err
	}
	if ev.unknown() {
		return fmt.Errorf("status: election %q: the leader is unknown: %s", name, bare(lerr))
	}
	return nil
}

// electionView is what status --election shows: the election's key and its leader, or the
// leader read's error (ErrNoLeader, or too few nodes answered).
type electionView struct {
	name   string
	st     *redlock.Status
	leader redlock.LeaderInfo
	err    error
}

// unknown reports whether the leader read could not tell (not even that there is none).
func (v electionView) unknown() bool { return v.err != nil && !errors.Is(v.err, redlock.ErrNoLeader) }

// leaderLine is the leader's line in the table.
func (v electionView) leaderLine() string {
	switch {
	case v.err == nil:
		return fmt.Sprintf("leader: term %v, value %s, holder %s", v.leader.Term, strconv.Quote(v.leader.Value), shortID(v.leader.ID))
	case v.unknown():
		return "leader: unknown: " + bare(v.err)
	}
	return "leader: none (no holder of the election's key has a quorum of nodes with its leader record)"
}

// writeElectionTable prints the election's key as status prints a lock key, then the leader.
func writeElectionTable(w io.Writer, v electionView) {
	fmt.Fprintf(w, "election %q, key %q, on %d nodes, quorum %d\n\n", v.name, v.st.Key, len(v.st.Nodes), v.st.Quorum)
	writeStatusBody(w, v.st)
	fmt.Fprintln(w, v.leaderLine())
}

// electionDoc is status --election --json. Its fields are documented in docs/cli.md.
type electionDoc struct {
	Election string `json:"election"`
	// Leader, Term, Value and ID are as in elect --observe --json: whether a leader is
	// known, its term (0 without one), its value and its holder id.
	Leader bool   `json:"leader"`
	Term   uint64 `json:"term"`
	Value  string `json:"value"`
	ID     string `json:"id"`
	// LeaderKnown is false when too few nodes answered the leader read to tell; LeaderError
	// then says why ("" otherwise).
	LeaderKnown bool      `json:"leader_known"`
	LeaderError string    `json:"leader_error"`
	Lock        statusDoc `json:"lock"` // the election's key as status --json shows a lock key
}

func writeElectionJSON(w io.Writer, v electionView) error {
	doc := electionDoc{Election: v.name, LeaderKnown: !v.unknown(), Lock: newStatusDoc(v.st)}
	if v.err == nil {
		doc.Leader, doc.Term, doc.Value, doc.ID = true, uint64(v.leader.Term), v.leader.Value, v.leader.ID
	} else if v.unknown() {
		doc.LeaderError = bare(v.err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
