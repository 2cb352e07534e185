package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
)

// The sentinel errors. Branch on them with errors.Is; never compare errors with ==.
var (
	// ErrNotAcquired means an acquire did not reach a quorum with positive validity time.
	// It comes back wrapped in a *QuorumError (per-node detail), or joined with ctx.Err()
	// when the caller's context ended.
	ErrNotAcquired = errors.New("redlock: lock not acquired")

	// ErrNotHeld means an extend or release could not be confirmed by a quorum: the lock
	// expired, was released already, or a quorum of nodes could not be reached. It comes back
	// wrapped in a *QuorumError, or on its own for a lock already released by this handle.
	ErrNotHeld = errors.New("redlock: lock not held")

	// ErrLockLost means [Client.Do] could not confirm a renewal of its lock in time and
	// cancelled the function's context before the lock's validity deadline. The cause of that
	// cancellation (context.Cause), wrapped in Do's error, is a [*LockLostError] matching it.
	ErrLockLost = errors.New("redlock: lock lost")

	// ErrStaleToken means a fenced store refused a write because it has already admitted a
	// write with a higher fencing token for the same resource: the writer's lock expired and
	// another holder has written since. It comes back wrapped in a *StaleTokenError.
	ErrStaleToken = errors.New("redlock: stale fencing token")

	// ErrInvalidArgument means a call or an option was given a value it cannot use. Nothing
	// was sent to any node. The message names the argument.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
)

// heldError is a node's answer when another holder's key is present there. left is the
// key's remaining TTL in milliseconds, or -1 when the node was asked without fencing (plain
// SET NX PX), which does not say whose key it is nor for how long.
type heldError struct {
	left int64
	key  string // for a multi-key lock: the key that is held; "" for a single key
	// ahead, for a queued Acquire (queue.go): the waiters ahead of ours in the node's queue
	// for the key; -1 when the acquire was not queued.
	ahead int
	why   refusal // a read/write lock's writer: readers or a read phase, not a holder
}

// refusal is why a node refused a read/write lock's writer (lua/rw_gate.lua): the writer key
// is held (refusedHeld, as for any lock key), readers hold there, or a read phase is open.
type refusal int

const (
	refusedHeld refusal = iota
	refusedReaders
	refusedReadPhase
)

func (e heldError) Error() string {
	switch {
	case e.why == refusedReaders:
		return fmt.Sprintf("readers hold (%d ms until the last reader's place expires)", e.left)
	case e.why == refusedReadPhase:
		return fmt.Sprintf("a read phase is open: waiting readers go first (%d ms left at most)", e.left)
	case e.left < 0:
		return "key present (held by another holder, or a resent SET of ours)"
	case e.key != "":
		return fmt.Sprintf("key %q held by another holder (%d ms left)", quoteKey(e.key), e.left)
	case e.ahead > 0 && e.left == 0:
		return fmt.Sprintf("key free, %d waiters ahead in the node's queue", e.ahead)
	case e.ahead >= 0:
		return fmt.Sprintf("key held by another holder (%d ms left, %d waiters ahead in the node's queue)", e.left, e.ahead)
	}
	return fmt.Sprintf("key held by another holder (%d ms left)", e.left)
}

// errNotOurs is a node's answer to extend, release or raise when our key is not there.
var errNotOurs = errors.New("key absent or held by another holder")

// errCounterAhead is a node's answer to raise when its counter already passed the target.
var errCounterAhead = errors.New("fence counter already above the chosen token")

// errValidityExpired is the cause when a quorum came too late to leave positive validity.
var errValidityExpired = errors.New("validity time used up before a quorum agreed")

// errAcquireNotSent is a node's entry in a release when the lock's acquire call to that
// node was still queued: it was cancelled, so the key was never set there.
var errAcquireNotSent = errors.New("the acquire was never sent to this node (cancelled by the release)")

// errAbandoned is a node's entry in a failed operation's error when the failure was
// decided before the node answered (a quorum was out of reach without it, the validity time
// ran out, or the context ended): its reply was not awaited, so its own fault, if any, is
// unknown.
var errAbandoned = errors.New("reply not awaited: the operation had already failed without it")

// invalidf builds an error that matches ErrInvalidArgument.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// checkName refuses, said of the name, a name of a semaphore, election or read/write lock
// (kind) with a lock key's faults (checkKey): `redlock: invalid argument: read/write lock
// name is empty`.
func checkName(kind, name string) error { return checkKey(kind+" name", name, namePrefixes...) }

// checkDerived refuses a name (kind as for checkName) whose own length is allowed but one of
// whose derived keys would be longer than MaxKeyLen, saying so of the name, with how long a
// name of its shape may be (its longest key's limit).
func checkDerived(kind, name string, keys ...string) error {
	longest := ""
	for _, k := range keys {
		if len(k) > len(longest) {
			longest = k
		}
	}
	if k := longest; len(k) > MaxKeyLen {
		return invalidf("%s name %q is %d bytes, too long for its key %q (%d bytes, longer than MaxKeyLen, %d): names of its shape may have at most %d bytes",
			kind, quoteKey(name), len(name), quoteKey(k), len(k), MaxKeyLen, MaxKeyLen-(len(k)-len(name)))
	}
	return nil
}

// NodeError is the failure of one node in one operation. Node is the node's index in the
// slice given to [New]; Addr is its address when the client exposes one. Err is the cause
// (a go-redis or network error, a timeout, or the node's refusal) and is returned by Unwrap.
type NodeError struct {
	Node int
	Addr string
	Err  error
}

// Error implements error.
func (e *NodeError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("redlock: node %d (%s): %v", e.Node, e.Addr, e.Err)
	}
	return fmt.Sprintf("redlock: node %d: %v", e.Node, e.Err)
}

// Unwrap returns the cause.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports an acquire, extend or release that a quorum did not confirm.
// errors.Is(err, ErrNotAcquired) holds for a failed acquire, errors.Is(err, ErrNotHeld) for
// a failed extend or release. Cause, when set, says why beyond the per-node errors (for
// example ctx.Err() when the caller's context ended, so errors.Is(err, context.Canceled)
// holds too). Nodes aggregates one *NodeError per node that did not agree.
type QuorumError struct {
	Op     string   // "acquire", "extend" or "release"
	Key    string   // the lock key (the first key of a multi-key lock)
	Keys   []string // every key of a multi-key lock (AcquireMulti), in the caller's order; nil otherwise
	Quorum int      // how many nodes had to agree
	Agreed int      // how many did (for acquire: nodes that granted the key, see docs/design.md)
	Total  int      // how many nodes there are
	Cause  error    // optional: the reason beyond the per-node errors
	Nodes  *multierror.Error

	sentinel error
}

// Error implements error.
func (e *QuorumError) Error() string {
	var b strings.Builder
	name := strconv.Quote(quoteKey(e.Key))
	if len(e.Keys) > 1 {
		name = quoteKeys(e.Keys)
	}
	fmt.Fprintf(&b, "%v: %s %s: ", e.sentinel, e.Op, name)
	e.writeVote(&b)
	return b.String()
}

// Detail is the error's message without the sentinel and the key: the vote ("acquire: 2 of 5
// nodes agreed, quorum is 3"), then the cause and each node's error, as Error writes them.
// It is meant for callers that name the key themselves, such as the CLI.
func (e *QuorumError) Detail() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", e.Op)
	e.writeVote(&b)
	return b.String()
}

// writeVote writes the vote, the cause and the per-node errors.
func (e *QuorumError) writeVote(b *strings.Builder) {
	fmt.Fprintf(b, "%d of %d nodes agreed, quorum is %d", e.Agreed, e.Total, e.Quorum)
	if e.Cause != nil {
		fmt.Fprintf(b, ": %v", e.Cause)
	}
	if e.Nodes != nil {
		for _, ne := range e.Nodes.Errors {
			b.WriteString("; ")
			b.WriteString(strings.TrimPrefix(ne.Error(), "redlock: "))
		}
	}
}

// contended reports whether some node refused because another holder's key was there, as
// opposed to an attempt that failed only on timeouts and errors.
func (e *QuorumError) contended() bool {
	if e.Nodes == nil {
		return false
	}
	for _, ne := range e.Nodes.Errors {
		var h heldError
		if errors.As(ne, &h) {
			return true
		}
	}
	return false
}

// notOurs reports whether some node answered that the key is not ours (an extend or release
// of a lock that expired or was taken over).
func (e *QuorumError) notOurs() bool {
	if e.Nodes == nil {
		return false
	}
	for _, ne := range e.Nodes.Errors {
		if errors.Is(ne, errNotOurs) {
			return true
		}
	}
	return false
}

// Unwrap returns the sentinel, the cause and every per-node error, so that errors.Is and
// errors.As see all of them.
func (e *QuorumError) Unwrap() []error {
	errs := []error{e.sentinel}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.Nodes != nil {
		errs = append(errs, e.Nodes.Errors...)
	}
	return errs
}

// LockLostError is why [Client.Do] gave its lock up: it is the cause of the function's
// context (context.Cause) and is wrapped in Do's error. errors.Is(err, ErrLockLost) holds,
// and errors.As finds the last renewal's *QuorumError in Cause when there is one.
type LockLostError struct {
	Keys []string // the lock's keys (read-only)
	// Refused: more than N − Q nodes answered that the keys are gone (expired or another
	// holder's), so no quorum can hold them. Otherwise no renewal was confirmed by the
	// cancel point, Margin before the validity deadline, for the reason in Late.
	Refused bool
	Margin  time.Duration
	Late    LateKind
	Cause   error // the last renewal's error, or one that says why none was confirmed
}

// LateKind says why no renewal of a Do's lock was confirmed in time.
type LateKind uint8

const (
	// LateNone: not late (LockLostError.Refused).
	LateNone LateKind = iota
	// LateRenewalFailed: the last renewal failed (Cause is its error) and no retry
	// succeeded before the cancel point.
	LateRenewalFailed
	// LateRenewalUnconfirmed: a renewal was sent in time, but no quorum confirmed it.
	LateRenewalUnconfirmed
	// LateRenewerLate: the renewer ran too late to try (the process paused or starved).
	LateRenewerLate
	// LateAcquire: the acquire itself returned with less validity left than the cancel
	// margin, so fn was not run (Do, DoMulti).
	LateAcquire
)

// errAcquireLate is the cause of a LateAcquire loss.
var errAcquireLate = errors.New("the acquire left no time to run fn")

// Error implements error; the text is as before the type existed.
func (e *LockLostError) Error() string {
	name := lockKeys{keys: e.Keys}.String()
	if e.Refused {
		return fmt.Sprintf("%v: %s: %v", ErrLockLost, name, e.Cause)
	}
	return fmt.Sprintf("%v: %s: no renewal confirmed %v before the validity deadline: %v", ErrLockLost, name, e.Margin, e.Cause)
}

// Unwrap returns ErrLockLost and the cause.
func (e *LockLostError) Unwrap() []error { return []error{ErrLockLost, e.Cause} }

// ErrReleased means the Lock was released already: by an earlier or concurrent
// [Lock.Release], or by [Client.Close]. errors.Is(err, ErrNotHeld) holds for it too.
var ErrReleased error = releasedError{}

type releasedError struct{}

func (releasedError) Error() string        { return "redlock: lock already released" }
func (releasedError) Is(target error) bool { return target == ErrNotHeld }

// ErrClosed is returned by calls made after [Client.Close].
var ErrClosed = errors.New("redlock: client closed")

// StaleTokenError reports a fenced write refused because its token is below the highest
// token the store has admitted for that resource. errors.Is(err, ErrStaleToken) holds.
type StaleTokenError struct {
	Resource string // the store's resource (a Redis key, a table row)
	Got      Token  // the token the write carried
	Highest  Token  // the highest token admitted before; 0 when the store cannot tell
}

// Error implements error.
func (e *StaleTokenError) Error() string {
	if e.Highest == 0 {
		// The store could not tell which (sqlfence.Exec: a conditional UPDATE that changed no row).
		return fmt.Sprintf("redlock: fenced write to %q with token %d changed nothing: a higher token was admitted, or the row does not exist", e.Resource, e.Got)
	}
	return fmt.Sprintf("redlock: stale fencing token for %q: %d < %d", e.Resource, e.Got, e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// collectNodeErrors aggregates the non-nil per-node errors, or returns nil.
func collectNodeErrors(errs []error) *multierror.Error {
	var m *multierror.Error
	for _, e := range errs {
		if e != nil {
			m = multierror.Append(m, e)
		}
	}
	return m
}
