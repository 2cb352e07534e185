package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// Observer receives what a Client does, for metrics and traces: package
// github.com/quorumlock/redlock/otel implements it with OpenTelemetry. Set it with
// [WithObserver]. A Client without one makes no observer calls and allocates nothing for
// them.
//
// The methods are called on the goroutines doing the work (a caller's, the renewer's, a
// node's sender): they must be safe for concurrent use, return quickly and never block.
// Events carry no key unless the observer asks for it (keys are unbounded in number, so
// they make poor metric attributes). Embed [BaseObserver] to stay compatible when methods
// are added.
type Observer interface {
	// Start is called when an operation begins: an acquire (TryAcquire, Acquire and their
	// Multi forms), an extend, a release or a Do. The context it returns is the one the
	// operation's later events get (a span's); end is called exactly once, when the
	// operation returns. Start may return a nil end.
	Start(ctx context.Context, op Op) (context.Context, func(End))
	// Attempt is called once for every acquire attempt, when it is decided.
	Attempt(ctx context.Context, a Attempt)
	// NodeCall is called once for every command that an acquire, extend, release or undo
	// sends to a node, with its first outcome.
	NodeCall(ctx context.Context, n NodeCall)
	// Event is called for the things that happen to a held lock: a lost lock, a failed
	// renewal, a hold that ended, a wake-up.
	Event(ctx context.Context, e Event)
}

// BaseObserver implements Observer with methods that do nothing; embed it in an Observer
// so that methods added to the interface later do not break it.
type BaseObserver struct{}

// Start returns ctx and no end function.
func (BaseObserver) Start(ctx context.Context, _ Op) (context.Context, func(End)) { return ctx, nil }

// Attempt does nothing.
func (BaseObserver) Attempt(context.Context, Attempt) {}

// NodeCall does nothing.
func (BaseObserver) NodeCall(context.Context, NodeCall) {}

// Event does nothing.
func (BaseObserver) Event(context.Context, Event) {}

// OpKind names an observed operation.
type OpKind string

// The operations of [Op] and [NodeCall].
const (
	OpAcquire OpKind = "acquire"
	OpExtend  OpKind = "extend"
	OpRelease OpKind = "release"
	OpDo      OpKind = "do"
	OpUndo    OpKind = "undo" // NodeCall only: the release that undoes a failed attempt
	OpRaise   OpKind = "raise"
	OpHeal    OpKind = "heal"
)

// Op describes an operation that begins.
type Op struct {
	Kind OpKind
	Keys []string      // the lock's keys (read-only); one for a single-key lock
	TTL  time.Duration // the TTL asked for (acquire, extend, do)
	// Semaphore is the semaphore's name for an acquire or Do of a [Semaphore] (Keys are then
	// its permit keys, of which the operation takes one); "" otherwise.
	Semaphore string
	// Election is the election's name for a Campaign or an election's Do; "" otherwise.
	Election string
	// RWLock is the read/write lock's name for its acquires and Do; "" otherwise.
	RWLock string
}

// Outcome is how an operation, an attempt or a node call ended.
type Outcome string

// The outcomes.
const (
	// OutcomeOK: the operation succeeded (acquired, extended, released), or the node
	// agreed.
	OutcomeOK Outcome = "ok"
	// OutcomeRefused: another holder has the key (acquire; for a semaphore, every permit
	// is held, this Client's own holds included), or the key is not ours any more (extend,
	// release); for a node call, that node's answer.
	OutcomeRefused Outcome = "refused"
	// OutcomeExpired: a quorum agreed too late, with no validity time left.
	OutcomeExpired Outcome = "expired"
	// OutcomeLost: Do could not keep its lock (ErrLockLost).
	OutcomeLost Outcome = "lost"
	// OutcomeCanceled: the caller's context ended first.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeError: nodes failed (errors, timeouts) so that no quorum was possible, or
	// another error (invalid argument, closed client).
	OutcomeError Outcome = "error"
	// OutcomeTimeout: a node call got no answer within the node timeout.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeNotSent: a node call was dropped before it was written (the attempt was decided
	// or the node was stalled).
	OutcomeNotSent Outcome = "not_sent"
)

// End is how an operation ended.
type End struct {
	Outcome  Outcome
	Err      error // nil on success
	Attempts int   // acquire and do: the attempts made (0 for a joined, reentrant hold)
	Token    Token // acquire and do: the first key's token on success
	Joined   bool  // acquire: the call joined a hold its context carried (reentrant.go)
}

// Attempt is one decided acquire attempt.
type Attempt struct {
	Outcome Outcome
	// Raised: the fast path did not decide, and at least one fence counter was raised (the
	// second round trip of docs/design.md §3.2).
	Raised   bool
	Agreed   int // nodes that granted the keys
	Duration time.Duration
}

// NodeCall is the first outcome of one command to one node.
type NodeCall struct {
	Op      OpKind
	Node    int    // the node's index in the slice given to New
	Addr    string // the node's address, "" when its client does not expose one
	Command string // the Redis command: "EVALSHA" for the scripts, "SET" without fencing
	Outcome Outcome
	Err     error // the node's error for OutcomeError and OutcomeTimeout
	// Duration is from the write of the command's pipeline to the answer (or the timeout);
	// 0 for OutcomeNotSent.
	Duration time.Duration
}

// EventKind names an [Event].
type EventKind string

// The events.
const (
	// EventLockLost: Do cancelled its function because the lock could not be kept.
	EventLockLost EventKind = "lock_lost"
	// EventRenewalFailed: one renewal of a Do failed; it is retried while validity is left.
	EventRenewalFailed EventKind = "renewal_failed"
	// EventHoldEnded: a lock was released (or lost and released); Duration is how long it
	// was held, from the acquire's return.
	EventHoldEnded EventKind = "hold_ended"
	// EventWakeUp: a waiting Acquire was woken by a release instead of sleeping out its
	// retry pause.
	EventWakeUp EventKind = "wake_up"
)

// Event is something that happened to a lock.
type Event struct {
	Kind     EventKind
	Keys     []string // read-only
	Token    Token
	Duration time.Duration // EventHoldEnded: the time held
	Err      error         // EventLockLost and EventRenewalFailed: the cause
}

// outcomeOf classifies an operation's error.
func outcomeOf(err error) Outcome {
	var qe *QuorumError
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	case errors.Is(err, errValidityExpired):
		return OutcomeExpired
	case errors.As(err, &qe) && (qe.contended() || qe.notOurs()):
		return OutcomeRefused
	}
	return OutcomeError
}

// observed runs one operation of the API: under the observer's Start and End when there is
// one, directly when there is none. It is, with startOp for the renewals that end on another
// goroutine, the one place that reports operations. run gets the context for the
// operation's events and returns the End to report beyond Err; an End whose Outcome run
// leaves empty is classified from the error.
func observed[T any](c *Client, ctx context.Context, op Op, run func(ctx context.Context) (T, End, error)) (T, error) {
	if c.cfg.observer == nil {
		v, _, err := run(ctx)
		return v, err
	}
	octx, end := c.startOp(ctx, op)
	var e End
	var err error
	defer func() { // also when run panics (a Do's function), so that the operation ends
		e.Err = err
		end(e)
	}()
	var v T
	v, e, err = run(octx)
	return v, err
}

// startOp calls the observer's Start, if there is one, and returns the context for the
// operation's events and a function that ends it (never nil), classifying an End whose
// Outcome is empty from its Err.
func (c *Client) startOp(ctx context.Context, op Op) (context.Context, func(End)) {
	o := c.cfg.observer
	if o == nil {
		return ctx, nopEnd
	}
	octx, end := o.Start(ctx, op)
	if octx == nil {
		octx = ctx
	}
	if end == nil {
		return octx, nopEnd
	}
	return octx, func(e End) {
		if e.Outcome == "" {
			e.Outcome = outcomeOf(e.Err) // classified only when someone listens
		}
		end(e)
	}
}

func nopEnd(End) {}

// nodeCallOutcome classifies one node's first event for a NodeCall.
func nodeCallOutcome(ev transport.Event, agreed bool) (Outcome, error) {
	switch {
	case ev.Out == transport.NotSent:
		return OutcomeNotSent, ev.Err
	case ev.Out == transport.TimedOut:
		return OutcomeTimeout, ev.Err
	case ev.Err != nil:
		return OutcomeError, ev.Err
	case agreed:
		return OutcomeOK, nil
	}
	return OutcomeRefused, nil
}

// observeNode reports one node call's first outcome to o (not nil).
func (c *Client) observeNode(o Observer, ctx context.Context, op OpKind, ev transport.Event, agreed bool) {
	out, err := nodeCallOutcome(ev, agreed)
	n := NodeCall{Op: op, Node: ev.Node, Addr: c.nodes[ev.Node].addr, Command: "EVALSHA", Outcome: out, Err: err}
	if ev.Call != nil {
		if ev.Call.Src == "" {
			n.Command = "SET"
		}
		if w := ev.Call.Written(); w != 0 && out != OutcomeNotSent {
			n.Duration = time.Duration(time.Now().UnixNano() - w)
		}
	}
	o.NodeCall(ctx, n)
}
