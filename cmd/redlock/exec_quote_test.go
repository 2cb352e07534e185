//go:build unix

package main

import "testing"

// TestQuoteArgs: the command line in exec's --verbose messages shows where each argument
// starts and ends; plain arguments stay bare.
func TestQuoteArgs(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"sh", "-c", "echo RAN token=$REDLOCK_TOKEN"}, `sh -c "echo RAN token=$REDLOCK_TOKEN"`},
		{[]string{"./settle.sh", "--date=2026-12-05", "a,b", "user@host:/x%y+z"}, `./settle.sh --date=2026-12-05 a,b user@host:/x%y+z`},
		{[]string{"printf", "", "it's", "tab\there", "new\nline", `back\slash`, `"q"`}, `printf "" "it's" "tab\there" "new\nline" "back\\slash" "\"q\""`},
		{[]string{"héllo"}, `"héllo"`},
	} {
		if got := quoteArgs(tc.argv); got != tc.want {
			t.Errorf("quoteArgs(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}
