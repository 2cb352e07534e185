//go:build unix

package main

// The supervision of exec's command: its environment, its start in a process group of its
// own, the signals passed on to that group, SIGTERM and SIGKILL when the lock is lost, and
// the wait until nothing of the group is left.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	// killWait bounds the wait for a process group to vanish after SIGKILL. Only a process
	// stuck in the kernel (uninterruptible sleep) outlives it.
	killWait = 2 * time.Second
	// groupPoll is how often the command's process group is checked once the command
	// itself has exited.
	groupPoll = 10 * time.Millisecond
)

// lockEnv are the variables exec sets for its command.
var lockEnv = []string{"REDLOCK_KEY", "REDLOCK_TOKEN", "REDLOCK_KEYS", "REDLOCK_TOKENS"}

// childEnv is the environment of exec's command: redlock's own, less the variables that
// name the nodes or carry their credentials (credentialEnv) unless keep is set, and less
// any of lockEnv, which exec sets itself.
func childEnv(environ []string, keep bool) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(lockEnv, name) || slices.Contains(electEnv, name) || (!keep && slices.Contains(credentialEnv, name)) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// heldLock is what the supervision of the command needs of the lock, single or multi-key.
type heldLock struct {
	env    []string // the command's REDLOCK_ variables
	tokens []string // for --verbose
	until  func() time.Time
}

// childResult is what happened to the command.
type childResult struct {
	startErr  error
	state     *os.ProcessState
	exitedAt  time.Time
	lost      bool      // the lock was reported lost while the command ran
	termAt    time.Time // when the group got SIGTERM from redlock; zero if never
	killAt    time.Time // when the group got SIGKILL; zero if never
	leftovers bool      // the command exited but left running processes in its group
	stuck     bool      // processes of the group still ran killWait after SIGKILL
}

// describe says what happened to the command after the lock was lost.
func (r *childResult) describe() string {
	if r.state == nil {
		return "the command's status is unknown"
	}
	_, what := exitStatus(r.state)
	var s string
	switch {
	case r.termAt.IsZero() || r.exitedAt.Before(r.termAt):
		if rest, ok := strings.CutPrefix(what, "was "); ok {
			s = "the command had already been " + rest
		} else {
			s = "the command had already " + what
		}
	case !r.killAt.IsZero() && !r.exitedAt.Before(r.killAt):
		s = fmt.Sprintf("the command got SIGTERM, then SIGKILL %v later, and %s", r.killAt.Sub(r.termAt).Round(time.Millisecond), what)
	default:
		s = "the command got SIGTERM and " + what
	}
	if !r.killAt.IsZero() && r.exitedAt.Before(r.killAt) {
		s += fmt.Sprintf("; the rest of its process group got SIGKILL %v after SIGTERM", r.killAt.Sub(r.termAt).Round(time.Millisecond))
	}
	if r.stuck {
		s += fmt.Sprintf("; some of its processes were still there %v after SIGKILL", killWait)
	}
	return s
}

// supervise starts the command and waits until it has exited and its process group is
// empty. Meanwhile it forwards the signals from fwd to the group and, when fctx ends (the
// lock is being lost), sends the group SIGTERM and then SIGKILL, the latter no later than
// killSafety(ttl) before the lock's validity deadline. It returns only once the command has
// been reaped.
func (x *execRun) supervise(fctx context.Context, l heldLock, fwd <-chan os.Signal) *childResult {
	cfg := x.cfg
	res := &childResult{}
	cmd := exec.Command(cfg.path, cfg.argv[1:]...)
	cmd.Args[0] = cfg.argv[0]
	cmd.Env = append(childEnv(os.Environ(), cfg.keepNodeEnv), l.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, x.e.stdout, x.e.stderr
	tty, foreground := foregroundTTY()
	cmd.SysProcAttr = childSysProcAttr(foreground, tty)
	if err := cmd.Start(); err != nil {
		res.startErr = err
		return res
	}
	exited := make(chan struct{})
	go func() { // owned here: every return of watch comes after exited is closed
		_ = cmd.Wait()
		close(exited)
	}()
	s := &supervisor{x: x, l: l, cmd: cmd, res: res, pgid: cmd.Process.Pid, tty: tty, foreground: foreground,
		fwd: fwd, lost: fctx.Done(), done: exited}
	defer s.stopTimers()
	s.watch()
	return res
}

// supervisor is the state of one supervision: the command and its process group, what
// happened to them so far, and the events still awaited (a nil channel is one that no
// longer matters).
type supervisor struct {
	x          *execRun
	l          heldLock
	cmd        *exec.Cmd
	res        *childResult
	pgid       int
	tty        int
	foreground bool // the command was given the terminal: take it back when it exits

	fwd     <-chan os.Signal
	lost    <-chan struct{} // the lock is being lost
	done    <-chan struct{} // the command exited
	killC   <-chan time.Time
	pollC   <-chan time.Time
	killTm  *time.Timer
	killDue time.Time // when SIGKILL is due; zero until SIGTERM was sent
	ticker  *time.Ticker
}

// watch handles the supervision's events until the command has exited and its group is
// empty, or is stuck killWait after SIGKILL.
func (s *supervisor) watch() {
	for {
		// An overdue SIGKILL goes first: after a scheduling delay several events may be
		// ready at once, and select would pick one of them at random.
		if !s.killDue.IsZero() && s.res.killAt.IsZero() && !time.Now().Before(s.killDue) {
			s.kill()
		}
		select {
		case sig := <-s.fwd:
			s.x.notef("forwarding %s to the command", signalName(sig))
			_ = signalGroup(s.pgid, sig)
		case <-s.lost:
			s.lockLost()
		case <-s.done:
			if s.exited() {
				return
			}
		case <-s.pollC:
			if s.polled() {
				return
			}
		case <-s.killC:
			if s.res.killAt.IsZero() {
				s.kill()
			}
		}
	}
}

// lockLost sends the group SIGTERM, with SIGKILL due --grace later, or earlier when the
// renewer was late: no later than killSafety before the validity deadline.
func (s *supervisor) lockLost() {
	cfg := s.x.cfg
	s.lost = nil
	s.res.lost = true
	at := time.Now().Add(cfg.grace)
	if last := s.l.until().Add(-killSafety(cfg.ttl)); last.Before(at) {
		at = last // the renewer was late: keep SIGKILL ahead of the deadline
	}
	s.x.notef("lock lost: sending SIGTERM to the command, SIGKILL in %v", time.Until(at).Round(time.Millisecond))
	s.terminate(at)
}

// exited records the command's exit and reports whether the supervision is over: it is
// unless processes are left in the group, which then get SIGTERM (unless they already
// did) and are polled until they are gone.
func (s *supervisor) exited() bool {
	cfg := s.x.cfg
	s.done = nil
	s.res.state, s.res.exitedAt = s.cmd.ProcessState, time.Now()
	if s.foreground {
		restoreForeground(s.tty)
	}
	if !groupAlive(s.pgid) {
		return true
	}
	s.res.leftovers = true
	if s.res.termAt.IsZero() {
		fmt.Fprintf(s.x.e.stderr, "redlock: exec: the command exited but left processes running in its process group; "+
			"sending them SIGTERM (SIGKILL in %v) before releasing the lock\n", cfg.grace)
		s.terminate(time.Now().Add(cfg.grace))
	}
	s.ticker = time.NewTicker(groupPoll)
	s.pollC = s.ticker.C
	return false
}

// polled reports whether the supervision is over once the command has exited: its group is
// empty, or still there killWait after SIGKILL (stuck).
func (s *supervisor) polled() bool {
	if !groupAlive(s.pgid) {
		return true
	}
	if !s.res.killAt.IsZero() && time.Since(s.res.killAt) > killWait {
		s.res.stuck = true
		return true
	}
	return false
}

// terminate sends SIGTERM to the group once, and arms SIGKILL for at (or keeps an earlier
// one).
func (s *supervisor) terminate(at time.Time) {
	now := time.Now()
	if s.res.termAt.IsZero() {
		s.res.termAt = now
		_ = signalGroup(s.pgid, syscall.SIGTERM)
	}
	if !s.res.killAt.IsZero() || (!s.killDue.IsZero() && !at.Before(s.killDue)) {
		return // SIGKILL sent already, or due no later than at
	}
	if s.killTm != nil {
		s.killTm.Stop()
	}
	s.killDue = at
	s.killTm = time.NewTimer(at.Sub(now))
	s.killC = s.killTm.C
}

// kill sends SIGKILL to the group.
func (s *supervisor) kill() {
	s.killC = nil
	s.res.killAt = time.Now()
	s.x.notef("sending SIGKILL to the command's process group")
	_ = signalGroup(s.pgid, syscall.SIGKILL)
}

// stopTimers stops the SIGKILL timer and the group's poll, whichever were started.
func (s *supervisor) stopTimers() {
	if s.killTm != nil {
		s.killTm.Stop()
	}
	if s.ticker != nil {
		s.ticker.Stop()
	}
}
