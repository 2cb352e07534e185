//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

const execAbout = `
Runs CMD while holding the lock KEY (or, with --key, one lock over several keys) on the Redis nodes (--nodes, else $REDLOCK_NODES, else
the file named by $REDLOCK_NODES_FILE; $REDISCLI_AUTH is the password of nodes whose URL
has none), and
releases the lock once CMD has exited. While CMD runs the lock is renewed every ttl/3.

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

const (
	execDefaultTTL   = 30 * time.Second
	execDefaultGrace = 5 * time.Second
	// minKillSafety is the smallest allowance between SIGKILL and the lock's validity
	// deadline; see killSafety.
	minKillSafety = 250 * time.Millisecond
	// diagnoseTimeout is the node timeout of the status read that explains a failed acquire.
	diagnoseTimeout = 2 * time.Second

	defaultConflictExitCode = 75 // EX_TEMPFAIL in sysexits.h
	defaultLostExitCode     = 76
	exitCannotRun           = 126
	exitNotFound            = 127
)

// killSafety is how long before the lock's validity deadline SIGKILL goes out at the
// latest: a tenth of the ttl, at least 250ms (3s for the default 30s). It absorbs the
// delays between the renewer's cancellation, the SIGTERM, the grace timer and the SIGKILL,
// which grow when the machine is busy and redlock is not scheduled for a while; on a long
// lock a generous allowance costs nothing until the lock is lost.
func killSafety(ttl time.Duration) time.Duration {
	return max(minKillSafety, ttl/10)
}

// execMinTTL is the shortest --ttl: the one for which the default grace is 0.
const execMinTTL = 500 * time.Millisecond

// defaultGrace is --grace when it is not given: 5s, or as much as fits in a shorter ttl
// (grace + killSafety(ttl) ≤ ttl/2), so that every accepted --ttl works on its own.
func defaultGrace(ttl time.Duration) time.Duration {
	return max(0, min(execDefaultGrace, ttl/2-killSafety(ttl)))
}

// minTTLFor returns the shortest ttl that fits grace: grace + killSafety(ttl) ≤ ttl/2.
func minTTLFor(grace time.Duration) time.Duration {
	return max(2*(grace+minKillSafety), grace*5/2).Round(time.Millisecond)
}

// execConfig is exec's parsed and validated command line.
type execConfig struct {
	keys         []string // one key, or the keys of a multi-key lock
	argv         []string
	path         string // argv[0] resolved on PATH
	nodesFlag    string
	ttl          time.Duration
	wait         time.Duration
	grace        time.Duration
	nodeTimeout  time.Duration
	amnesia      int
	lockDelay    time.Duration
	layout       redlock.CounterLayout // --counter-layout
	conflictCode int
	lostCode     int
	verbose      bool
	keepNodeEnv  bool
	tls          tlsFlags
}

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

// parseExec parses "[flags] KEY -- CMD [ARGS...]" (flags may also follow KEY) and checks
// every value, so that nothing is sent to a node for a bad command line.
func parseExec(e *env, args []string) (*execConfig, error) {
	fs := newFlagSet("exec", "[flags] KEY -- CMD [ARGS...]", execAbout)
	cfg := &execConfig{}
	var keyFlags []string
	fs.Func("key", "a `KEY` of a lock over several keys: repeat it, or give a comma-separated list (a key that contains a comma goes as the KEY argument); KEY may then be left out", func(v string) error {
		keyFlags = append(keyFlags, strings.Split(v, ",")...)
		return nil
	})
	fs.StringVar(&cfg.nodesFlag, "nodes", "", "comma-separated `URLS` of the Redis nodes (default $"+nodesEnv+")")
	cfg.ttl = execDefaultTTL
	fs.Var((*durationFlag)(&cfg.ttl), "ttl", "lock TTL (a `DURATION`, at least 500ms); renewed every ttl/3 while CMD runs")
	fs.Var((*durationFlag)(&cfg.wait), "wait", "how long (a `DURATION`) to keep trying while the lock is held elsewhere; 0: fail at once (default 0s)")
	fs.Var((*durationFlag)(&cfg.grace), "grace", "time (a `DURATION`) between SIGTERM and SIGKILL when the lock is lost; grace + max(250ms, ttl/10) ≤ ttl/2\n(default 5s, less when --ttl is below 12.5s: ttl/2 − max(250ms, ttl/10))")
	fs.IntVar(&cfg.conflictCode, "conflict-exit-code", defaultConflictExitCode, "exit status when the lock is not acquired")
	fs.IntVar(&cfg.lostCode, "lost-exit-code", defaultLostExitCode, "exit status when the lock is lost while CMD runs")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", cliNodeTimeout, "how long one call waits for one node")
	fs.IntVar(&cfg.amnesia, "amnesia-tolerance", redlock.DefaultAmnesiaTolerance, "`F` as in the library's WithAmnesiaTolerance: raises the quorum; must match the lock's other users")
	fs.Var((*durationFlag)(&cfg.lockDelay), "lock-delay", "as the library's WithLockDelay: if this lock lapses without a release (redlock killed, the machine paused), nobody can take it\nfor a further `DURATION`; a release clears it; ttl + lock-delay ≤ "+redlock.MaxTTL.String()+" (default 0s: none)")
	fs.Var((*layoutFlag)(&cfg.layout), "counter-layout", layoutUsage(";\nslot: one counter per hash slot per node, tokens grow with gaps; key: one per key, consecutive tokens per key"))
	cfg.tls.register(fs)
	fs.BoolVar(&cfg.keepNodeEnv, "keep-node-env", false, "pass $"+nodesEnv+", $"+nodesFileEnv+" and $"+authEnv+" on to CMD (by default they are removed from its environment: they may hold passwords)")
	fs.BoolVar(&cfg.verbose, "verbose", false, "say on stderr what redlock does (acquire, token, renewal failures, release)")
	fs.BoolVar(&cfg.verbose, "v", false, "short for --verbose")

	dash := slices.Index(args, "--")
	before := args
	if dash >= 0 {
		before = args[:dash]
	}
	pos, err := parseInterspersed(fs, e, before)
	if err != nil {
		return nil, err
	}
	const synopsis = "redlock exec [flags] KEY -- CMD [ARGS...]"
	switch {
	case dash < 0:
		return nil, usageErrorf(`exec: missing "--" before the command: %s`, synopsis)
	case len(pos) == 0 && len(keyFlags) == 0:
		return nil, usageErrorf("exec: missing KEY: %s", synopsis)
	case len(pos) > 1:
		return nil, usageErrorf(`exec: unexpected argument %q before "--": %s`, pos[1], synopsis)
	case dash == len(args)-1:
		return nil, usageErrorf(`exec: missing the command after "--": %s`, synopsis)
	}
	cfg.keys, cfg.argv = append(pos, keyFlags...), args[dash+1:]
	if len(cfg.keys) > 1 {
		seen := map[string]bool{}
		for _, k := range cfg.keys {
			switch {
			case k == "":
				return nil, usageErrorf("exec: an empty key in --key %q", strings.Join(keyFlags, ","))
			case strings.ContainsRune(k, '\n'):
				return nil, usageErrorf("exec: key %q contains a newline, which $REDLOCK_KEYS uses to separate keys", k)
			case seen[k]:
				return nil, usageErrorf("exec: key %q is given twice", k)
			}
			seen[k] = true
		}
	}

	if !flagSet(fs, "grace") {
		cfg.grace = defaultGrace(cfg.ttl)
	}
	switch {
	case cfg.ttl < execMinTTL || cfg.ttl > redlock.MaxTTL:
		return nil, usageErrorf("exec: --ttl %v must be at least %v (room for renewals and for stopping CMD before the deadline) and at most %v", cfg.ttl, execMinTTL, redlock.MaxTTL)
	case cfg.lockDelay < 0:
		return nil, usageErrorf("exec: --lock-delay %v is negative", cfg.lockDelay)
	case cfg.lockDelay%time.Millisecond != 0:
		return nil, usageErrorf("exec: --lock-delay %v is not a whole number of milliseconds", cfg.lockDelay)
	case cfg.lockDelay > redlock.MaxTTL-cfg.ttl:
		return nil, usageErrorf("exec: --ttl %v plus --lock-delay %v exceeds %v", cfg.ttl, cfg.lockDelay, redlock.MaxTTL)
	case cfg.wait < 0:
		return nil, usageErrorf("exec: --wait %v is negative; use 0 to fail at once, or how long to keep trying", cfg.wait)
	case cfg.grace < 0:
		return nil, usageErrorf("exec: --grace %v is negative", cfg.grace)
	case cfg.grace+killSafety(cfg.ttl) > cfg.ttl/2:
		return nil, usageErrorf("exec: --grace %v does not fit in --ttl %v: a lost lock's command gets SIGTERM grace + %v before the lock's deadline, "+
			"which must be at most half the ttl; use a --ttl of at least %v", cfg.grace, cfg.ttl, killSafety(cfg.ttl), minTTLFor(cfg.grace))
	case cfg.nodeTimeout <= 0:
		return nil, usageErrorf("exec: --node-timeout %v must be positive", cfg.nodeTimeout)
	case cfg.conflictCode < 1 || cfg.conflictCode > 255:
		return nil, usageErrorf("exec: --conflict-exit-code %d is outside 1..255", cfg.conflictCode)
	case cfg.lostCode < 1 || cfg.lostCode > 255:
		return nil, usageErrorf("exec: --lost-exit-code %d is outside 1..255", cfg.lostCode)
	}

	// Find the command before touching the lock: a typo must not take it.
	path, err := exec.LookPath(cfg.argv[0])
	if err != nil {
		code := exitNotFound
		if errors.Is(err, iofs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
			code = exitCannotRun // found, but not something that can run: 126, as shells say
		}
		return nil, &exitError{code: code, err: fmt.Errorf("exec: cannot run %q: %v", cfg.argv[0], unwrapExecErr(err))}
	}
	cfg.path = path
	return cfg, nil
}

// unwrapExecErr drops the 'exec: "name": ' prefix of os/exec's errors.
func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// lockName names exec's lock in messages: the quoted key, or the quoted keys in brackets.
func (cfg *execConfig) lockName() string {
	if len(cfg.keys) == 1 {
		return strconv.Quote(cfg.keys[0])
	}
	q := make([]string, len(cfg.keys))
	for i, k := range cfg.keys {
		q[i] = strconv.Quote(k)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// lostDetail says why the lock was lost (err matches redlock.ErrLockLost): the outcome of
// the failed renewal when the library reports one (a *redlock.QuorumError), else what
// ErrLockLost means.
func lostDetail(err error) string {
	lle, ok := errors.AsType[*redlock.LockLostError](err)
	if !ok {
		return "no renewal was confirmed in time"
	}
	qe, hasQE := errors.AsType[*redlock.QuorumError](lle.Cause)
	switch {
	case lle.Refused && hasQE:
		return "the keys are gone from a quorum of nodes: " + quorumDetail(qe)
	case hasQE:
		return fmt.Sprintf("no renewal confirmed %v before the validity deadline; the last renewal: %s", lle.Margin, quorumDetail(qe))
	case lle.Late == redlock.LateRenewerLate:
		return fmt.Sprintf("no renewal tried in the %v before the validity deadline (redlock was paused or starved of CPU)", lle.Margin)
	}
	return fmt.Sprintf("no renewal confirmed %v before the validity deadline", lle.Margin)
}

// attemptDetail describes a failed acquire from the library's *redlock.QuorumError, or,
// when there is none (the acquire ended before an attempt), from the error's message.
func attemptDetail(err error) string {
	if qe, ok := errors.AsType[*redlock.QuorumError](err); ok {
		return quorumDetail(qe)
	}
	return bare(err)
}

// quorumDetail describes an operation that a quorum did not confirm, from the error's
// fields: the vote, the cause beyond the nodes' errors, and each node's error.
func quorumDetail(qe *redlock.QuorumError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d nodes agreed, quorum is %d", qe.Op, qe.Agreed, qe.Total, qe.Quorum)
	if qe.Cause != nil {
		b.WriteString(": " + bare(qe.Cause))
	}
	if qe.Nodes != nil {
		for _, err := range qe.Nodes.Errors {
			b.WriteString("; ")
			if ne, ok := errors.AsType[*redlock.NodeError](err); ok {
				fmt.Fprintf(&b, "node %d", ne.Node)
				if ne.Addr != "" {
					fmt.Fprintf(&b, " (%s)", ne.Addr)
				}
				b.WriteString(": " + nodeErrText(ne))
				continue
			}
			b.WriteString(bare(err))
		}
	}
	return b.String()
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
	for _, k := range x.cfg.keys {
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

func (x *execRun) run(ctx context.Context, urls []nodeURL) error {
	cfg := x.cfg
	opts := []redlock.Option{
		redlock.WithNodeTimeout(cfg.nodeTimeout),
		redlock.WithAmnesiaTolerance(cfg.amnesia),
		redlock.WithLockDelay(cfg.lockDelay),
		redlock.WithCounterLayout(cfg.layout),
		// SIGTERM at Until − (grace + safety), SIGKILL at Until − safety.
		redlock.WithCancelMargin(float64(cfg.grace+killSafety(cfg.ttl)) / float64(cfg.ttl)),
	}
	if cfg.wait == 0 {
		opts = append(opts, redlock.WithRetryLimit(1)) // one attempt, as TryAcquire
	}
	if cfg.verbose {
		opts = append(opts, redlock.WithLogger(verboseLogger(x.e.stderr)))
	}
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

	// The signals are ours from here on. Until the command starts they abort the acquire;
	// afterwards they go to the command. main's context is not used: it ends on SIGINT and
	// SIGTERM, which must not cancel a running command's lock.
	acqCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abort(nil)
	r := startRouter(abort, cfg.wait)
	defer r.stop()

	if cfg.keys[0] == "" { // checked again by the library; here so that it is not a PING error
		return usageErrorf("exec: KEY is empty")
	}
	if err := x.preflight(acqCtx, urls, c.Quorum()); err != nil {
		if intr, ok := errors.AsType[*interrupted](context.Cause(acqCtx)); ok {
			return x.interruptedErr(intr)
		}
		return err
	}
	x.notef("acquiring %s on %d nodes (quorum %d), ttl %v, wait %v", cfg.lockName(), len(urls), c.Quorum(), cfg.ttl, cfg.wait)

	var res *childResult
	run := func(fctx context.Context, h heldLock) error {
		if !r.begin() {
			return errNotStarted
		}
		x.notef("acquired %s, token %s, valid for %v; running %s", cfg.lockName(), strings.Join(h.tokens, ","), time.Until(h.until()).Round(time.Millisecond), strings.Join(cfg.argv, " "))
		res = x.supervise(fctx, h, r.fwd)
		return res.startErr
	}
	if len(cfg.keys) == 1 {
		err = c.Do(acqCtx, cfg.keys[0], cfg.ttl, func(fctx context.Context, l *redlock.Lock) error {
			return run(fctx, heldLock{env: []string{"REDLOCK_KEY=" + l.Key(), "REDLOCK_TOKEN=" + l.Token().String()},
				tokens: []string{l.Token().String()}, until: l.Until})
		})
	} else {
		err = c.DoMulti(acqCtx, cfg.keys, cfg.ttl, func(fctx context.Context, m *redlock.MultiLock) error {
			var tokens []string
			for _, t := range m.Tokens() {
				tokens = append(tokens, t.String())
			}
			return run(fctx, heldLock{env: []string{"REDLOCK_KEYS=" + strings.Join(m.Keys(), "\n"), "REDLOCK_TOKENS=" + strings.Join(tokens, "\n")},
				tokens: tokens, until: m.Until})
		})
	}
	switch {
	case res != nil && res.startErr != nil:
		return &exitError{code: exitCannotRun, err: fmt.Errorf("exec: cannot start %q: %v (the lock was released)", cfg.argv[0], unwrapExecErr(res.startErr))}
	case errors.Is(err, redlock.ErrLockLost) && res != nil:
		return &exitError{code: cfg.lostCode, err: fmt.Errorf("exec: lock %s lost while the command ran: %s; %s",
			cfg.lockName(), lostDetail(err), res.describe())}
	case errors.Is(err, redlock.ErrInvalidArgument):
		return usageErrorf("exec: bad KEY or --ttl: %s", bare(err))
	case err != nil:
		return x.notAcquired(acqCtx, clients, err)
	}
	code, what := exitStatus(res.state)
	x.notef("command %s; lock %s released", what, cfg.lockName())
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
	var failed []string
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, errNotWaited):
			failed = append(failed, fmt.Sprintf("node %s: %s", urls[i].opts.Addr, tlsHint(err.Error())))
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
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: lock %s not acquired (%s): %s", cfg.lockName(), how, attemptDetail(err))}
	}
	x.open = append(x.open, dc) // closed with the other at the end of the run
	st, serr := x.contended(context.WithoutCancel(acqCtx), dc)
	switch {
	case serr != nil:
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: lock %s not acquired (%s): %s", cfg.lockName(), how, attemptDetail(err))}
	case answered(st) < st.Quorum:
		var failed []string
		for _, ns := range st.Nodes {
			if ns.Err != nil {
				failed = append(failed, fmt.Sprintf("node %s: %s", ns.Addr, nodeErrText(ns.Err)))
			}
		}
		return fmt.Errorf("exec: lock %s not acquired: only %d of %d nodes answered, quorum is %d; %s",
			cfg.lockName(), answered(st), len(st.Nodes), st.Quorum, strings.Join(failed, "; "))
	case !st.HeldByQuorum():
		// Free now: the holder let go just after our attempt, or the attempt failed for
		// another reason (a split vote, slow nodes); its own error says which.
		return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: lock %s not acquired (%s): %s; the attempt: %s",
			cfg.lockName(), how, x.describeHolder(st), attemptDetail(err))}
	}
	return &exitError{code: cfg.conflictCode, err: fmt.Errorf("exec: lock %s not acquired (%s): %s", cfg.lockName(), how, x.describeHolder(st))}
}

func (x *execRun) interruptedErr(intr *interrupted) error {
	return &exitError{code: 128 + signalNumber(intr.sig),
		err: fmt.Errorf("exec: %s while waiting for lock %s; the command did not run", intr, x.cfg.lockName())}
}

// notef prints a notice on stderr with --verbose.
func (x *execRun) notef(format string, args ...any) {
	if x.cfg.verbose {
		fmt.Fprintf(x.e.stderr, "redlock: exec: "+format+"\n", args...)
	}
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
