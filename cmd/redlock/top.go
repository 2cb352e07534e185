package main

// redlock top: its command line and its refresh loop. Finding the lock keys is in
// top_discover.go, reading their state in top_snapshot.go, the per-lock row data in
// top_view.go, and printing in top_render.go (the table) and top_json.go (--json).

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

const topAbout = `
A live view of the locks on the nodes. Every --interval it scans each node's string keys
(SCAN ... TYPE string, MATCH --match when given; at most --limit names per node, the
library's own included) for lock keys: keys that have a TTL and hold a holder id (32
lowercase hex digits). The library's own keys (fence counters redlock:fence:* and
redlock:slot:*, RedisFence's redlock:highest:*, waiter queues) are told by their names and
not read; the default --limit covers a node's 16 384 slot counters many times over. It
reads every lock key found on every node as 'redlock status' does, and prints a table: per lock
its state, its holder (first 8 hex digits), on how many nodes that holder has its key, how
long it keeps a quorum without renewing, the next token, and the remaining TTL on each
node. A row marked '!' is a lock the nodes disagree about: a holder present on fewer than
a quorum of nodes (a different holder on some node, an acquire half done, or keys
expiring). Locks taken WithoutFencing are found too (their token is 0). A second scan
finds the readers sets of read/write locks (redlock:readers:*, SCAN ... TYPE zset): each
lock that readers hold gets a row 'rwlock "NAME" readers', after its writer's row.

Only locks with a key on some node are shown; --all shows free ones too, as far as they
left something behind: a per-key fence counter (redlock:fence:*, written by clients of
--counter-layout key, and by versions before the slot layout), which outlives its lock by
days. A free lock of the default slot layout leaves nothing of its own (its tokens came
from the counter of its hash slot, shared with other keys), so --all cannot show it.

On a terminal the table is redrawn in place until Ctrl-C. With --once, or when stdout is
not a terminal, one snapshot is printed. --json prints one JSON document per line per
refresh (one with --once); see docs/cli.md for the fields.

Exit status: 0 after Ctrl-C or SIGTERM, or, for one snapshot, when a quorum of nodes
answered the scan; 1 for one snapshot that fewer answered (it is still printed, and one line
on stderr says so); 2 for a bad command line; 130 when interrupted before one snapshot
was printed.`

// topDefaultLimit is --limit's default: enough to scan every string key of a node that holds
// the slot layout's 16 384 counters, per-key counters of key-layout clients and tens of
// thousands of locks besides. A scan that stops at the limit says so.
const topDefaultLimit = 100_000

// topConfig is how top shows the locks: its flags, and what it learnt of the terminal.
type topConfig struct {
	interval time.Duration
	limit    int
	match    string
	all      bool
	asJSON   bool
	once     bool // --once: one snapshot, then exit
	live     bool
	color    bool // stdout is a terminal: disagreements in colour, the screen redrawn
	rows     int  // the terminal's size, 0 when unknown
	cols     int
}

// runTop is the top command: it reads the nodes, then prints snapshots until interrupted,
// or one.
func runTop(ctx context.Context, e *env, args []string) error {
	cfg, ro, err := parseTop(e, args)
	if err != nil {
		return err
	}
	r, err := openReader(e, "top", ro)
	if err != nil {
		return err
	}
	defer r.close()
	if f, ok := e.stdout.(*os.File); ok {
		cfg.rows, cfg.cols, cfg.color = terminalSize(int(f.Fd()))
	}
	cfg.live = !cfg.once && (cfg.asJSON || cfg.color)
	t := &topper{c: r.c, clients: r.clients, addrs: urlAddrs(r.urls), nodeTimeout: ro.nodeTimeout, cfg: cfg}
	return t.loop(ctx, e.stdout)
}

// parseTop parses and checks top's command line: the view's settings, and the nodes and
// client settings to read them with.
func parseTop(e *env, args []string) (topConfig, readerOptions, error) {
	fs := newFlagSet("top", "[flags]", topAbout)
	ro := readerOptions{tls: &tlsFlags{}}
	fs.StringVar(&ro.nodes, "nodes", "", "comma-separated `URLS` of the Redis nodes (default $"+nodesEnv+")")
	interval := durationFlag(time.Second)
	fs.Var(&interval, "interval", "`D` between refreshes")
	limit := new(int)
	intVar(fs, limit, "limit", topDefaultLimit, "at most `N` string keys examined per node (the library's own counted) and N locks listed per refresh")
	match := fs.String("match", "", "scan for and show only lock keys matching this Redis `GLOB` (as KEYS and SCAN MATCH: * ? [a-z] \\)")
	all := fs.Bool("all", false, "also show free locks that have a per-key fence counter but no key on any node")
	asJSON := fs.Bool("json", false, "print one JSON document per refresh instead of the table")
	once := fs.Bool("once", false, "print one snapshot and exit")
	durationVar(fs, &ro.nodeTimeout, "node-timeout", statusNodeTimeout, "how long (`D`) to wait for each node, per call")
	intVar(fs, &ro.amnesia, "amnesia-tolerance", redlock.DefaultAmnesiaTolerance, "`F` as in the library's WithAmnesiaTolerance: raises the quorum; must match the lock's users")
	fs.Var((*layoutFlag)(&ro.layout), "counter-layout", layoutUsage(", those of the clients whose next token is shown"))
	ro.tls.register(fs)
	if err := parseFlags(fs, e, args); err != nil {
		return topConfig{}, ro, err
	}
	switch {
	case time.Duration(interval) <= 0:
		return topConfig{}, ro, usageErrorf("top: --interval %v must be positive", time.Duration(interval))
	case *limit <= 0:
		return topConfig{}, ro, usageErrorf("top: --limit %d must be at least 1", *limit)
	case ro.nodeTimeout <= 0:
		return topConfig{}, ro, usageErrorf("top: --node-timeout %v must be positive", ro.nodeTimeout)
	}
	cfg := topConfig{interval: time.Duration(interval), limit: *limit, match: *match, all: *all, asJSON: *asJSON, once: *once}
	return cfg, ro, nil
}

// topper takes and prints top's snapshots.
type topper struct {
	c           *redlock.Client
	clients     []redis.UniversalClient
	addrs       []string
	nodeTimeout time.Duration
	cfg         topConfig
}

// loop prints a snapshot every --interval until ctx ends, or one snapshot when the view is
// not live. A single snapshot that fewer than a quorum of nodes answered is still printed,
// and then reported as an error.
func (t *topper) loop(ctx context.Context, w io.Writer) error {
	for {
		snap, err := t.snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				if t.cfg.live {
					return nil // Ctrl-C or SIGTERM: the way to leave the live view
				}
				return &exitError{code: 128 + 2}
			}
			return fmt.Errorf("top: %s", bare(err))
		}
		snap.probeFailures(t.addrs)
		if err := t.render(w, snap); err != nil {
			return fmt.Errorf("top: %w", err)
		}
		if !t.cfg.live {
			if snap.answered < snap.quorum {
				return fmt.Errorf("top: only %d of %d nodes answered the scan, quorum is %d: locks may be missing%s",
					snap.answered, len(snap.nodes), snap.quorum, snap.firstFailure(t.addrs))
			}
			return nil
		}
		timer := time.NewTimer(t.cfg.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}
