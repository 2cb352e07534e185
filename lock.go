package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// Lock is a lock held on a quorum of nodes. It is safe for concurrent use. The lock is yours
// until [Lock.Until] at the latest; after that, or after a failed [Lock.Extend], another
// holder may acquire it, and only the fencing token ([Lock.Token]) protects your writes.
type Lock struct {
	c       *Client
	set     lockKeys // its key (or keys, for a MultiLock) and their fence counters
	key     string   // set.keys[0]
	id      string
	ttl     time.Duration // the TTL of the acquire, renewed by Do
	token   Token         // tokens[0]
	tokens  []Token       // per key of set
	outer   *Lock         // a joined hold (reentrant.go): the hold it joined; nil otherwise
	granted time.Time     // when the acquire returned, for the observer's hold time
	one     [1]Token      // tokens of a single-key lock, without an allocation of their own
	reader  *rwKeys       // a read/write lock's reader (rwlock.go): its place is in reader.readers; nil otherwise
	writer  *rwKeys       // a read/write lock's writer (rwlock.go): its release may open a read phase; nil otherwise

	mu sync.Mutex
	// last holds, per node, the last call that may have set our keys there: the acquire,
	// then the heals (heal.go). Extends and releases go out after it, so that they cannot
	// overtake it.
	last      []*transport.Call
	until     time.Time
	released  bool          // a Release (or Close) succeeded
	byClose   bool          // that release was Close's
	releasing chan struct{} // non-nil while a release is in flight; closed when it ends
	// placed: the Acquire that won the lock was this Client's last waiter for the key and
	// the Client's place in the nodes' queue stood for it (turn.leave): the release goes to
	// the nodes where the acquire never landed too, to tidy that place (quorumOp.tidy).
	placed bool
}

// Key returns the lock's key.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// ID returns the holder id stored under the key on the nodes: 128 random bits in hex, new
// for every acquisition. [Status.Holder] shows the same value.
func (l *Lock) ID() string {
	if l == nil {
		return ""
	}
	return l.id
}

// Token returns the fencing token of this acquisition. It does not change on Extend. It is
// 0 when the Client was made [WithoutFencing]; the fenced stores reject 0.
func (l *Lock) Token() Token {
	if l == nil {
		return 0
	}
	return l.token
}

// Until returns the validity deadline: the lock must not be relied on at or after this
// instant. It carries a monotonic clock reading (when the Client's clock is the system
// clock), so compare it with time.Now() or time.Until. A successful Extend moves it.
func (l *Lock) Until() time.Time {
	if l == nil {
		return time.Time{}
	}
	if l.outer != nil {
		return l.outer.Until()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend gives the lock a new TTL of ttl from now, on every node in parallel, with a
// compare-and-pexpire script that never re-creates an expired key and never touches another
// holder's key. The keys get ttl plus the lock-delay ([WithLockDelay]), as on acquire. It succeeds only if a quorum confirms while validity time is left
// (ttl − elapsed − drift > 0), and then moves Until to start + ttl − drift. The token stays.
//
// Errors: ErrInvalidArgument for a bad ttl, as for TryAcquire (nothing sent); a *QuorumError matching
// ErrNotHeld when a quorum did not confirm in time. After such a failure Until never moves
// later, and moves earlier when the new TTL was shorter than what was left (some nodes may
// have applied it); ErrReleased (which matches ErrNotHeld) after a successful Release; when
// ctx ends, an error matching ErrNotHeld and ctx.Err(); ErrInvalidArgument for a nil Lock
// or context.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return invalidf("extend of a nil *Lock")
	}
	if ctx == nil {
		return invalidf("context is nil")
	}
	ttl, err := l.c.checkKeyTTL(ttl)
	if err != nil {
		return err
	}
	if l.outer != nil {
		return l.extendJoined(ctx, ttl)
	}
	if l.isReleased() {
		return fmt.Errorf("%w: extend %s after release", ErrReleased, l.set)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	if err := l.c.begin(); err != nil {
		return err
	}
	defer l.c.end()
	start := l.c.cfg.clock.Now()
	_, err = observed(l.c, ctx, Op{Kind: OpExtend, Keys: l.set.keys, TTL: ttl}, func(ctx context.Context) (struct{}, End, error) {
		return struct{}{}, End{}, l.c.runQuorumOp(ctx, l.extendOp(ctx, ttl, nil), l.extendOutcome(start, ttl))
	})
	return err
}

// extendOp builds the op of an extend to ttl, with done (nil for runQuorumOp); ctx is for
// the observer's events only.
func (l *Lock) extendOp(ctx context.Context, ttl time.Duration, done func(error)) *quorumOp {
	o := l.c.newQuorumOp(ctx, "extend", l.set, done)
	o.after, o.cmd = l.lastCalls(), newExtendCommand(l.set, l.id, l.c.keyTTLMillis(ttl))
	if r := l.reader; r != nil { // a reader's place: extended where it still is, never healed
		o.cmd = newScriptCall(readExtendScript, []string{r.readers}, l.id, l.c.keyTTLMillis(ttl))
		return o
	}
	if !l.c.cfg.noHealing {
		o.heal = l.heal
	}
	return o
}

// lastCalls returns a copy of last.
func (l *Lock) lastCalls() []*transport.Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.last)
}

// extendOutcome settles an extend started at start: a quorum that came too late fails it,
// and Until moves as Extend's doc says.
func (l *Lock) extendOutcome(start time.Time, ttl time.Duration) func(error) error {
	until := start.Add(ttl - Drift(ttl, l.c.cfg.driftFactor))
	return func(err error) error {
		if err == nil && Validity(ttl, start, l.c.cfg.clock.Now(), l.c.cfg.driftFactor) <= 0 {
			err = &QuorumError{Op: "extend", Key: l.key, Keys: l.set.multi(), Quorum: l.c.quorum, Agreed: l.c.quorum,
				Total: len(l.c.nodes), Cause: errValidityExpired, sentinel: ErrNotHeld}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			// Some nodes may have taken the new TTL anyway. If it is shorter than what was
			// left, their keys now expire sooner, and another holder could reach a quorum
			// before the old deadline: the deadline can only move earlier on a failure.
			if until.Before(l.until) {
				l.until = until
			}
			return err
		}
		l.until = until
		return nil
	}
}

// Release deletes the lock's key on every node in parallel with a compare-and-delete script
// that never touches another holder's key. It returns once a quorum has confirmed the
// delete, or once that has become impossible, at most the node timeout after the calls were
// written ([WithNodeTimeout]; longer only for a node whose observed round trips are);
// nodes still answering finish in the background ([Client.Close] waits for them), so an
// error may come back for a release that the slow nodes then complete.
// Exactly one Release of a Lock returns nil: the one that released it. Every other call,
// concurrent or later, sends nothing more and returns an error matching ErrReleased (and
// ErrNotHeld); a concurrent call first waits for the one in flight, and tries again itself
// if that one failed.
//
// The release is sent even when ctx has already ended (a deferred Release with a request
// context that was cancelled must not leave the lock for its whole TTL): it then runs on
// context.WithoutCancel(ctx), waiting at most the node timeout for a quorum, and returns nil
// if a quorum confirmed in that time, else an error matching ErrNotHeld and ctx.Err().
//
// Errors: a *QuorumError matching ErrNotHeld when fewer than a quorum still held our key
// (it expired, or nodes failed; also when the lock was granted on exactly a quorum and one of
// those nodes fails before the release); keys left anywhere then expire with their TTL. When ctx
// ends while waiting, the calls still go out, and the error matches ErrNotHeld and
// ctx.Err(). During or after [Client.Close]: ErrReleased if Close released the lock (a
// Release racing Close waits for Close to finish and says so), ErrClosed if it could not.
// ErrInvalidArgument for a nil Lock or context.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return invalidf("release of a nil *Lock")
	}
	if ctx == nil {
		return invalidf("context is nil")
	}
	_, err := observed(l.c, ctx, Op{Kind: OpRelease, Keys: l.set.keys}, func(ctx context.Context) (struct{}, End, error) {
		if l.outer != nil {
			return struct{}{}, End{Joined: true}, l.releaseJoined()
		}
		return struct{}{}, End{}, l.afterClose(l.release(ctx, false))
	})
	return err
}

// afterClose settles a Release that found the client closed (ErrClosed): a Close under way
// releases every lock still held, this one included, so the answer waits for it and says
// whether it did (ErrReleased) or could not (ErrClosed).
func (l *Lock) afterClose(err error) error {
	if !errors.Is(err, ErrClosed) {
		return err
	}
	<-l.c.closeDone
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released && l.byClose {
		return fmt.Errorf("%w: release %s: already released by Client.Close", ErrReleased, l.set)
	}
	return err
}

// release runs the state machine of Release: one release at a time, success once.
// byClose is Close releasing what was left: the client is closed, so it does not register.
func (l *Lock) release(ctx context.Context, byClose bool) error {
	l.mu.Lock()
	for l.releasing != nil {
		ch := l.releasing
		l.mu.Unlock()
		<-ch // bounded: a release waits at most the node timeout past its ctx
		l.mu.Lock()
	}
	if l.released {
		by := ""
		if l.byClose {
			by = " by Client.Close"
		}
		l.mu.Unlock()
		return fmt.Errorf("%w: release %s: already released%s", ErrReleased, l.set, by)
	}
	ch := make(chan struct{})
	l.releasing = ch
	l.mu.Unlock()

	err := l.send(ctx, byClose)

	l.mu.Lock()
	l.releasing = nil
	if err == nil {
		l.released, l.byClose = true, byClose
	}
	l.mu.Unlock()
	close(ch)
	if err == nil {
		if o := l.c.cfg.observer; o != nil {
			o.Event(ctx, Event{Kind: EventHoldEnded, Keys: l.set.keys, Token: l.token, Duration: l.c.cfg.clock.Now().Sub(l.granted)})
		}
		l.c.forget(l)
		// Wakes our own waiters now (those for any of the keys, and for sets that hold one);
		// the nodes' echo of this release is dropped. A queued waiter for a single key only
		// when the nodes put it first in the key's queue: otherwise they told the head's
		// process, and ours waits its turn.
		queued := l.c.queued(l.set)
		if l.reader != nil { // announced on the readers' channel, to writers
			l.c.wake.ownRelease(l.reader.readers, l.id, false)
		} else {
			for _, k := range l.set.keys {
				l.c.wake.ownRelease(k, l.id, queued)
			}
		}
	}
	return err
}

// send sends the release and waits for its outcome.
func (l *Lock) send(ctx context.Context, byClose bool) error {
	if !byClose {
		if err := l.c.begin(); err != nil {
			return err
		}
		defer l.c.end()
	}
	waitCtx := ctx
	if byClose || ctx.Err() != nil {
		// Sent anyway, on a context that ctx's end does not reach, waited for at most the
		// node timeout.
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.c.cfg.nodeTimeout)
		defer cancel()
	}
	// The script announces the release on the keys' wake-up channels for the waiters of other
	// processes (lua/release.lua, lua/release_multi.lua).
	o := l.c.newQuorumOp(ctx, "release", l.set, nil)
	// No copy of last: no heal changes it while a release is in flight (heal.go).
	l.mu.Lock()
	after, placed := l.last, l.placed
	l.mu.Unlock()
	ra := releaseArgs{announce: !l.c.cfg.noWakeups, turn: !l.c.cfg.noWakeups}
	if r := l.reader; r != nil {
		// A reader's place; the readers' channel tells waiting writers (not readers).
		channel := ""
		if ra.announce {
			channel = wakeChannel(r.readers)
		}
		o.after, o.cmd, o.release = after, newScriptCall(readReleaseScript, []string{r.readers}, l.id, channel), true
		return l.c.finishRelease(ctx, waitCtx, o)
	}
	if r := l.writer; r != nil {
		// The writer key, released as a lock's (not queued on the nodes: writers wait with
		// the gate), opening a read phase where readers wait (lua/rw_release.lua).
		channel := ""
		if ra.announce {
			channel = wakeChannel(l.key)
		}
		o.after, o.cmd, o.release = after, newScriptCall(rwReleaseScript, []string{l.key, r.phase}, l.id, channel,
			readPhaseMax(l.c.cfg.retryDelay).Milliseconds()), true
		return l.c.finishRelease(ctx, waitCtx, o)
	}
	if l.c.queued(l.set) {
		// The nodes' queue for the key: our next waiter takes our place there, or the place
		// goes; a node that answers that our waiter is the head now tells it its turn
		// (queue.go).
		ra.member, ra.ticket, ra.live = l.c.id, l.c.wait.handOff(l.key), queueLive(l.c.cfg.retryDelay).Milliseconds()
		o.turn = func(node int) { l.c.wake.turnFrom(l.key, l.id, node) }
		// The place may stand where the acquire never landed for the next waiter too (moved
		// to its ticket by the previous release), with that release's ticket there.
		o.tidyNeverSent = placed || ra.ticket != 0
	} else if len(l.set.keys) > 1 && !l.c.cfg.noWakeups {
		ra.member = l.c.id // each key's queue: its head is told
	}
	o.after, o.cmd, o.release = after, newReleaseCommand(l.set, l.id, ra), true
	return l.c.finishRelease(ctx, waitCtx, o)
}

// finishRelease runs release o on waitCtx and returns its error, with ctx's when ctx ended.
func (c *Client) finishRelease(ctx, waitCtx context.Context, o *quorumOp) error {
	err := c.runQuorumOp(waitCtx, o, nil)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
}

func (l *Lock) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}
