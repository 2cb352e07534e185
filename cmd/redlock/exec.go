//go:build unix

package main

// redlock exec: runs a command while holding a lock. This file takes the lock, hands the
// command to its supervisor (exec_child.go) and turns the outcome into exec's exit status;
// the command line is in exec_config.go, the descriptions of failures in exec_errors.go and
// the signal routing in exec_signals.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

const execAbout = `
Runs CMD while holding the lock KEY (or, with --key, one lock over several keys) on the
Redis nodes (--nodes, else $REDLOCK_NODES, else the file named by $REDLOCK_NODES_FILE;
$REDISCLI_AUTH is the password of nodes whose URL has none), and releases the lock once
CMD has exited. While CMD runs the lock is renewed every ttl/3.

CMD gets redlock's stdin, stdout and stderr, its environment (less $REDLOCK_NODES,
$REDLOCK_NODES_FILE and $REDISCLI_AUTH, which may hold passwords; --keep-node-env keeps
them), and:
  REDLOCK_KEY    the lock's key
  REDLOCK_TOKEN  the fencing token of this acquisition: a decimal number larger than the
                 token of every earlier holder of KEY. Send it with each write to the
                 resource the lock protects, and have the resource reject any write whose
                 token is lower than one it has already seen (docs/design.md).
With several keys, all of them are taken or none (the library's AcquireMulti), each key
has its own token, and CMD gets instead:
  REDLOCK_KEYS    the keys, one per line, in the order given
  REDLOCK_TOKENS  their fencing tokens, one per line, in the same order

CMD runs in a process group of its own. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
SIGUSR2 sent to redlock are forwarded to that group (those ignored when redlock starts,
such as SIGHUP under nohup, stay ignored). The lock is released only after CMD
has exited and nothing else in its group is still running (leftovers get SIGTERM, then
SIGKILL after --grace).

If renewals fail (a quorum of nodes unreachable, or the keys gone), the group gets SIGTERM
--grace + S before the lock's validity deadline and SIGKILL --grace later, so it is dead
before anyone else can acquire the lock. S, a safety allowance for scheduling delays, is a
tenth of --ttl and at least 250ms; --grace + S must be at most half of --ttl (with the
defaults: 5s + 3s ≤ 15s). If redlock itself is killed with SIGKILL, Linux kills CMD at once.

Exit status:
  CMD's own  CMD ran and the lock was held throughout; 128+N if signal N killed CMD
  75         the lock was not acquired: it is held elsewhere, or --wait ran out
             (change with --conflict-exit-code)
  76         the lock was lost while CMD ran, and CMD was stopped
             (change with --lost-exit-code)
  126, 127   CMD could not be started, or was not found
  128+N      redlock got signal N while waiting for the lock; CMD did not run
  1          another failure, e.g. fewer than a quorum of nodes reachable
  2          bad command line`

func runExec(ctx context.Context, e *env, args []string) error {
	cfg, err := parseExec(e, args)
	if err != nil {
		return err
	}
	urls, _, err := realNodes(e, "exec", cfg.nodesFlag)
	if err != nil {
		return err
	}
	if err := cfg.tls.apply("exec", urls); err != nil {
		return err
	}
	x := &execRun{cfg: cfg, e: e}
	return x.run(ctx, urls)
}

// execRun is one run of exec.
type execRun struct {
	cfg       *execConfig
	e         *env
	statusKey string            // the key whose Status explains a failed acquire
	open      []*redlock.Client // the Clients to close when the run ends
}

// contended reads the Status that explains a failed acquire: of the key, or of the first key
// of a multi-key lock that some node reports held (the last key's when none is).
func (x *execRun) contended(ctx context.Context, dc *redlock.Client) (*redlock.Status, error) {
	var st *redlock.Status
	var err error
	keys := x.cfg.keys
	if x.cfg.election != "" {
		keys = []string{dc.Election(x.cfg.election).Key()}
	}
	for _, k := range keys {
		x.statusKey = k
		st, err = dc.Status(ctx, k)
		if err != nil {
			return nil, err
		}
		for _, ns := range st.Nodes {
			if ns.Holder != "" {
				return st, nil
			}
		}
	}
	return st, nil
}

// describeHolder is describeHolder for exec's lock: for several keys it names the key.
func (x *execRun) describeHolder(st *redlock.Status) string {
	if len(x.cfg.keys) == 1 {
		return describeHolder(st)
	}
	return fmt.Sprintf("key %q: %s", x.statusKey, describeHolder(st))
}

// errNotStarted is returned by Do's function when the lock was granted just as the
// acquire was being given up (--wait ran out, or a signal came): the command is not started.
var errNotStarted = errors.New("lock granted too late: the command was not started")

// run takes the lock on the nodes, runs the command under it, and returns exec's outcome:
// nil or an *exitError with the command's status, or why the lock was not taken or was
// lost.
func (x *execRun) run(ctx context.Context, urls []nodeURL) error {
	cfg := x.cfg
	// The signals are ours from here on. Until the command starts they abort the acquire;
	// afterwards they go to the command. main's context is not used: it ends on SIGINT and
	// SIGTERM, which must not cancel a running command's lock.
	acqCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abort(nil)
	r := startRouter(abort, cfg.wait)
	defer r.stop()

	opts := append(x.clientOptions(), redlock.WithObserver(attemptObserver{r: r})) // --wait's end needs the attempts
	clients := dialNodes(urls)
	c, err := redlock.New(clients, opts...)
	if err != nil {
		closeClients(clients)
		return usageErrorf("exec: %s", bare(err))
	}
	// The lock is released (or lost) before this runs; what the Clients still send (the
	// release to a slow node) gets one node timeout, not a hung node's read timeout.
	x.open = append(x.open, c)
	defer func() { shutdown(clients, cfg.nodeTimeout, x.open...) }()

	if cfg.keys[0] == "" { // checked again by the library; here so that it is not a PING error
		return usageErrorf("exec: %s is empty", cfg.argName())
	}
	if !cfg.verbose { // --verbose shows the library's own warning
		warnEvenNodes(x.e.stderr, cfg.command(), len(urls), c.Quorum(), cfg.amnesia)
	}
	if err := x.preflight(acqCtx, urls, c.Quorum()); err != nil {
		if intr, ok := errors.AsType[*interrupted](context.Cause(acqCtx)); ok {
			return x.interruptedErr(intr)
		}
		return err
	}
	wait := "wait " + cfg.wait.String()
	if cfg.wait == 0 && cfg.elect {
		wait = "waiting until elected" // elect without --wait has no limit
	}
	x.notef("taking %s on %d nodes (quorum %d), ttl %v, %s", cfg.subject(), len(urls), c.Quorum(), cfg.ttl, wait)
	r.startWait() // --wait counts from here, not the preflight
	res, err := x.hold(acqCtx, c, r)
	return x.outcome(acqCtx, clients, res, err)
}

// warnEvenNodes prints one line to w when n nodes are even and amnesia tolerance is 0: such
// a quorum tolerates no more failed nodes than one node fewer would (redlock.New logs the
// same to its logger).
func warnEvenNodes(w io.Writer, command string, n, quorum, amnesia int) {
	if n%2 != 0 || amnesia != 0 {
		return
	}
	fmt.Fprintf(w, "redlock: %s: warning: %d nodes, quorum %d: a majority of an even number of nodes tolerates no more failed nodes than one node fewer would (%d here); use an odd number (the Redlock algorithm's description uses 5)\n",
		command, n, quorum, n-quorum)
}

// clientOptions are the options of exec's Client: the command line's, a cancel margin that
// puts SIGTERM grace + killSafety and SIGKILL killSafety before the validity deadline, one
// attempt for --wait 0, and the library's log on stderr with --verbose.
func (x *execRun) clientOptions() []redlock.Option {
	cfg := x.cfg
	opts := []redlock.Option{
		redlock.WithNodeTimeout(cfg.nodeTimeout),
		redlock.WithAmnesiaTolerance(cfg.amnesia),
		redlock.WithLockDelay(cfg.lockDelay),
		redlock.WithCounterLayout(cfg.layout),
		// SIGTERM at Until − (grace + safety), SIGKILL at Until − safety.
		redlock.WithCancelMargin(float64(cfg.grace+killSafety(cfg.ttl)) / float64(cfg.ttl)),
	}
	if cfg.wait == 0 && cfg.election == "" {
		opts = append(opts, redlock.WithRetryLimit(1)) // one attempt, as TryAcquire (elect waits)
	}
	if cfg.verbose {
		opts = append(opts, redlock.WithLogger(verboseLogger(x.e.stderr)))
	}
	return opts
}

// hold takes the lock (Do for one key, DoMulti for several) and, once it is held, runs the
// command under it until the command and its group are gone. It returns what happened to
// the command, nil when it was not started, and Do's error.
func (x *execRun) hold(ctx context.Context, c *redlock.Client, r *router) (*childResult, error) {
	cfg := x.cfg
	var res *childResult
	run := func(fctx context.Context, h heldLock) error {
		if !r.begin() {
			return errNotStarted
		}
		x.notef("%s %s, %s %s, valid for %v; running %s", cfg.taken(), cfg.subject(), cfg.tokenName(), strings.Join(h.tokens, ","), time.Until(h.until()).Round(time.Millisecond), quoteArgs(cfg.argv))
		res = x.supervise(fctx, h, r.fwd)
		return res.startErr
	}
	var err error
	switch {
	case cfg.election != "":
		err = x.holdElection(ctx, c, run)
	case len(cfg.keys) == 1:
		err = c.Do(ctx, cfg.keys[0], cfg.ttl, func(fctx context.Context, l *redlock.Lock) error {
			return run(fctx, heldLock{env: []string{"REDLOCK_KEY=" + l.Key(), "REDLOCK_TOKEN=" + l.Token().String()},
				tokens: []string{l.Token().String()}, until: l.Until})
		})
	default:
		err = c.DoMulti(ctx, cfg.keys, cfg.ttl, func(fctx context.Context, m *redlock.MultiLock) error {
			var tokens []string
			for _, t := range m.Tokens() {
				tokens = append(tokens, t.String())
			}
			return run(fctx, heldLock{env: []string{"REDLOCK_KEYS=" + strings.Join(m.Keys(), "\n"), "REDLOCK_TOKENS=" + strings.Join(tokens, "\n")},
				tokens: tokens, until: m.Until})
		})
	}
	return res, err
}

// outcome turns what hold returned into exec's result: the command's exit status when the
// lock was held throughout, else the error that says what went wrong, with its exit status.
func (x *execRun) outcome(acqCtx context.Context, clients []redis.UniversalClient, res *childResult, err error) error {
	cfg := x.cfg
	switch {
	case res != nil && res.startErr != nil:
		return &exitError{code: exitCannotRun, err: fmt.Errorf("exec: cannot start %q: %v (the lock was released)", cfg.argv[0], unwrapExecErr(res.startErr))}
	case errors.Is(err, redlock.ErrLockLost) && res != nil:
		return &exitError{code: cfg.lostCode, err: fmt.Errorf("exec: %s lost while the command ran: %s; %s",
			cfg.subject(), lostDetail(err), res.describe())}
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("exec: bad %s or --ttl: %s", cfg.argName(), bare(err))
	case err != nil:
		return x.notAcquired(acqCtx, clients, err)
	}
	code, what := exitStatus(res.state)
	x.notef("command %s; %s released", what, cfg.subject())
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

// preflight checks that at least a quorum of nodes answers PING, so that a wrong address
// fails at once, with exit status 1, instead of looking like a lock held elsewhere.
func (x *execRun) preflight(ctx context.Context, urls []nodeURL, quorum int) error {
	errs := pingNodes(ctx, urls, quorum)
	ok := 0
	for _, err := range errs {
		ok += btoi(err == nil)
	}
	// Only when exec fails for them are the failed nodes probed for a wrong scheme
	// (schemeHint): a run that goes on does not wait for the probes.
	hint := func(_, msg string) string { return tlsHint(msg) }
	if ok < quorum {
		probeFailures(urlAddrs(urls), errs)
		hint = withNodeHint
	}
	var failed []string
	for i, err := range errs {
		if err != nil && !errors.Is(err, errNotWaited) {
			failed = append(failed, fmt.Sprintf("node %s: %s", urls[i].opts.Addr, hint(urls[i].opts.Addr, err.Error())))
		}
	}
	if ok >= quorum {
		for _, f := range failed {
			x.notef("%s (a quorum answered: going on)", f)
		}
		return nil
	}
	return fmt.Errorf("exec: only %d of %d nodes answered PING, quorum is %d: %s", ok, len(urls), quorum, strings.Join(failed, "; "))
}

// notAcquired turns a failed acquire into exec's error: a signal, the conflict code when
// the lock is held elsewhere, or a failure when too few nodes answer to tell.
func (x *execRun) notAcquired(acqCtx context.Context, clients []redis.UniversalClient, err error) error {
	cfg := x.cfg
	cause := context.Cause(acqCtx)
	if intr, ok := errors.AsType[*interrupted](cause); ok {
		return x.interruptedErr(intr)
	}
	how := "--wait 0"
	if cfg.wait > 0 {
		how = fmt.Sprintf("waited %v", cfg.wait)
	}
	// Say who holds it: one more read of every node, with a client that waits longer for
	// each node than the acquire did, so that a slow node is not mistaken for a dead one.
	dc, derr := redlock.New(clients, redlock.WithNodeTimeout(max(cfg.nodeTimeout, diagnoseTimeout)), redlock.WithAmnesiaTolerance(cfg.amnesia),
		redlock.WithCounterLayout(cfg.layout))
	if derr != nil {
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: %s not %s (%s): %s", cfg.subject(), cfg.taken(), how, attemptDetail(err))}
	}
	x.open = append(x.open, dc) // closed with the other at the end of the run
	st, serr := x.contended(context.WithoutCancel(acqCtx), dc)
	switch {
	case serr != nil:
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: %s not %s (%s): %s", cfg.subject(), cfg.taken(), how, attemptDetail(err))}
	case answered(st) < st.Quorum:
		probeFailed(st)
		var failed []string
		for _, ns := range st.Nodes {
			if ns.Err != nil {
				failed = append(failed, fmt.Sprintf("node %s: %s", ns.Addr, nodeErrText(ns.Err)))
			}
		}
		return fmt.Errorf("exec: %s not %s: only %d of %d nodes answered, quorum is %d; %s",
			cfg.subject(), cfg.taken(), answered(st), len(st.Nodes), st.Quorum, strings.Join(failed, "; "))
	case !st.HeldByQuorum():
		// Free now: the holder let go just after our attempt, or the attempt failed for
		// another reason (a split vote, slow nodes); its own error says which.
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: %s not %s (%s): %s; the attempt: %s",
			cfg.subject(), cfg.taken(), how, x.describeHolder(st), attemptDetail(err))}
	}
	return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: %s not %s (%s): %s%s", cfg.subject(), cfg.taken(), how,
		x.leaderDetail(context.WithoutCancel(acqCtx), dc), x.describeHolder(st))}
}

// leaderDetail is, for elect, who leads the election that was not won: `led by "VALUE"
// (term T); `, read from a quorum; "" for exec, or when the leader cannot be read.
func (x *execRun) leaderDetail(ctx context.Context, dc *redlock.Client) string {
	if x.cfg.election == "" {
		return ""
	}
	info, err := dc.Election(x.cfg.election).Leader(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("led by %s (term %v); ", cutQuote(info.Value, 64), info.Term)
}

func (x *execRun) interruptedErr(intr *interrupted) error {
	return &exitError{code: 128 + signalNumber(intr.sig),
		err: fmt.Errorf("exec: %s while waiting for %s; the command did not run", intr, x.cfg.subject())}
}

// notef prints a notice on stderr with --verbose.
func (x *execRun) notef(format string, args ...any) {
	if x.cfg.verbose {
		fmt.Fprintf(x.e.stderr, "redlock: "+x.cfg.command()+": "+format+"\n", args...)
	}
}

// quoteArgs joins a command line for a message, so that a reader can tell where each
// argument starts and ends: an argument that is empty or holds anything but letters, digits
// and "-_./:=,+@%" is quoted as a Go string (strconv.Quote), the others are left bare.
func quoteArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		bare := a != ""
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r)) {
				bare = false
				break
			}
		}
		if bare {
			out[i] = a
		} else {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}

// verboseLogger prints the library's log records on w, one line each, without timestamps.
func verboseLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
