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
	err        error // nil when the scan answered
	examined   int   // names returned by SCAN: string keys, then readers sets
	truncated  bool  // the scan stopped at --limit with names left
	cutReaders bool  // ... in its readers sets (the string keys were all scanned)
}

// topSnap is one refresh.
type topSnap struct {
	at         time.Time
	quorum     int
	nodes      []topNode
	answered   int               // nodes whose scan answered
	found      int               // distinct lock keys found, after --match
	truncated  bool              // a node's scan or the list of keys stopped at --limit
	cutScans   int               // nodes whose scan stopped at --limit in their string keys
	cutRWScans int               // nodes whose scan stopped at --limit in their readers sets
	cutList    bool              // more keys to read than --limit
	cutRWList  bool              // more read/write locks to read than --limit
	locks      []*redlock.Status // the locks shown, by key
	hiddenFree int               // free locks found but not shown (without --all)
	// rws are the read/write locks shown by their readers, by name: those found by a readers
	// set on some node whose read shows a reader on some node (with --all, every one found).
	rws      []*redlock.RWStatus
	foundRW  int // distinct read/write locks found by their readers sets
	hiddenRW int // of those, the ones no node says readers hold (shown with --all)
}

// probeFailures runs the wrong-scheme probes (probeFailures, schemeHint) of the nodes whose
// scan failed, before the snapshot is printed; each address is probed once per run, so a live
// view's later snapshots reuse what was found.
func (s *topSnap) probeFailures(addrs []string) {
	errs := make([]error, len(s.nodes))
	for i, n := range s.nodes {
		errs[i] = n.err
	}
	probeFailures(addrs, errs)
}

// firstFailure names the first node whose scan failed and its error, for the message of a
// single snapshot that too few nodes answered, with what withNodeHint adds for its address
// (addrs, by node); "" when every scan answered.
func (s *topSnap) firstFailure(addrs []string) string {
	for i, n := range s.nodes {
		if n.err != nil {
			return fmt.Sprintf("; node %d (%s): %s", i, addrs[i], oneLine(withNodeHint(addrs[i], n.err.Error())))
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
	names := t.rwToRead(snap, found)
	rws, errs := t.readRWs(ctx, names)
	if err := t.keepRWs(snap, rws, errs); err != nil {
		return nil, err
	}
	return snap, nil
}

// rwToRead returns the names of the read/write locks whose readers sets the nodes' scans
// found, sorted, at most --limit of them (a longer list is cut, as the lock keys' is).
func (t *topper) rwToRead(snap *topSnap, found []topFound) []string {
	seen := map[string]bool{}
	for _, f := range found {
		for _, name := range f.readers {
			seen[name] = true
		}
	}
	names := slices.Sorted(maps.Keys(seen))
	snap.foundRW = len(names)
	if len(names) > t.cfg.limit {
		names, snap.cutRWList, snap.truncated = names[:t.cfg.limit], true, true
	}
	return names
}

// readRWs reads each read/write lock's status (RWLock.Status), at most topWorkers at a time,
// in the names' order.
func (t *topper) readRWs(ctx context.Context, names []string) ([]*redlock.RWStatus, []error) {
	return readEach(names, func(name string) (*redlock.RWStatus, error) { return t.c.RWLock(name).Status(ctx) })
}

// keepRWs puts the read/write locks read into the snapshot: every one with --all, else those
// that some node says readers hold. A name the library refuses is dropped from the count.
func (t *topper) keepRWs(snap *topSnap, rws []*redlock.RWStatus, errs []error) error {
	for i, err := range errs {
		if errors.Is(err, redlock.ErrInvalidArgument) {
			snap.foundRW--
			continue
		}
		if err != nil {
			return err
		}
		if t.cfg.all || readersOnSomeNode(rws[i]) {
			snap.rws = append(snap.rws, rws[i])
		} else {
			snap.hiddenRW++ // its places expired, or it was released between the scan and the read
		}
	}
	return nil
}

// readersOnSomeNode reports whether some node that answered counts a reader.
func readersOnSomeNode(st *redlock.RWStatus) bool {
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Readers > 0 {
			return true
		}
	}
	return false
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
		switch {
		case snap.nodes[i].cutReaders:
			snap.cutRWScans++
		case snap.nodes[i].truncated:
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
	snap.truncated = snap.cutScans > 0 || snap.cutRWScans > 0 || snap.cutList
	return read
}

// readAll reads the status of every key, at most topWorkers at a time, and returns the
// statuses and errors in the keys' order.
func (t *topper) readAll(ctx context.Context, keys []string) ([]*redlock.Status, []error) {
	return readEach(keys, func(k string) (*redlock.Status, error) { return t.c.Status(ctx, k) })
}

// readEach calls read on every item, at most topWorkers at a time (the library batches
// their calls into pipelines per node), and returns the results in the items' order.
func readEach[T any](items []string, read func(string) (T, error)) ([]T, []error) {
	out := make([]T, len(items))
	errs := make([]error, len(items))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(topWorkers, len(items)) {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = read(items[i])
			}
		})
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errs
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
