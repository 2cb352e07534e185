//go:build unix

package main

// exec's command line: its flags and their defaults, the checks that every value passes
// before anything is sent to a node, and the timing rules that tie --grace to --ttl.

import (
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
)

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

// maxGraceFor is the longest grace that fits ttl: grace + killSafety(ttl) ≤ ttl/2.
func maxGraceFor(ttl time.Duration) time.Duration { return ttl/2 - killSafety(ttl) }

// fillDefaults cuts --ttl to whole milliseconds, as the library does (Redis keeps TTLs in
// milliseconds), so that the checks and messages use the TTL the lock gets, and sets --grace,
// when it was not given, to the default that fits that TTL.
func (cfg *execConfig) fillDefaults(fs *flag.FlagSet) {
	cfg.ttl = cfg.ttl.Truncate(time.Millisecond)
	if !flagSet(fs, "grace") {
		cfg.grace = defaultGrace(cfg.ttl)
	}
}

// minTTLFor returns the shortest ttl in whole milliseconds that fits grace (grace +
// killSafety(ttl) ≤ ttl/2), rounded up so that it fits; ok is false when no ttl up to
// MaxTTL does.
func minTTLFor(grace time.Duration) (ttl time.Duration, ok bool) {
	if grace > maxGraceFor(redlock.MaxTTL) {
		return 0, false
	}
	// 2 (grace + 250ms) while the safety is its floor, 2.5 grace above it (grace ≤ 3504h
	// here, so 5 grace does not overflow); then up to a whole millisecond.
	ttl = max(2*(grace+minKillSafety), (5*grace+1)/2)
	if r := ttl % time.Millisecond; r != 0 {
		ttl += time.Millisecond - r
	}
	for grace > maxGraceFor(ttl) { // integer division's rounding
		ttl += time.Millisecond
	}
	return ttl, ttl <= redlock.MaxTTL
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
	election     string // elect: the election's name (keys holds it too); "" for exec
	elect        bool   // the command is elect (its NAME may be "": a usage error, said as elect's)
	value        string // elect: the value to proclaim
}

// execSynopsis is exec's synopsis, quoted by the errors about its positional arguments.
const execSynopsis = "redlock exec [flags] KEY -- CMD [ARGS...]"

// parseExec parses "[flags] KEY -- CMD [ARGS...]" (flags may also follow KEY) and checks
// every value, so that nothing is sent to a node for a bad command line.
func parseExec(e *env, args []string) (*execConfig, error) {
	fs := newFlagSet("exec", "[flags] KEY -- CMD [ARGS...]", execAbout)
	cfg := &execConfig{}
	keyFlags := registerExecFlags(fs, cfg)
	dash := slices.Index(args, "--")
	before := args
	if dash >= 0 {
		before = args[:dash]
	}
	pos, err := parseInterspersed(fs, e, before)
	if err != nil {
		return nil, err
	}
	switch {
	case dash < 0:
		return nil, usageErrorf(`exec: missing "--" before the command: %s`, execSynopsis)
	case len(pos) == 0 && len(*keyFlags) == 0:
		return nil, usageErrorf("exec: missing KEY: %s", execSynopsis)
	case len(pos) > 1:
		return nil, usageErrorf(`exec: unexpected argument %q before "--": %s`, pos[1], execSynopsis)
	case dash == len(args)-1:
		return nil, usageErrorf(`exec: missing the command after "--": %s`, execSynopsis)
	}
	cfg.keys, cfg.argv = append(pos, *keyFlags...), args[dash+1:]
	if err := checkKeys(cfg.keys, *keyFlags); err != nil {
		return nil, err
	}
	cfg.fillDefaults(fs)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// Find the command before touching the lock: a typo must not take it.
	if cfg.path, err = lookCommand(cfg.argv[0]); err != nil {
		return nil, err
	}
	return cfg, nil
}

// registerExecFlags defines exec's flags on fs, each writing to its field of cfg, with the
// defaults of a lock of one key. It returns the keys given with --key, as they are parsed.
func registerExecFlags(fs *flag.FlagSet, cfg *execConfig) *[]string {
	keyFlags := new([]string)
	fs.Func("key", "a `KEY` of a lock over several keys: repeat it, or give a comma-separated list (a key that contains a comma goes as the KEY argument); KEY may then be left out", func(v string) error {
		*keyFlags = append(*keyFlags, strings.Split(v, ",")...)
		return nil
	})
	fs.StringVar(&cfg.nodesFlag, "nodes", "", "comma-separated `URLS` of the Redis nodes (default $"+nodesEnv+")")
	cfg.ttl = execDefaultTTL
	fs.Var((*durationFlag)(&cfg.ttl), "ttl", "lock TTL (a `DURATION`, at least 500ms); renewed every ttl/3 while CMD runs")
	fs.Var((*durationFlag)(&cfg.wait), "wait", "how long (a `DURATION`) to keep trying while the lock is held elsewhere, counted once the nodes answered PING;\nthe first attempt always completes, so a free lock is taken with any wait; 0: one attempt, then fail at once (default 0s)")
	fs.Var((*durationFlag)(&cfg.grace), "grace", "time (a `DURATION`) between SIGTERM and SIGKILL when the lock is lost; grace + max(250ms, ttl/10) ≤ ttl/2\n(default 5s, less when --ttl is below 12.5s: ttl/2 − max(250ms, ttl/10))")
	intVar(fs, &cfg.conflictCode, "conflict-exit-code", defaultConflictExitCode, "exit status (`N`, 1..255) when the lock is not acquired")
	intVar(fs, &cfg.lostCode, "lost-exit-code", defaultLostExitCode, "exit status (`N`, 1..255) when the lock is lost while CMD runs")
	durationVar(fs, &cfg.nodeTimeout, "node-timeout", cliNodeTimeout, "how long (a `DURATION`) one call waits for one node")
	intVar(fs, &cfg.amnesia, "amnesia-tolerance", redlock.DefaultAmnesiaTolerance, "`F` as in the library's WithAmnesiaTolerance: raises the quorum; must match the lock's other users")
	fs.Var((*durationFlag)(&cfg.lockDelay), "lock-delay", "as the library's WithLockDelay: if this lock lapses without a release (redlock killed, the machine paused), nobody can take it\nfor a further `DURATION`; a release clears it; ttl + lock-delay ≤ "+redlock.MaxTTL.String()+" (default 0s: none)")
	fs.Var((*layoutFlag)(&cfg.layout), "counter-layout", layoutUsage(";\nslot: one counter per hash slot per node, tokens grow with gaps; key: one per key, consecutive tokens per key"))
	cfg.tls.register(fs)
	fs.BoolVar(&cfg.keepNodeEnv, "keep-node-env", false, "pass $"+nodesEnv+", $"+nodesFileEnv+" and $"+authEnv+" on to CMD (by default they are removed from its environment: they may hold passwords)")
	fs.BoolVar(&cfg.verbose, "verbose", false, "say on stderr what redlock does (acquire, token, renewal failures, release)")
	fs.BoolVar(&cfg.verbose, "v", false, "short for --verbose")
	return keyFlags
}

// checkKeys checks the keys of a lock over several keys: none empty, none with a newline
// (which separates them in $REDLOCK_KEYS), none twice. A single key is left to the library.
func checkKeys(keys, keyFlags []string) error {
	if len(keys) <= 1 {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range keys {
		switch {
		case k == "":
			return usageErrorf("exec: an empty key in --key %q", strings.Join(keyFlags, ","))
		case strings.ContainsRune(k, '\n'):
			return usageErrorf("exec: key %q contains a newline, which $REDLOCK_KEYS uses to separate keys", k)
		case seen[k]:
			return usageErrorf("exec: key %q is given twice", k)
		}
		seen[k] = true
	}
	return nil
}

// check checks the durations and exit codes of the command line, --grace against --ttl.
func (cfg *execConfig) check() error {
	switch {
	case cfg.ttl < execMinTTL || cfg.ttl > redlock.MaxTTL:
		return usageErrorf("exec: --ttl %v must be at least %v (room for renewals and for stopping CMD before the deadline) and at most %v", cfg.ttl, execMinTTL, redlock.MaxTTL)
	case cfg.lockDelay < 0:
		return usageErrorf("exec: --lock-delay %v is negative", cfg.lockDelay)
	case cfg.lockDelay%time.Millisecond != 0:
		return usageErrorf("exec: --lock-delay %v is not a whole number of milliseconds", cfg.lockDelay)
	case cfg.lockDelay > redlock.MaxTTL-cfg.ttl:
		return usageErrorf("exec: --ttl %v plus --lock-delay %v exceeds %v", cfg.ttl, cfg.lockDelay, redlock.MaxTTL)
	case cfg.wait < 0:
		return usageErrorf("exec: --wait %v is negative; use 0 to fail at once, or how long to keep trying", cfg.wait)
	case cfg.grace < 0:
		return usageErrorf("exec: --grace %v is negative", cfg.grace)
	case cfg.grace > maxGraceFor(cfg.ttl):
		use := fmt.Sprintf("--grace can be at most %v, for --ttl %v", maxGraceFor(redlock.MaxTTL), redlock.MaxTTL)
		if ttl, ok := minTTLFor(cfg.grace); ok {
			use = fmt.Sprintf("use a --ttl of at least %v, or a --grace of at most %v", ttl, maxGraceFor(cfg.ttl))
			if maxGraceFor(cfg.ttl) <= 0 {
				use = fmt.Sprintf("use a --ttl of at least %v, or --grace 0", ttl)
			}
		}
		return usageErrorf("exec: --grace %v does not fit in --ttl %v: a lost lock's command gets SIGTERM grace + %v before the lock's deadline, "+
			"which must be at most half the ttl; %s", cfg.grace, cfg.ttl, killSafety(cfg.ttl), use)
	case cfg.nodeTimeout <= 0:
		return usageErrorf("exec: --node-timeout %v must be positive", cfg.nodeTimeout)
	case cfg.conflictCode < 1 || cfg.conflictCode > 255:
		return usageErrorf("exec: --conflict-exit-code %d is outside 1..255", cfg.conflictCode)
	case cfg.lostCode < 1 || cfg.lostCode > 255:
		return usageErrorf("exec: --lost-exit-code %d is outside 1..255", cfg.lostCode)
	}
	return nil
}

// lookCommand finds the command on PATH, as the shell would: exit status 127 when it is not
// found, 126 when what is found cannot run.
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		code := exitNotFound
		if errors.Is(err, iofs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
			code = exitCannotRun // found, but not something that can run: 126, as shells say
		}
		return "", &exitError{code: code, err: fmt.Errorf("exec: cannot run %q: %v", name, unwrapExecErr(err))}
	}
	return path, nil
}

// subject names what exec (or elect) takes, in messages: lock "KEY", lock ["K1" "K2"] for
// several keys, or election "NAME".
func (cfg *execConfig) subject() string {
	if cfg.elect {
		return "election " + strconv.Quote(cfg.election)
	}
	if len(cfg.keys) == 1 {
		return "lock " + strconv.Quote(cfg.keys[0])
	}
	q := make([]string, len(cfg.keys))
	for i, k := range cfg.keys {
		q[i] = strconv.Quote(k)
	}
	return "lock [" + strings.Join(q, " ") + "]"
}

// command is the command's name in messages: elect for an election, else exec.
func (cfg *execConfig) command() string {
	if cfg.elect {
		return "elect"
	}
	return "exec"
}

// argName is what the command line names the subject: NAME for elect, KEY for exec.
func (cfg *execConfig) argName() string {
	if cfg.elect {
		return "NAME"
	}
	return "KEY"
}

// tokenName is what the command's messages call its fencing token: a leadership's term
// (REDLOCK_TERM) for elect, the lock's token (REDLOCK_TOKEN) for exec.
func (cfg *execConfig) tokenName() string {
	if cfg.elect {
		return "term"
	}
	return "token"
}

// taken is the verb of taking the subject: a lock is acquired, an election won.
func (cfg *execConfig) taken() string {
	if cfg.elect {
		return "won"
	}
	return "acquired"
}
