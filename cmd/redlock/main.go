// Command redlock is the command-line companion of the redlock library.
//
//	redlock <command> [flags]
//
// Run `redlock -h` for the list of commands and `redlock <command> -h` for the flags of
// one command. The first thing to try is `redlock demo`, which needs no Redis server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/quorumlock/redlock/internal/redislog"
	"github.com/redis/go-redis/v9"
)

// env is the part of the outside world a command may use. main passes the real one; tests
// pass buffers and a fake environment.
type env struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one subcommand. run parses args (the arguments after the command's name)
// with its own flag.FlagSet, see newFlagSet and parseFlags. It returns nil on success,
// flag.ErrHelp after printing its usage for -h, a usageError for bad flags or arguments,
// and any other error for a failure. The dispatcher prints the error on one line.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists the subcommands in the order the usage shows them. To add one, write its
// run function in its own file and add a line here.
var commands = []command{
	{name: "demo", summary: "replay the settlement story: a mutex vs redlock, a pause past the TTL, fencing tokens", run: runDemo},
	{name: "exec", summary: "run a command while holding a lock; it gets the fencing token in $REDLOCK_TOKEN", run: runExec},
	{name: "elect", summary: "run a command while this process leads an election (its term in $REDLOCK_TERM), or --observe the leader", run: runElect},
	{name: "status", summary: "show who holds a lock on each node, its TTL and fence counter, and the next token", run: runStatus},
	{name: "top", summary: "a live view of the locks held across the nodes: holders, TTL per node, next token, disagreements", run: runTop},
	{name: "dev", summary: "run local Redis nodes in this process (no install needed) until interrupted", run: runDev},
	{name: "lab", summary: "reproduce Redlock's failure modes on real redis-server nodes and show what fencing catches", run: runLab},
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // bad command line
)

func main() {
	// go-redis logs some connection failures on its own; the CLI reports every error itself,
	// on one line, so those logs would only duplicate it.
	redis.SetLogger(redislog.Discard{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches args (without the program name) to a subcommand and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		printUsage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-version", "--version", "version":
		fmt.Fprintln(e.stdout, versionLine())
		return exitOK
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			// "redlock help demo" is "redlock demo -h".
			name, rest = rest[0], []string{"-h"}
			break
		}
		printUsage(e.stdout)
		return exitOK
	}
	cmd, ok := findCommand(name)
	if !ok {
		what := "command"
		if strings.HasPrefix(name, "-") {
			what = "flag"
		}
		fmt.Fprintf(e.stderr, "redlock: unknown %s %q; run 'redlock -h' for the list of commands\n", what, name)
		return exitUsage
	}
	err := cmd.run(ctx, e, rest)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	var xe *exitError
	if errors.As(err, &xe) {
		if xe.err != nil {
			fmt.Fprintf(e.stderr, "redlock: %s\n", oneLine(xe.err.Error()))
		}
		return xe.code
	}
	fmt.Fprintf(e.stderr, "redlock: %s\n", oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

func findCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: redlock <command> [flags]\n\ncommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'redlock <command> -h' for the flags of a command.\n")
}

// usageError is a bad command line: the dispatcher exits with exitUsage for it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError makes the dispatcher exit with a specific code: the child's own status for
// exec, or one of exec's documented codes. err, when not nil, is printed as the one error
// line; a nil err prints nothing (the child has already said what it had to say).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// newFlagSet returns the FlagSet of one subcommand. synopsis follows "redlock NAME" in the
// usage line; about is a paragraph printed under it.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: redlock %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(about))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(w, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses a subcommand's arguments. It prints the usage to stdout and returns
// flag.ErrHelp for -h, and returns a one-line usageError for an unknown flag, a bad value
// or a positional argument (no subcommand takes any so far).
func parseFlags(fs *flag.FlagSet, e *env, args []string) error {
	fs.SetOutput(io.Discard) // the flag package would print the error and the whole usage
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(e.stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if err != nil {
		return usageErrorf("%s: %v (run 'redlock %s -h' for help)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q (run 'redlock %s -h' for help)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// oneLine folds a message onto one line, so that every error is exactly one line of stderr.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// versionLine is what --version prints: the module version (or "(devel)" for a build from a
// checkout), the VCS revision when the build recorded one, and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "redlock (version unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "+dirty"
		}
	}
	return fmt.Sprintf("redlock %s %s", v, bi.GoVersion)
}
