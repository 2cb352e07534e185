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
type router struct {
	in    chan os.Signal
	fwd   chan os.Signal
	abort context.CancelCauseFunc

	mu      sync.Mutex
	running bool // begin succeeded
	aborted bool // the acquire was aborted

	quit chan struct{}
	done chan struct{}
}

// startRouter subscribes to the forwarded signals and starts the routing goroutine, which
// also ends the acquire when wait (if > 0) runs out. Call stop when done.
func startRouter(abort context.CancelCauseFunc, wait time.Duration) *router {
	r := &router{
		in:    make(chan os.Signal, len(forwardedSignals)),
		fwd:   make(chan os.Signal, 16),
		abort: abort,
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
	var timeout <-chan time.Time
	var t *time.Timer
	if wait > 0 {
		t = time.NewTimer(wait)
		timeout = t.C
	}
	go func() {
		defer close(r.done)
		if t != nil {
			defer t.Stop()
		}
		for {
			select {
			case s := <-r.in:
				r.deliver(s)
			case <-timeout:
				r.giveUp(errWaitExpired)
			case <-r.quit:
				return
			}
		}
	}()
	return r
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

func (r *router) giveUp(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
