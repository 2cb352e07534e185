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
		{"redis", "", marker, "127.0.0.1"},
		{"redis", "", marker, "127.0.0.1:1:2"},
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

// TestNodeURLHost: URLs that go-redis would read as another node than meant are refused:
// no "//" (go-redis would dial localhost:6379), no port (6379 assumed), a host with a stray
// ':'. The password never shows in the error.
func TestNodeURLHost(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis:pw_zz@127.0.0.1:7611", `no host: "//" missing`},
		{"redis://:pw_zz@127.0.0.1", "no port"},
		{"rediss://h", "no port"},
		{"redis://:pw_zz@127.0.0.1:7611:7612", "malformed host:port"},
	} {
		_, err := parseNodeURLs(tc.url, "--nodes", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw_zz") {
			t.Errorf("%s: %v, want an error saying %q without the password", tc.url, err, tc.want)
		}
	}
	for _, ok := range []string{"redis://127.0.0.1:7611", "rediss://u:p@h:1/0", "redis://[::1]:7611", "unix:///tmp/r.sock"} {
		if _, err := parseNodeURLs(ok, "--nodes", ""); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
