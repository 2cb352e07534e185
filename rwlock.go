package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// RWPrefix starts the writer key of every read/write lock ([RWLock.Key]): an ordinary lock
// key, whose holder is the writer and whose fencing tokens are the writers' tokens.
const RWPrefix = "redlock:rw:"

// ReadersPrefix and IntentPrefix start the names of a read/write lock's readers (a sorted
// set of reader ids by expiry) and of its writer intent (the id of a writer waiting for the
// readers to leave), both in the lock name's cluster hash slot.
const (
	ReadersPrefix = "redlock:readers:"
	IntentPrefix  = "redlock:intent:"
)

// PhasePrefix starts the name of a read/write lock's reader phase key, in the lock name's
// cluster hash slot: a sorted set of the readers refused because of a writer (each marked
// waiting for a few retry delays), and, after that writer's release, the read phase, in which
// those readers go before the next writer; it ends when the last of them has come in, or
// after one retry delay (docs/design.md §3.13).
const PhasePrefix = "redlock:phase:"

// RWLock is a read/write lock: readers share it, a writer excludes readers and other writers.
// The writer holds the writer key ([RWLock.Key]) as a lock, with a fencing token that
// increases from writer to writer; each reader holds a place of its own, with its own TTL,
// in the readers set on a quorum of nodes. A node grants a reader only while no writer holds
// or waits there, and a writer only while no reader holds there (docs/design.md §3.13); a
// quorum of each intersects, so under the lock's assumptions no reader with validity left
// overlaps a writer with validity left. A writer refused because readers hold marks that it
// waits (the writer intent, a few retry delays long, renewed at each attempt), and new
// readers are refused meanwhile: a stream of readers cannot starve a writer. A writer's release
// lets the readers refused meanwhile in first (a read phase, which ends when the last of them
// has come in, or after one retry delay), so writers that follow each other cannot starve
// readers either. Writers of one Client wait in arrival order; writers of different Clients
// are not ordered among themselves.
//
// A reader's *Lock has token 0 (readers do not write: the fenced stores refuse token 0);
// Key is the writer key for both. Make one with [Client.RWLock]; it is safe for concurrent
// use. Reentrancy: a write acquire (TryAcquireWrite, AcquireWrite, DoWrite) whose context
// carries this Client's writer hold of the lock ([Lock.Context], or DoWrite's function
// context) joins it, as [Client.Acquire] joins a lock's hold: the same token, nothing sent,
// and its Release ends only the nested hold. A reader's hold is never joined, and a read
// acquire under a writer's hold is a new acquire, refused while that hold lasts.
type RWLock struct {
	c    *Client
	name string
	err  error
	set  lockKeys // the writer key and its counters
	keys rwKeys
	seq  atomic.Uint64 // names each reader's queue of waiters in this Client apart
}

type rwKeys struct{ writer, readers, intent, phase string }

// writerArgs are the writer gate's arguments (lua/rw_gate.lua).
type writerArgs struct {
	keys         rwKeys
	intentMillis int64
	client       string // the Client's id: the intent's value
}

// rwIntentTTL is how long a writer's intent, and the mark that readers wait, last without
// being renewed: 4 retry delays, at least 100 ms (docs/design.md §3.13).
func rwIntentTTL(retryDelay time.Duration) time.Duration {
	return max(4*retryDelay, 100*time.Millisecond)
}

// readPhaseMax is the longest the read phase after a writer's release lasts: one retry delay,
// at least 2 ms (the nodes count it in whole milliseconds). The phase ends sooner, when the last of the readers marked waiting on that node has come
// in (lua/read_acquire.lua), so its length follows how fast the readers arrive. A reader that
// gives up removes its marks (RWLock.unmark); the bound limits what one that died while marked
// costs each writer's release during its mark's life: one retry delay (docs/design.md §3.13).
func readPhaseMax(retryDelay time.Duration) time.Duration {
	return max(retryDelay, 2*time.Millisecond)
}

// RWLock returns the read/write lock named name. It sends nothing; a bad name (the rules of a
// lock key) is returned, as an error matching ErrInvalidArgument, by every call. Safe for
// concurrent use.
func (c *Client) RWLock(name string) *RWLock {
	rw := &RWLock{c: c, name: name}
	rw.err = rw.build()
	return rw
}

func (rw *RWLock) build() error {
	if err := checkName("read/write lock", rw.name); err != nil {
		return err
	}
	var err error
	for _, k := range []struct {
		dst    *string
		prefix string
	}{{&rw.keys.writer, RWPrefix}, {&rw.keys.readers, ReadersPrefix}, {&rw.keys.intent, IntentPrefix}, {&rw.keys.phase, PhasePrefix}} {
		if *k.dst, err = slotKey(k.prefix, rw.name, true, namePrefixes...); err != nil {
			return err
		}
	}
	if err := checkDerived("read/write lock", rw.name, rw.keys.writer, rw.keys.readers, rw.keys.intent, rw.keys.phase); err != nil {
		return err
	}
	rw.set, err = newDerivedLockKeys(rw.keys.writer)
	return err
}

// Name returns the lock's name.
func (rw *RWLock) Name() string { return rw.name }

// Key returns the writer key ("" for an invalid lock): [Client.Status] on it shows the writer.
func (rw *RWLock) Key() string {
	if rw.err != nil {
		return ""
	}
	return rw.keys.writer
}

// ReadersKey returns the key of the readers' places on each node, a sorted set of holder
// ids scored by when each place expires ("" for an invalid lock); [RWLock.Status] reads it.
func (rw *RWLock) ReadersKey() string {
	if rw.err != nil {
		return ""
	}
	return rw.keys.readers
}

func (rw *RWLock) args(ctx context.Context, ttl time.Duration) (time.Duration, error) {
	if ctx == nil {
		return 0, invalidf("context is nil")
	}
	if rw.err != nil {
		return 0, rw.err
	}
	return rw.c.checkKeyTTL(ttl)
}

// TryAcquireWrite makes one attempt to take the lock for writing for ttl, as
// [Client.TryAcquire] does, with the errors of TryAcquire; it is also refused (ErrNotAcquired)
// while readers hold a quorum, and then marks on those nodes that a writer waits. The Lock's
// token increases from writer to writer. Safe for concurrent use.
func (rw *RWLock) TryAcquireWrite(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := rw.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	c := rw.c
	return observed(c, ctx, rw.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		if l := c.joinWriter(ctx, rw); l != nil {
			return l, acquireEnd(l, joined(nil), 0, nil), nil
		}
		l, r, err := rw.c.attemptHeld(ctx, ttl, rw.writeAttempt)
		return l, acquireEnd(l, r, 1, err), err
	})
}

// AcquireWrite takes the lock for writing, retrying as [Client.Acquire] does until it
// succeeds, the retry limit is reached or ctx ends, with Acquire's errors. This Client's
// writers of the lock wait in arrival order; each release of a reader or writer wakes them.
// Safe for concurrent use.
func (rw *RWLock) AcquireWrite(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := rw.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return observed(rw.c, ctx, rw.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		if l := rw.c.joinWriter(ctx, rw); l != nil {
			return l, acquireEnd(l, joined(nil), 0, nil), nil
		}
		on := lockKeys{keys: []string{rw.keys.writer, rw.keys.readers}}
		l, r, n, err := rw.retrying(ctx, ttl, "\x00rw-writer\x00"+rw.keys.writer, on, false, rw.writeAttempt)
		return l, acquireEnd(l, r, n, err), err
	})
}

// TryAcquireRead makes one attempt to take the lock for reading for ttl: a place in the
// readers on every node, in parallel, granted once a quorum agreed with validity left
// (ttl − elapsed − drift > 0, as for a lock), undone on every node otherwise. Refused
// (ErrNotAcquired) while a writer holds or waits on too many nodes. The Lock's token is 0.
// Unlike AcquireRead it leaves no mark that it waits, so no read phase opens for it: a reader
// that must not be starved by looping writers uses AcquireRead. Errors and arguments as
// [Client.TryAcquire]'s. Safe for concurrent use.
func (rw *RWLock) TryAcquireRead(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := rw.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return observed(rw.c, ctx, rw.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		l, r, err := rw.c.attemptHeld(ctx, ttl, func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return rw.readAttempt(ctx, ttl, nil) // it will not come back: no mark
		})
		return l, acquireEnd(l, r, 1, err), err
	})
}

// AcquireRead takes the lock for reading, retrying until it succeeds, the retry limit is
// reached or ctx ends, with Acquire's errors. Readers do not wait for each other; a release
// of the writer wakes them. A refused attempt marks the reader waiting on the nodes that
// refused it, so that the writer's release opens a read phase for it; once it holds, its marks
// go from the nodes that did not grant it, and when it gives up (ctx ends, the retry limit, an
// error) from every node. Safe for concurrent use.
func (rw *RWLock) AcquireRead(ctx context.Context, ttl time.Duration) (*Lock, error) {
	ttl, err := rw.args(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return observed(rw.c, ctx, rw.op(OpAcquire, ttl), func(ctx context.Context) (*Lock, End, error) {
		key := "\x00rw-reader\x00" + strconv.FormatUint(rw.seq.Add(1), 10) + "\x00" + rw.keys.writer
		w := &readWaiter{id: newHolderID()} // its mark on the nodes, the same at every attempt
		l, r, n, err := rw.retrying(ctx, ttl, key, rw.set, true, func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
			return rw.readAttempt(ctx, ttl, w)
		})
		if l == nil {
			rw.unmark(w, nil) // it gave up: no read phase is to wait for it
		}
		return l, acquireEnd(l, r, n, err), err
	})
}

// joinWriter is the writer's reentrancy: the joined Lock when ctx carries this Client's
// writer hold of rw that is still held and valid (reentrant.go), nil otherwise. A reader's
// hold is never joined, and a writer's does not let a reader in: only a write acquire joins.
func (c *Client) joinWriter(ctx context.Context, rw *RWLock) *Lock {
	l, err := c.join(ctx, rw.set)
	if err != nil || l == nil || l.outer.writer == nil {
		return nil // rw.set is one key: never partly held
	}
	return l
}

// DoRead takes the lock for reading as AcquireRead does and runs fn under it, renewing it and
// cancelling fn's context before it can lapse, as [Client.Do] does; DoWrite the same for
// writing. Errors as Do's.
func (rw *RWLock) DoRead(ctx context.Context, ttl time.Duration, fn func(ctx context.Context, l *Lock) error) error {
	return rw.do(ctx, ttl, fn, rw.AcquireRead)
}

// DoWrite takes the lock for writing as AcquireWrite does and runs fn under it, as
// [Client.Do] does: send l.Token with every write.
func (rw *RWLock) DoWrite(ctx context.Context, ttl time.Duration, fn func(ctx context.Context, l *Lock) error) error {
	return rw.do(ctx, ttl, fn, rw.AcquireWrite)
}

func (rw *RWLock) do(ctx context.Context, ttl time.Duration, fn func(ctx context.Context, l *Lock) error,
	acquire func(context.Context, time.Duration) (*Lock, error)) error {
	if fn == nil {
		return invalidf("fn is nil")
	}
	ttl, err := rw.args(ctx, ttl)
	if err != nil {
		return err
	}
	if err := rw.c.checkDoTTL(ttl); err != nil {
		return err
	}
	return rw.c.doWith(ctx, rw.op(OpDo, ttl), func(ctx context.Context) (*Lock, error) { return acquire(ctx, ttl) }, fn)
}

func (rw *RWLock) op(kind OpKind, ttl time.Duration) Op {
	return Op{Kind: kind, Keys: rw.set.keys, TTL: ttl, RWLock: rw.name}
}

type rwAttempt func(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error)

// retrying is the lock's retry loop with attempt, waiting in this Client's queue named key
// for the releases announced on the channels of on's keys: a writer's release (the writer
// key's channel) for readers; a writer's or a reader's (the readers' channel) for writers.
// Readers are not woken by each other's releases, which cannot let them in.
func (rw *RWLock) retrying(ctx context.Context, ttl time.Duration, key string, on lockKeys, reader bool, attempt rwAttempt) (*Lock, attemptResult, int, error) {
	return rw.c.retryTurn(ctx, ttl, &turn{c: rw.c, set: on, key: key, attempt: attempt, eager: true, shares: reader})
}

// writeAttempt is one writer attempt: the lock's attempt on the writer key, behind the
// writer gate.
func (rw *RWLock) writeAttempt(ctx context.Context, ttl time.Duration) (*Lock, attemptResult, error) {
	w := &writerArgs{keys: rw.keys, intentMillis: rwIntentTTL(rw.c.cfg.retryDelay).Milliseconds(), client: rw.c.id}
	a := rw.c.newAttempt(ctx, rw.set, newHolderID(), ttl, nil, w)
	a.send()
	return a.run(ctx)
}

// discardSink drops the events of calls whose outcome nobody waits for (a reader's undo).
type discardSink struct{}

func (discardSink) Deliver(transport.Event) {}

// readWaiter is one AcquireRead call's mark on the nodes (a waiting reader, lua/read_acquire.lua):
// its waiter id, and the calls of its last attempt, after which its marks are removed.
type readWaiter struct {
	id   string
	last []*transport.Call
}

// unmark removes w's marks, on each node after its last attempt's call there, from the nodes
// that did not grant that attempt (granted nil: from every node). A reader that holds or that
// gave up waits no longer, and no read phase is to wait for it. Nothing waits for the calls:
// a node that misses one drops the mark when it expires.
func (rw *RWLock) unmark(w *readWaiter, granted []bool) {
	if w == nil || w.last == nil {
		return // no attempt reached the nodes
	}
	cmd := newScriptCall(readReleaseScript, []string{rw.keys.readers, rw.keys.phase}, "", "", w.id)
	for i := range rw.c.nodes {
		if granted == nil || !granted[i] {
			cl := cmd.newCall(0, discardSink{})
			cl.Keep = true
			rw.c.sendAfterTo(i, w.last[i], cl)
		}
	}
}

// readAttempt is one reader attempt: read_acquire.lua on every node, decided at a quorum of
// places granted with validity left, or as soon as a quorum became impossible; undone on
// every node when it fails. A node that refuses marks w (if not nil: TryAcquireRead leaves no
// mark) as a reader waiting for the read phase.
func (rw *RWLock) readAttempt(ctx context.Context, ttl time.Duration, w *readWaiter) (*Lock, attemptResult, error) {
	c := rw.c
	waiter := ""
	if w != nil {
		waiter = w.id
	}
	id, n := newHolderID(), len(c.nodes)
	start := c.cfg.clock.Now()
	validityEnd := start.Add(ttl - Drift(ttl, c.cfg.driftFactor))
	cmd := newScriptCall(readAcquireScript, []string{rw.keys.writer, rw.keys.readers, rw.keys.intent, rw.keys.phase},
		id, c.keyTTLMillis(ttl), rwIntentTTL(c.cfg.retryDelay).Milliseconds(), waiter)
	cmd.patience = patienceFor(ttl)
	events := make(chan transport.Event, 2*n)
	calls := make([]*transport.Call, n)
	for i := range c.nodes {
		calls[i] = cmd.newCall(0, chanSink(events))
		c.sendTo(i, calls[i])
	}
	if w != nil {
		w.last = calls
	}
	granted, refused, failed := 0, 0, 0
	grantedAt := make([]bool, n)
	var left int64 // the most milliseconds left that a refusing node reported
	answered, nodeErrs := make([]bool, n), make([]error, n)
	timer := time.NewTimer(time.Until(validityEnd))
	defer timer.Stop()
	var cause error
	for granted < c.quorum && refused+failed <= n-c.quorum && cause == nil {
		select {
		case ev := <-events:
			if ev.Out == transport.Late || answered[ev.Node] {
				continue
			}
			answered[ev.Node] = true
			switch {
			case ev.Err != nil:
				failed++
				nodeErrs[ev.Node] = c.nodeErr(ev.Node, ev.Err)
			case ev.Val == 1:
				granted++
				grantedAt[ev.Node] = true
			default:
				refused++
				left = max(left, -ev.Val)
				nodeErrs[ev.Node] = c.nodeErr(ev.Node, errWriterHolds)
			}
		case <-timer.C:
			cause = errValidityExpired
		case <-ctx.Done():
			cause = ctx.Err()
		}
	}
	now := c.cfg.clock.Now()
	if granted >= c.quorum && cause == nil {
		if Validity(ttl, start, now, c.cfg.driftFactor) > 0 {
			l := &Lock{c: c, set: rw.set, key: rw.keys.writer, id: id, ttl: ttl, until: validityEnd, last: calls, granted: now, reader: &rw.keys}
			l.tokens = l.one[:]
			// We wait no longer: our marks go from the nodes that did not grant us, or not
			// yet, so that no read phase waits for us.
			rw.unmark(w, grantedAt)
			c.remember(l)
			return l, attemptResult{kind: attemptWon}, nil
		}
		cause = errValidityExpired
	}
	// Undo everywhere, each after that node's acquire call, whatever it answered.
	undo := newScriptCall(readReleaseScript, []string{rw.keys.readers}, id)
	for i := range c.nodes {
		cl := undo.newCall(0, discardSink{})
		cl.Keep = true
		c.sendAfterTo(i, calls[i], cl)
	}
	for i := range nodeErrs {
		if !answered[i] && nodeErrs[i] == nil {
			nodeErrs[i] = c.nodeErr(i, errAbandoned)
		}
	}
	qe := &QuorumError{Op: "acquire", Key: rw.keys.writer, Quorum: c.quorum, Agreed: granted, Total: n, Cause: cause,
		Nodes: collectNodeErrors(nodeErrs), sentinel: ErrNotAcquired}
	r := attemptResult{kind: attemptOverloaded, refused: refused > 0, expired: cause == errValidityExpired, left: left, detail: qe}
	if refused > 0 {
		r.kind = attemptContended
	}
	return nil, r, qe
}

// errWriterHolds is a node's refusal of a reader: a writer holds or waits there.
var errWriterHolds = fmt.Errorf("a writer holds or waits")

// ParseRWKey reports whether key is a read/write lock's writer key ([RWLock.Key]) and returns
// the lock's name, for tools that list lock keys (redlock top).
func ParseRWKey(key string) (name string, ok bool) {
	rest, found := strings.CutPrefix(key, RWPrefix)
	if !found {
		return "", false
	}
	return nameOf(RWPrefix, rest, key)
}

// ParseReadersKey reports whether key is a read/write lock's readers key
// ([RWLock.ReadersKey]) and returns the lock's name, for tools that find read/write locks
// by their readers (redlock top).
func ParseReadersKey(key string) (name string, ok bool) {
	rest, found := strings.CutPrefix(key, ReadersPrefix)
	if !found {
		return "", false
	}
	return nameOf(ReadersPrefix, rest, key)
}
