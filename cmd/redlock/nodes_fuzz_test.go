package main

import (
	"strings"
	"testing"
)

// FuzzNodeURLSecret: whatever the node list, no error of the CLI's node parsing contains the
// password of a URL in it. The fuzzer varies the scheme, the user, the password (which
// always holds the marker) and the rest; the checks cover parseNodeURLs (what --nodes and
// REDLOCK_NODES go through, for status and exec) and redactURL (what is printed of a URL).
func FuzzNodeURLSecret(f *testing.F) {
	const marker = "TopSecretPW"
	for _, c := range [][4]string{
		{"redis", "", marker, "127.0.0.1:notaport"},
		{"redis", "alice", "Sec ret" + marker, "127.0.0.1:7611"},
		{"redis", "", "Top%zz" + marker, "127.0.0.1:7611"},
		{"redis", "", marker, "[::1:7611"},
		{"rediss", "u", marker + "@x", "h:1/0"},
		{"redis", "", marker + "/x", "h:1"},
		{"unix", "", marker, "/tmp/r.sock?db=x"},
		{"", "", marker, "h:1"},
		{"redis", "u", marker, "h:1?dial_timeout=zz"},
		{"redis", "", marker, "h:1/notadb"},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		if !strings.Contains(pass, marker) || strings.Contains(user, ":") {
			return // the password is what follows the first ':' of the user information
		}
		u := user + ":" + pass + "@" + rest
		if scheme != "" {
			u = scheme + "://" + u
		}
		for _, spec := range []string{u, "redis://127.0.0.1:1," + u, u + "," + u} {
			_, err := parseNodeURLs(spec, "--nodes", "")
			if err != nil && strings.Contains(err.Error(), marker) {
				t.Fatalf("error shows the password: %v", err)
			}
		}
		if r := redactURL(u); strings.Contains(r, marker) {
			t.Fatalf("redactURL(%q) = %q", u, r)
		}
	})
}
