//go:build unix

package main

// The signals exec receives: while the lock is being acquired they abort the acquire (as
// does the end of --wait); once the command runs they are passed on to its process group.

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// errWaitExpired is the cause of the acquire context's end when --wait ran out.
var errWaitExpired = errors.New("--wait ran out")

// interrupted is the cause of the acquire context's end when a signal came first.
type interrupted struct{ sig os.Signal }

func (i *interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

// router owns the signals exec receives. While the lock is being acquired, a signal (or the
// end of --wait) aborts the acquire; once the command runs, signals are passed on through
// fwd. begin switches from the first phase to the second, atomically with respect to an
// abort, so a signal is never both lost and acted on.
//
// --wait is how long to keep trying while the lock is held elsewhere, so it neither counts
// the preflight nor cuts the first attempt short: its timer starts at startWait (once a
// quorum answered PING), and the acquire is given up only when both the timer has run out
// and an attempt has been decided without success (attempted, from exec's Client's
// observer), whichever comes last. A lock that is free when the first attempt reaches the
// nodes is therefore acquired with any --wait; after a won attempt the wait is over and the
// timer gives nothing up.
type router struct {
	in    chan os.Signal
	fwd   chan os.Signal
	abort context.CancelCauseFunc
	wait  time.Duration // --wait; 0: no timer

	mu      sync.Mutex
	running bool // begin succeeded
	aborted bool // the acquire was aborted
	elapsed bool // wait has passed since startWait
	failed  bool // an attempt was decided without success
	won     bool // an attempt won: nothing is given up for the wait any more

	start     chan struct{} // closed by startWait
	startOnce sync.Once
	quit      chan struct{}
	done      chan struct{}
}

// startRouter subscribes to the forwarded signals and starts the routing goroutine, which
// also gives the acquire up for wait (if > 0) as the router's doc says, from startWait on.
// Call stop when done.
func startRouter(abort context.CancelCauseFunc, wait time.Duration) *router {
	r := &router{
		in:    make(chan os.Signal, len(forwardedSignals)),
		fwd:   make(chan os.Signal, 16),
		abort: abort,
		wait:  wait,
		start: make(chan struct{}),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	// A signal ignored when redlock started stays ignored, for redlock and for the command
	// (which inherits the disposition): "nohup redlock exec ..." must not pass a hangup on.
	// Subscribing to it would un-ignore it. (SIGINT and SIGTERM are already subscribed to
	// by main, so they are never found ignored here.)
	var sigs []os.Signal
	for _, s := range forwardedSignals {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	signal.Notify(r.in, sigs...)
	go func() {
		defer close(r.done)
		var t *time.Timer
		defer func() {
			if t != nil {
				t.Stop()
			}
		}()
		var timeout <-chan time.Time
		start := r.start
		if wait <= 0 {
			start = nil // no timer to start
		}
		for {
			select {
			case s := <-r.in:
				r.deliver(s)
			case <-start:
				start = nil
				t = time.NewTimer(wait)
				timeout = t.C
			case <-timeout:
				timeout = nil
				r.waitElapsed()
			case <-r.quit:
				return
			}
		}
	}()
	return r
}

// startWait starts the --wait timer: call it when the preflight has passed, just before the
// acquire. Calls after the first do nothing.
func (r *router) startWait() { r.startOnce.Do(func() { close(r.start) }) }

// waitElapsed records that wait has passed, and gives up if an attempt already failed.
func (r *router) waitElapsed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.elapsed = true
	if r.failed && !r.won {
		r.giveUpLocked(errWaitExpired)
	}
}

// attempted records a decided acquire attempt, won or not, and gives up if it failed and
// wait has passed. It is called on the attempt's goroutine, and only takes the router's
// mutex: it never blocks for long.
func (r *router) attempted(won bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if won {
		r.won = true
		return
	}
	r.failed = true
	if r.elapsed && !r.won {
		r.giveUpLocked(errWaitExpired)
	}
}

// attemptObserver is the observer of exec's Client: it reports each decided acquire attempt
// to the router, for --wait.
type attemptObserver struct {
	redlock.BaseObserver
	r *router
}

// Attempt tells the router whether the attempt won.
func (o attemptObserver) Attempt(_ context.Context, a redlock.Attempt) {
	o.r.attempted(a.Outcome == redlock.OutcomeOK)
}

func (r *router) deliver(s os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.running:
		select {
		case r.fwd <- s:
		default: // 16 undelivered signals pending: the command has plenty to act on
		}
	case !r.aborted:
		r.aborted = true
		r.abort(&interrupted{sig: s})
	}
}

// giveUpLocked aborts the acquire with cause unless the command runs or the acquire was
// aborted already. r.mu is held.
func (r *router) giveUpLocked(cause error) {
	if !r.running && !r.aborted {
		r.aborted = true
		r.abort(cause)
	}
}

// begin reports whether the command may start: false when the acquire was aborted first.
func (r *router) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aborted {
		return false
	}
	r.running = true
	return true
}

// stop unsubscribes from the signals and waits for the routing goroutine.
func (r *router) stop() {
	signal.Stop(r.in)
	close(r.quit)
	<-r.done
}
