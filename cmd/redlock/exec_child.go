//go:build unix

package main

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
		if slices.Contains(lockEnv, name) || (!keep && slices.Contains(credentialEnv, name)) {
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
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { // owned here: every return below comes after exited is closed
		_ = cmd.Wait()
		close(exited)
	}()

	var (
		done    = (<-chan struct{})(exited)
		lost    = fctx.Done()
		killC   <-chan time.Time
		pollC   <-chan time.Time
		killTm  *time.Timer
		killDue time.Time // when SIGKILL is due; zero until SIGTERM was sent
	)
	defer func() {
		if killTm != nil {
			killTm.Stop()
		}
	}()
	// terminate sends SIGTERM to the group once, and arms SIGKILL for at (or keeps an
	// earlier one).
	terminate := func(at time.Time) {
		now := time.Now()
		if res.termAt.IsZero() {
			res.termAt = now
			_ = signalGroup(pgid, syscall.SIGTERM)
		}
		if !res.killAt.IsZero() || (!killDue.IsZero() && !at.Before(killDue)) {
			return // SIGKILL sent already, or due no later than at
		}
		if killTm != nil {
			killTm.Stop()
		}
		killDue = at
		killTm = time.NewTimer(at.Sub(now))
		killC = killTm.C
	}
	kill := func() {
		killC = nil
		res.killAt = time.Now()
		x.notef("sending SIGKILL to the command's process group")
		_ = signalGroup(pgid, syscall.SIGKILL)
	}
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		// An overdue SIGKILL goes first: after a scheduling delay several events may be
		// ready at once, and select would pick one of them at random.
		if !killDue.IsZero() && res.killAt.IsZero() && !time.Now().Before(killDue) {
			kill()
		}
		select {
		case s := <-fwd:
			x.notef("forwarding %s to the command", signalName(s))
			_ = signalGroup(pgid, s)
		case <-lost:
			lost = nil
			res.lost = true
			at := time.Now().Add(cfg.grace)
			if last := l.until().Add(-killSafety(cfg.ttl)); last.Before(at) {
				at = last // the renewer was late: keep SIGKILL ahead of the deadline
			}
			x.notef("lock lost: sending SIGTERM to the command, SIGKILL in %v", time.Until(at).Round(time.Millisecond))
			terminate(at)
		case <-done:
			done = nil
			res.state, res.exitedAt = cmd.ProcessState, time.Now()
			if foreground {
				restoreForeground(tty)
			}
			if !groupAlive(pgid) {
				return res
			}
			res.leftovers = true
			if res.termAt.IsZero() {
				fmt.Fprintf(x.e.stderr, "redlock: exec: the command exited but left processes running in its process group; "+
					"sending them SIGTERM (SIGKILL in %v) before releasing the lock\n", cfg.grace)
				terminate(time.Now().Add(cfg.grace))
			}
			ticker = time.NewTicker(groupPoll)
			pollC = ticker.C
		case <-pollC:
			if !groupAlive(pgid) {
				return res
			}
			if !res.killAt.IsZero() && time.Since(res.killAt) > killWait {
				res.stuck = true
				return res
			}
		case <-killC:
			if res.killAt.IsZero() {
				kill()
			}
		}
	}
}
