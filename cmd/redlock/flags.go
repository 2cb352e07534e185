package main

import (
	"errors"
	"flag"
	"io"
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
