package main

// Flag parsing shared by the commands: flags mixed with positional arguments, durations
// that say when a unit is missing, --counter-layout.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

// parseInterspersed parses a subcommand's arguments where flags and positional arguments
// may be mixed ("status KEY --json" as well as "status --json KEY"), and returns the
// positional ones in order. After a "--" everything is positional. It handles -h and bad
// flags as parseFlags does.
func parseInterspersed(fs *flag.FlagSet, e *env, args []string) ([]string, error) {
	fs.SetOutput(io.Discard) // the flag package would print the error and the whole usage
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, usageErrorf("%s: %v (run 'redlock %s -h' for help)", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// durationFlag is a time.Duration flag whose error for a number without a unit says so
// ("--ttl 10": "10 has no unit; write 10s, 10ms, 10m or 10h") instead of flag's bare
// "parse error".
type durationFlag time.Duration

// durationSyntax matches what time.ParseDuration reads, whatever the size: a sign, then
// numbers each with a unit.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

func (d *durationFlag) String() string { return time.Duration(*d).String() }

// plainNumber matches a number written as time.ParseDuration reads one, without its unit.
var plainNumber = regexp.MustCompile(`^[-+]?(\d+(\.\d*)?|\.\d+)$`)

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		if plainNumber.MatchString(s) {
			if strings.HasPrefix(s, "-") { // no duration flag takes a negative value
				return fmt.Errorf("%s has no unit, and is negative; write a duration such as 30s or 500ms", s)
			}
			return fmt.Errorf("%s has no unit; write %ss, %sms, %sm or %sh", s, s, s, s, s)
		}
		if durationSyntax.MatchString(s) { // well formed: time.ParseDuration refused its size
			return fmt.Errorf("%s is beyond what a duration can hold (±%v, about 292 years)", s, time.Duration(math.MaxInt64))
		}
		return fmt.Errorf("%q is not a duration such as 30s, 1m30s or 500ms", s)
	}
	*d = durationFlag(v)
	return nil
}

// durationVar defines a durationFlag named name with default value, stored in p.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationFlag)(p), name, usage)
}

// intFlag is an int flag whose error says what is wrong with the value ("\"x\" is not a whole
// number such as 3", "1e3 is not a whole number", "... is beyond what an int can hold")
// instead of flag's bare "parse error".
type intFlag int

func (i *intFlag) String() string { return strconv.Itoa(int(*i)) }

func (i *intFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange):
			return fmt.Errorf("%s is beyond what an int can hold (%d to %d)", s, math.MinInt, math.MaxInt)
		case isFloat(s):
			return fmt.Errorf("%s is not a whole number", s)
		}
		return fmt.Errorf("%q is not a whole number such as 3", s)
	}
	*i = intFlag(v)
	return nil
}

// uint64Flag is intFlag for a uint64 (lab's --seed).
type uint64Flag uint64

func (u *uint64Flag) String() string { return strconv.FormatUint(uint64(*u), 10) }

func (u *uint64Flag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange):
			return fmt.Errorf("%s is beyond what a uint64 can hold (0 to %d)", s, uint64(math.MaxUint64))
		case isFloat(s):
			return fmt.Errorf("%s is not a whole number of at least 0", s)
		}
		return fmt.Errorf("%q is not a whole number such as 3", s)
	}
	*u = uint64Flag(v)
	return nil
}

// isFloat reports whether s reads as a number, though not as an int (1e3, 2.5, 1e400).
func isFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// flagName is how a flag is written on the command line: -v, --ttl.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// intVar defines an intFlag named name with default value, stored in p.
func intVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var((*intFlag)(p), name, usage)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// layoutFlag is a --counter-layout flag: "slot" or "key", as the library's
// WithCounterLayout(SlotCounters) and WithCounterLayout(KeyCounters).
type layoutFlag redlock.CounterLayout

func (l *layoutFlag) String() string { return redlock.CounterLayout(*l).String() }

func (l *layoutFlag) Set(s string) error {
	switch s {
	case "slot":
		*l = layoutFlag(redlock.SlotCounters)
	case "key":
		*l = layoutFlag(redlock.KeyCounters)
	default:
		return fmt.Errorf("%q is neither slot nor key", s)
	}
	return nil
}

// layoutUsage is the help text of --counter-layout, for the subcommand that does what.
func layoutUsage(what string) string {
	return "as the library's WithCounterLayout, the fence counters: `LAYOUT` slot or key" + what + " (default slot)"
}
