//go:build unix

package main

// redlock elect: runs a command while this process leads an election (exec's machinery,
// with the library's Election.Do), or, with --observe, prints every change of leader.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

const electAbout = `
Campaigns in the election NAME (the library's Client.Election) and, once this process is
the leader, runs CMD while it leads, exactly as exec runs a command while it holds a lock:
the leadership is renewed every ttl/3, CMD is stopped (SIGTERM, then SIGKILL after --grace)
before the leadership can lapse when renewals fail, and the leadership is resigned once CMD
has exited, which elects the next waiting candidate at once. Without --wait, elect waits
until it is elected; --wait D gives up after D (exit status 75).

CMD gets exec's environment (without the node variables) and:
  REDLOCK_ELECTION  the election's name
  REDLOCK_TERM      the leadership's term: its fencing token, larger than every earlier
                    leader's. Send it with every write, and have the store reject a term
                    lower than one it has seen: a deposed leader is refused there.
  REDLOCK_VALUE     the value this leader proclaimed (--value)

With --observe, elect runs no command and prints the election's leader, then every change
(a new term or value, or no leader), one line each: "term T value V", or "no leader";
with --json one JSON document a line: {"time","leader","term","value","id"}. It runs until
interrupted. An observer reads a quorum when the nodes announce a change and once a second
otherwise; it may miss a leadership shorter than one read, and never reports a term that was
not won.

Exit status: as exec's (CMD's own; 75 not elected within --wait; 76 the leadership was lost
while CMD ran; 126, 127; 128+N; 1; 2), and 0 for --observe ended by Ctrl-C or SIGTERM.`

// electSynopsis is elect's synopsis, quoted by the errors about its positional arguments.
const electSynopsis = "redlock elect [flags] NAME -- CMD [ARGS...], or redlock elect --observe [--json] NAME"

// electEnv are the variables elect sets for its command (besides exec's).
var electEnv = []string{"REDLOCK_ELECTION", "REDLOCK_TERM", "REDLOCK_VALUE"}

func runElect(ctx context.Context, e *env, args []string) error {
	cfg, observe, asJSON, err := parseElect(e, args)
	if err != nil {
		return relabel(err)
	}
	urls, _, err := realNodes(e, "elect", cfg.nodesFlag)
	if err != nil {
		return err
	}
	if err := cfg.tls.apply("elect", urls); err != nil {
		return err
	}
	if observe {
		return relabel(observeElection(ctx, e, cfg, urls, asJSON))
	}
	x := &execRun{cfg: cfg, e: e}
	return relabel(x.run(ctx, urls))
}

// parseElect parses elect's command line: exec's flags (but --key) with --value, --observe
// and --json.
func parseElect(e *env, args []string) (cfg *execConfig, observe, asJSON bool, err error) {
	fs := newFlagSet("elect", "[flags] NAME -- CMD [ARGS...]", electAbout)
	cfg = &execConfig{}
	keyFlags := registerExecFlags(fs, cfg)
	fs.Lookup("wait").Usage = "how long (a `DURATION`) to campaign before giving up (exit 75), counted once the nodes answered PING, the first attempt always completing; 0: until elected (default 0s)"
	fs.Lookup("key").Usage = "`KEY`: exec's only; elect refuses it (an election has one NAME)"
	fs.StringVar(&cfg.value, "value", "", "the `VALUE` this leader proclaims, at most 64 KiB (default the host name and redlock's pid, as host:pid)")
	fs.BoolVar(&observe, "observe", false, "print the leader and every change of leader instead of campaigning (no CMD)")
	fs.BoolVar(&asJSON, "json", false, "with --observe: one JSON document a line")
	dash := slices.Index(args, "--")
	before := args
	if dash >= 0 {
		before = args[:dash]
	}
	pos, err := parseInterspersed(fs, e, before)
	if err != nil {
		return nil, false, false, err
	}
	switch {
	case len(*keyFlags) > 0:
		return nil, false, false, usageErrorf("elect: --key is exec's; an election has one NAME: %s", electSynopsis)
	case len(pos) == 0:
		return nil, false, false, usageErrorf("elect: missing NAME: %s", electSynopsis)
	case len(pos) > 1:
		return nil, false, false, usageErrorf(`elect: unexpected argument %q: %s`, pos[1], electSynopsis)
	case asJSON && !observe:
		return nil, false, false, usageErrorf("elect: --json goes with --observe")
	case observe && dash >= 0:
		return nil, false, false, usageErrorf(`elect: --observe runs no command; drop "--" and what follows`)
	case !observe && dash < 0:
		return nil, false, false, usageErrorf(`elect: missing "--" before the command: %s`, electSynopsis)
	case !observe && dash == len(args)-1:
		return nil, false, false, usageErrorf(`elect: missing the command after "--": %s`, electSynopsis)
	case observe:
		if name := campaignFlag(fs); name != "" {
			return nil, false, false, usageErrorf("elect: %s is for campaigning and does nothing with --observe, which takes only --nodes, --node-timeout, --amnesia-tolerance, --json and the TLS flags", flagName(name))
		}
	}
	cfg.election, cfg.elect = pos[0], true
	cfg.keys = []string{pos[0]}
	if !flagSet(fs, "value") {
		host, _ := os.Hostname()
		cfg.value = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(cfg.value) > redlock.MaxValueLen {
		return nil, false, false, usageErrorf("elect: --value is %d bytes, more than %d", len(cfg.value), redlock.MaxValueLen)
	}
	cfg.fillDefaults(fs)
	if err := cfg.check(); err != nil {
		return nil, false, false, err
	}
	if observe {
		return cfg, true, asJSON, nil
	}
	cfg.argv = args[dash+1:]
	if cfg.path, err = lookCommand(cfg.argv[0]); err != nil {
		return nil, false, false, err
	}
	return cfg, false, false, nil
}

// observeFlags are the flags that elect --observe uses.
var observeFlags = []string{"observe", "json", "nodes", "node-timeout", "amnesia-tolerance", "tls-ca", "tls-cert", "tls-key"}

// campaignFlag returns the first flag given on the command line that --observe does not use
// (--ttl, --wait, --value, ...; those are for campaigning), "" when there is none.
func campaignFlag(fs *flag.FlagSet) string {
	name := ""
	fs.Visit(func(f *flag.Flag) {
		if name == "" && !slices.Contains(observeFlags, f.Name) {
			name = f.Name
		}
	})
	return name
}

// holdElection is exec's hold for elect: Election.Do, the command run while leading.
func (x *execRun) holdElection(ctx context.Context, c *redlock.Client, run func(context.Context, heldLock) error) error {
	cfg := x.cfg
	return c.Election(cfg.election).Do(ctx, cfg.value, cfg.ttl, func(fctx context.Context, l *redlock.Leadership) error {
		term := l.Term().String()
		return run(fctx, heldLock{env: []string{"REDLOCK_ELECTION=" + cfg.election, "REDLOCK_TERM=" + term, "REDLOCK_VALUE=" + l.Value()},
			tokens: []string{term}, until: l.Until})
	})
}

// observeDoc is one line of elect --observe --json. Its fields are documented in docs/cli.md.
type observeDoc struct {
	Time   string `json:"time"` // RFC 3339, milliseconds
	Leader bool   `json:"leader"`
	Term   uint64 `json:"term"`  // 0 without a leader
	Value  string `json:"value"` // "" without a leader
	ID     string `json:"id"`    // the leader's holder id, "" without one
	// Unknown: the last read failed (fewer than a quorum of nodes answered); the other fields
	// are empty, and the line printed before it may no longer hold.
	Unknown bool `json:"unknown"`
}

// observeElection prints the election's leader and each change until ctx ends.
func observeElection(ctx context.Context, e *env, cfg *execConfig, urls []nodeURL, asJSON bool) error {
	clients := dialNodes(urls)
	c, err := redlock.New(clients, redlock.WithNodeTimeout(cfg.nodeTimeout), redlock.WithAmnesiaTolerance(cfg.amnesia))
	if err != nil {
		closeClients(clients)
		return usageErrorf("elect: %s", bare(err))
	}
	defer func() { shutdown(clients, cfg.nodeTimeout, c) }()
	warnEvenNodes(e.stderr, "elect", len(urls), c.Quorum(), cfg.amnesia)
	el := c.Election(cfg.election)
	if _, err := el.Leader(ctx); err != nil && !errors.Is(err, redlock.ErrNoLeader) {
		if errors.Is(err, redlock.ErrInvalidArgument) {
			return usageErrorf("elect: bad NAME: %s", bare(err))
		}
		return fmt.Errorf("elect: %s", bare(err))
	}
	enc := json.NewEncoder(e.stdout)
	for info := range el.Observe(ctx) {
		if asJSON {
			d := observeDoc{Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), Leader: info.ID != "", Term: uint64(info.Term), Value: info.Value, ID: info.ID,
				Unknown: info.Unknown}
			if err := enc.Encode(d); err != nil {
				return fmt.Errorf("elect: %w", err)
			}
			continue
		}
		if info.Unknown {
			fmt.Fprintln(e.stdout, "leader unknown: fewer than a quorum of nodes answered")
			continue
		}
		if info.ID == "" {
			fmt.Fprintln(e.stdout, "no leader")
			continue
		}
		fmt.Fprintf(e.stdout, "term %v value %s\n", info.Term, strconv.Quote(info.Value))
	}
	return nil
}

// relabel makes exec's messages elect's: their "exec: " becomes "elect: ".
func relabel(err error) error {
	var ue usageError
	var xe *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue) && err == error(ue):
		return usageError{msg: swapLabel(ue.msg)}
	case errors.As(err, &xe) && err == error(xe) && xe.err != nil:
		return &exitError{code: xe.code, err: relabeled{xe.err}}
	case errors.As(err, &xe) && err == error(xe):
		return err
	}
	return relabeled{err}
}

type relabeled struct{ error }

func (r relabeled) Error() string { return swapLabel(r.error.Error()) }
func (r relabeled) Unwrap() error { return r.error }

func swapLabel(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "exec: "); ok {
		return "elect: " + rest
	}
	return msg
}
