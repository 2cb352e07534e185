// Command redlock-compare runs the comparison lab: Redlock (this library), one Redis with
// Sentinel failover, PostgreSQL (an advisory lock and a lock table) and etcd, each started
// on this machine on loopback ports, measured healthy and under the same faults. It prints
// Markdown tables on stdout and progress on stderr; -html writes the page with the
// timelines side by side. `redlock lab --compare` runs it.
//
//	redlock-compare                        # the quick profile: healthy runs and the pause fault
//	redlock-compare -profile full          # every fault (about 3 minutes)
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

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redlock-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", "quick", "quick (healthy runs and the pause fault) or full (every fault)")
	backends := fs.String("backends", "", "comma-separated backends (default all): "+strings.Join(compare.BackendNames(), ", "))
	faults := fs.String("faults", "", "comma-separated faults (default the profile's): "+strings.Join(compare.FaultNames(), ", "))
	htmlOut := fs.String("html", "", "also write the HTML report, with the timelines, to this file")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redlock-compare: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var o compare.Options
	switch *profile {
	case "quick":
		o.Profile = compare.Quick
	case "full":
		o.Profile = compare.Full
	default:
		fmt.Fprintf(stderr, "redlock-compare: -profile %q: want quick or full\n", *profile)
		return 2
	}
	o.Backends, o.Faults = list(*backends), list(*faults)
	for _, b := range o.Backends {
		if _, err := compare.NewBackend(b); err != nil {
			fmt.Fprintln(stderr, "redlock-compare:", err)
			return 2
		}
	}
	// The output files are created now, so that a path that cannot be written fails before
	// minutes of runs rather than after them.
	var outs []*os.File
	defer func() {
		for _, f := range outs {
			_ = f.Close()
		}
	}()
	for _, p := range []string{*htmlOut, *jsonOut} {
		if p == "" {
			outs = append(outs, nil)
			continue
		}
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(stderr, "redlock-compare:", err)
			return 2
		}
		outs = append(outs, f)
	}
	if !*quiet {
		o.Progress = func(s string) { fmt.Fprintln(stderr, "compare:", s) }
	}
	redis.SetLogger(quietLog{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := compare.Run(ctx, o)
	if err != nil {
		for i, f := range outs { // nothing to report: the files made above go
			if f != nil {
				_ = f.Close()
				_ = os.Remove(f.Name())
				outs[i] = nil
			}
		}
		fmt.Fprintln(stderr, "redlock-compare:", err)
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 1
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		fmt.Fprintln(stderr, "redlock-compare:", err)
		return 1
	}
	for i, write := range []func(io.Writer) error{rep.WriteHTML, rep.WriteJSON} {
		f := outs[i]
		if f == nil {
			continue
		}
		err := write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		outs[i] = nil
		if err != nil {
			fmt.Fprintln(stderr, "redlock-compare:", err)
			return 1
		}
	}
	return 0
}

// list splits a comma-separated flag; "" is nil (the default).
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
