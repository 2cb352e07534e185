//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestElectCommandLine: bad command lines are usage errors with one line, and send nothing.
func TestElectCommandLine(t *testing.T) {
	closed := closedAddr(t)
	nodes := "redis://" + closed
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"elect"}, "missing NAME"},
		{[]string{"elect", "--nodes", nodes, "", "--", "true"}, "elect: NAME is empty"},
		{[]string{"elect", "--nodes", nodes, "a", "b", "--", "true"}, `unexpected argument "b"`},
		{[]string{"elect", "--nodes", nodes, "a"}, `missing "--"`},
		{[]string{"elect", "--nodes", nodes, "a", "--"}, "missing the command"},
		{[]string{"elect", "--nodes", nodes, "--key", "x", "a", "--", "true"}, "--key is exec's"},
		{[]string{"elect", "--nodes", nodes, "--json", "a", "--", "true"}, "--json goes with --observe"},
		{[]string{"elect", "--nodes", nodes, "--observe", "a", "--", "true"}, "--observe runs no command"},
		// --observe campaigns for nothing: the flags of campaigning would be ignored.
		{[]string{"elect", "--nodes", nodes, "--observe", "--json", "--wait", "1s", "a"}, "elect: --wait is for campaigning and does nothing with --observe, which takes only"},
		{[]string{"elect", "--nodes", nodes, "--observe", "--grace", "1h", "a"}, "elect: --grace is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--observe", "--ttl", "5s", "a"}, "elect: --ttl is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--value", "x", "--observe", "a"}, "elect: --value is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--observe", "--conflict-exit-code", "9", "a"}, "elect: --conflict-exit-code is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--observe", "--lock-delay", "1s", "a"}, "elect: --lock-delay is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--observe", "-v", "a"}, "elect: -v is for campaigning"},
		{[]string{"elect", "--nodes", nodes, "--ttl", "100ms", "a", "--", "true"}, "elect: --ttl 100ms must be at least"},
		{[]string{"elect", "--nodes", nodes, "--value", strings.Repeat("v", 64<<10+1), "a", "--", "true"}, "--value is 65537 bytes"},
	} {
		code, out, errOut := cli(t, nil, tc.args...)
		requireOneLineError(t, code, errOut, exitUsage, tc.want)
		if out != "" {
			t.Errorf("%v: stdout %q", tc.args[:min(len(tc.args), 4)], out)
		}
	}
}
