package main

// Snapshots for redlock top: one refresh scans every node (top_discover.go), merges what
// the nodes found, and reads the status of each lock key found on every node.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// topWorkers bounds how many Status reads of one refresh are in flight at once; the
// library batches them into pipelines per node.
const topWorkers = 16

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

// firstFailure names the first node whose scan failed and its error, for the message of a
// single snapshot that too few nodes answered; "" when every scan answered.
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
	read := t.toRead(snap, found)
	sts, errs := t.readAll(ctx, read)
	if err := t.keep(snap, sts, errs); err != nil {
		return nil, err
	}
	return snap, nil
}

// toRead merges the nodes' scans into the snapshot's counts and returns the keys to read:
// the keys that hold a holder id on some node, then, with --all, those known only from a
// per-key fence counter, each list sorted and both cut at --limit.
func (t *topper) toRead(snap *topSnap, found []topFound) []string {
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
	return read
}

// readAll reads the status of every key, at most topWorkers at a time, and returns the
// statuses and errors in the keys' order.
func (t *topper) readAll(ctx context.Context, keys []string) ([]*redlock.Status, []error) {
	sts := make([]*redlock.Status, len(keys))
	errs := make([]error, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(topWorkers, len(keys)) {
		wg.Go(func() {
			for i := range next {
				sts[i], errs[i] = t.c.Status(ctx, keys[i])
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return sts, errs
}

// keep puts the statuses read into the snapshot, sorted by key: every one with --all, else
// those of locks present on some node. A key that is not a valid lock key is dropped from
// the count of keys found; any other error of a read is returned.
func (t *topper) keep(snap *topSnap, sts []*redlock.Status, errs []error) error {
	for i, err := range errs {
		if errors.Is(err, redlock.ErrInvalidArgument) {
			snap.found-- // not a key a lock could have, whatever it holds
			continue
		}
		if err != nil {
			return err
		}
		if t.cfg.all || present(sts[i]) {
			snap.locks = append(snap.locks, sts[i])
		} else {
			snap.hiddenFree++ // released (or expired) between the scan and the read
		}
	}
	slices.SortFunc(snap.locks, func(a, b *redlock.Status) int { return strings.Compare(a.Key, b.Key) })
	return nil
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
