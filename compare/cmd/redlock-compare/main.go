// Command redlock-compare runs the comparison lab: Redlock (this library), one Redis with
// Sentinel failover, PostgreSQL (an advisory lock and a lock table) and etcd, each started
// on this machine on loopback ports, measured healthy and under the same faults. It prints
// Markdown tables on stdout and progress on stderr; -html writes the page with the
// timelines side by side. `redlock lab --compare` runs it.
//
//	redlock-compare                        # the quick profile: healthy runs and the pause fault
//	redlock-compare -profile full          # every fault (about 7 minutes)
//	redlock-compare -backends redlock,etcd -faults pause,partition -html compare.html
//
// It needs redis-server, PostgreSQL's server binaries and etcd (Debian: redis-server,
// postgresql, etcd-server) and, as root, an unprivileged account for PostgreSQL
// ($REDLOCK_PG_USER, else postgres, else nobody).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/compare"
)

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// runCompare is compare.Run; the tests put a stand-in here to reach the outcomes of a run
// (a failure, an interrupt, a report) without starting servers.
var runCompare = compare.Run

const usageText = `redlock-compare runs the comparison lab: Redlock beside one Redis with Sentinel, PostgreSQL
(an advisory lock and a lock table) and etcd, each started here on loopback ports, measured
healthy and under the same faults. Markdown tables go to stdout, progress to stderr.
Status: 0 done, 1 a run failed, 2 bad arguments, 130 interrupted. docs/choosing.md reads a run.

Flags:
`

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redlock-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	profile := fs.String("profile", "quick", "quick (healthy runs and the pause fault, about 1.5 minutes) or full (every fault, about 7 minutes)")
	backends := fs.String("backends", "", "comma-separated backends (default all): "+strings.Join(compare.BackendNames(), ", "))
	faults := fs.String("faults", "", "comma-separated faults (default the profile's), or none for the healthy runs only: "+strings.Join(compare.FaultNames(), ", "))
	htmlOut := fs.String("html", "", "also write the HTML report, with the timelines, to this file (replaced only when the run succeeds)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file (replaced only when the run succeeds)")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "redlock-compare: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	var o compare.Options
	switch *profile {
	case "quick":
		o.Profile = compare.Quick
	case "full":
		o.Profile = compare.Full
	default:
		return usage("-profile %q: want quick or full", *profile)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.Backends, o.Faults = list(*backends), list(*faults)
	if set["backends"] && o.Backends == nil {
		return usage("-backends %q names no backend (leave the flag out for all of them)", *backends)
	}
	if set["faults"] && o.Faults == nil {
		return usage("-faults %q names no fault (none runs the healthy measurements only; leave the flag out for the profile's)", *faults)
	}
	if slices.Contains(o.Faults, "none") {
		if len(o.Faults) > 1 {
			return usage("-faults %q: none (the healthy runs only) cannot be combined with faults", *faults)
		}
		o.Faults = []string{}
	}
	if err := o.Check(); err != nil {
		return usage("%v", err)
	}
	// Ctrl-C from here on ends the run through ctx, so that the servers stop and the
	// temporary files made next are removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	outs, err := prepare(*htmlOut, *jsonOut)
	if err != nil {
		return usage("%v", err)
	}
	defer outs.discard() // whatever was not committed below
	if !*quiet {
		o.Progress = func(s string) { fmt.Fprintln(stderr, "compare:", s) }
	}
	redis.SetLogger(quietLog{})
	rep, err := runCompare(ctx, o)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "redlock-compare: interrupted; no report written (files named by -html and -json are as they were)")
			return 130
		}
		fmt.Fprintln(stderr, "redlock-compare:", err)
		return 1
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		fmt.Fprintln(stderr, "redlock-compare:", err)
		return 1
	}
	if err := outs.commit(rep.WriteHTML, rep.WriteJSON); err != nil {
		fmt.Fprintln(stderr, "redlock-compare:", err)
		return 1
	}
	return 0
}

// output is one report file: written to a temporary file beside it, which replaces it only
// once the report is complete, so that a run that fails or is interrupted leaves whatever was
// at the path as it was.
type output struct {
	path string
	tmp  *os.File
}

type outputs []*output // the -html one, then the -json one; nil where not asked for

// prepare checks the -html and -json paths and creates their temporary files now, so that a
// path that cannot be written fails before minutes of runs rather than after them.
func prepare(paths ...string) (outputs, error) {
	outs := make(outputs, len(paths))
	for i, p := range paths {
		if p == "" {
			continue
		}
		for _, o := range outs[:i] {
			if o != nil && samePath(o.path, p) {
				outs.discard()
				return nil, fmt.Errorf("-html and -json name the same file %q", p)
			}
		}
		if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
			outs.discard()
			return nil, fmt.Errorf("%s: not a regular file", p)
		}
		f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
		if err != nil {
			outs.discard()
			return nil, fmt.Errorf("cannot write %s: %w", p, err)
		}
		outs[i] = &output{path: p, tmp: f}
	}
	return outs, nil
}

// samePath reports whether a and b name one file: the same path once cleaned and made
// absolute, or, when both exist, the same file (a link).
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// commit writes each file with its writer and moves it into place. On a failure it stops
// there; the files not yet moved are discarded by discard.
func (outs outputs) commit(writes ...func(io.Writer) error) error {
	for i, o := range outs {
		if o == nil {
			continue
		}
		err := writes[i](o.tmp)
		if cerr := o.tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil { // CreateTemp makes 0600: give the file's own mode back, or 0644
			mode := os.FileMode(0o644)
			if st, serr := os.Stat(o.path); serr == nil {
				mode = st.Mode().Perm()
			}
			err = os.Chmod(o.tmp.Name(), mode)
		}
		if err == nil {
			err = os.Rename(o.tmp.Name(), o.path)
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", o.path, err)
		}
		outs[i] = nil
	}
	return nil
}

// discard removes the temporary files not committed.
func (outs outputs) discard() {
	for i, o := range outs {
		if o != nil {
			_ = o.tmp.Close()
			_ = os.Remove(o.tmp.Name())
			outs[i] = nil
		}
	}
}

// list splits a comma-separated flag; one that names nothing is nil.
func list(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
