package main

// Tests of parsing node URLs and the nodes file, and the fuzz test that no password shows.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// FuzzNodeURLSecret: whatever the node list, no error of the CLI's node parsing, and no
// address it keeps (which messages and tables print), shows the password of a URL in it,
// raw or percent-encoded. The fuzzer varies the scheme, the user, the password (which always
// holds the marker) and the rest of the URL, and each input is tried in the places a
// password goes: the user information ("user:pass@rest"), the query ("rest?password=pass",
// also percent-encoded, beside other options, or as a bare "?pass"), and a fragment. The
// checks cover parseNodeURLs (what --nodes, REDLOCK_NODES and REDLOCK_NODES_FILE go through,
// for every command) and redactURL (what is printed of a URL).
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
		{"redis", "dial_timeout", marker, "127.0.0.1:7611/0"},
		{"redis", "db", "1" + marker, "127.0.0.1:7611"},
		{"redis", "", "x@" + marker, "127.0.0.1:7611"},
		{"redis", "", marker + "&db=x", "127.0.0.1:7611"},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		if !strings.Contains(pass, marker) || strings.Contains(scheme+user+rest, marker) {
			return // the password is pass; the other parts may hold anything else
		}
		prefix := ""
		if scheme != "" {
			prefix = scheme + "://"
		}
		var urls []string
		if !strings.Contains(user, ":") { // the password is what follows the first ':' of the user information
			urls = append(urls, prefix+user+":"+pass+"@"+rest)
		}
		for _, v := range []string{pass, url.QueryEscape(pass), escapeAll(pass)} {
			urls = append(urls, prefix+rest+"?password="+v, prefix+rest+"?db=0&password="+v+"&"+user,
				prefix+rest+"?"+user+"="+v, prefix+rest+"?"+v, prefix+rest+"#"+v)
		}
		for _, u := range urls {
			for _, spec := range []string{u, "redis://127.0.0.1:1," + u, u + "," + u} {
				nodes, err := parseNodeURLs(spec, "--nodes", "")
				if err != nil && shows(err.Error(), marker) {
					t.Fatalf("node list %q: the error shows the password: %v", spec, err)
				}
				for _, n := range nodes {
					if shows(n.opts.Addr, marker) {
						t.Fatalf("node list %q: the address %q shows the password", spec, n.opts.Addr)
					}
				}
			}
			if r := redactURL(u); shows(r, marker) {
				t.Fatalf("redactURL(%q) = %q", u, r)
			}
		}
	})
}

// escapeAll percent-encodes every byte of s.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// shows reports whether text holds secret, as it is or once its valid %-escapes are decoded
// (the way a URL or a query would be read back).
func shows(text, secret string) bool {
	if strings.Contains(text, secret) {
		return true
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '%' && i+2 < len(text) {
			if v, err := strconv.ParseUint(text[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(text[i])
	}
	return strings.Contains(b.String(), secret)
}

// TestNodeURLQuery: a password in the query, which go-redis does not read, is refused with
// a message that says where to put it, and no message quotes a query value or a part of the
// list that is not a redis://, rediss:// or unix:// URL: values that were once printed
// (?password=, a bad option value, the second half of a password cut by the list's ',').
func TestNodeURLQuery(t *testing.T) {
	const pw = "hunter2"
	for _, tc := range []struct{ spec, want string }{
		{"redis://127.0.0.1:7611/0?password=" + pw, "a password in the query"},
		{"redis://127.0.0.1:7611?PassWord=" + pw, "a password in the query"},
		{"redis://127.0.0.1:7611?pass%77ord=" + pw, "a password in the query"},
		{"redis://127.0.0.1:7611?username=u&password=" + pw, "a password in the query"},
		{"redis://127.0.0.1:7611/0?dial_timeout=" + pw, "an invalid value for dial_timeout"},
		{"redis://127.0.0.1:7611?db=" + pw, "an invalid database number"},
		{"redis://127.0.0.1:7611/" + pw, "an invalid database number"},
		{"redis://127.0.0.1:7611/0/" + pw, "a path other than /DB"},
		{"redis://127.0.0.1:7611?" + pw, "an option go-redis does not know (query parameter 1)"},
		{"redis://127.0.0.1:7611?db=1&" + pw + "=1", "an option go-redis does not know (query parameter 2)"},
		{"redis://127.0.0.1:7611#" + pw, "a '#' fragment"},
		{"redis://127.0.0.1:7611/0?db=0," + pw, "bad node URL: entry 2 of the node list is not a redis://, rediss:// or unix:// URL"},
		{"redis://127.0.0.1:7611/0?db=0," + pw + ":1", "bad node URL: entry 2 of the node list is not a redis://, rediss:// or unix:// URL"},
		{"http://" + pw + "@127.0.0.1:7611", "bad node URL: entry 1 of the node list is not a redis://, rediss:// or unix:// URL"},
		// A ',' in the password cuts the first URL short: its error says why.
		{"redis://:hun," + pw + "@127.0.0.1:7611", `bad node URL "redis://:xxxxx": an invalid port (want redis://HOST:PORT; a ',' inside a password or a query value splits the list: write it as %2C)`},
		{"redis://u:hun," + pw + "@127.0.0.1:7611,redis://127.0.0.1:7612", "an invalid port (want redis://HOST:PORT; a ',' inside a password"},
		// The rest of the password looks like a URL of its own: the '@' after the cut says it.
		{"redis://:hun,redis://" + pw + "@127.0.0.1:7611", `bad node URL "redis://:xxxxx": an invalid port (want redis://HOST:PORT; a ',' inside a password or a query value splits the list: write it as %2C)`},
		{"redis://127.0.0.1:7611?client_name=" + pw + "%zz", "an invalid %-escape"},
		{"redis://:" + pw + "%zz@127.0.0.1:7611", "an invalid %-escape; a '%' in a password is written %25"},
		// A reserved character in the password ends the host part early: the error says so.
		{"redis://:" + pw + "/x@127.0.0.1:7611", "an invalid port; a '/', '?', '#' or '%' in a password is written %2F, %3F, %23 or %25"},
		{"redis://:" + pw + "?x@127.0.0.1:7611", "an invalid port; a '/', '?', '#' or '%' in a password is written %2F"},
		{"redis://:" + pw + "#x@127.0.0.1:7611", "an invalid port; a '/', '?', '#' or '%' in a password is written %2F"},
		// A negative database number, which go-redis would take as database 0.
		{"redis://127.0.0.1:7611/-1", "an invalid database number"},
		{"redis://127.0.0.1:7611?db=-3", "an invalid database number"},
	} {
		_, err := parseNodeURLs(tc.spec, "--nodes", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || shows(err.Error(), pw) {
			t.Errorf("%s: %v; want an error saying %q without %q", tc.spec, err, tc.want, pw)
		}
	}
	// The options go-redis reads still work, and their names show in a redacted URL.
	nodes, err := parseNodeURLs("redis://127.0.0.1:7611/2?dial_timeout=3s&client_name=op,rediss://h:1?skip_verify=true", "--nodes", "")
	if err != nil || len(nodes) != 2 || nodes[0].opts.DB != 2 || nodes[0].opts.DialTimeout != 3*time.Second || nodes[0].opts.ClientName != "op" ||
		!nodes[1].opts.TLSConfig.InsecureSkipVerify {
		t.Errorf("options in the query: %v, %+v", err, nodes)
	}
	// Percent-encoded, a password's reserved characters are its own (docs/cli.md).
	nodes, err = parseNodeURLs("redis://us%3Aer:p%2Cw%40d%2F%3F%23%25@127.0.0.1:7611,redis://127.0.0.1:7612", "--nodes", "")
	if err != nil || len(nodes) != 2 || nodes[0].opts.Username != "us:er" || nodes[0].opts.Password != "p,w@d/?#%" {
		t.Errorf("percent-encoded user information: %v, %+v", err, nodes)
	}
	if got := redactURL("redis://h:1/0?dial_timeout=" + pw + "&" + pw + "=x&password=" + pw + "#" + pw); got != "redis://h:1/0?dial_timeout=xxxxx&xxxxx=xxxxx&password=xxxxx#xxxxx" {
		t.Errorf("redactURL of a query: %q", got)
	}
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
		{"redis://:pw_zz@127.0.0.1:99999", "a port outside 1-65535"},
		{"redis://:pw_zz@127.0.0.1:0", "a port outside 1-65535"},
	} {
		_, err := parseNodeURLs(tc.url, "--nodes", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw_zz") {
			t.Errorf("%s: %v, want an error saying %q without the password", tc.url, err, tc.want)
		}
	}
	for _, ok := range []string{"redis://127.0.0.1:7611", "redis://127.0.0.1:65535", "rediss://u:p@h:1/0", "redis://[::1]:7611", "unix:///tmp/r.sock"} {
		if _, err := parseNodeURLs(ok, "--nodes", ""); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestNodesFileEntries: a nodes file's blank lines and comments are skipped, a comment after
// an entry too ("URL # note"; a '#' inside a URL, with no blank before it, stays), every other
// line is one entry, and a line's trailing commas go.
func TestNodesFileEntries(t *testing.T) {
	text := "# the nodes\n\n  redis://a:1,redis://b:2,\n\t# redis://old:3\nredis://c:3,, # the third\r\nredis://:p#w@d:4\t# pw has a #\nredis://e:5 #\n,\nredis://f:6,# no blank\n ,, \n"
	got := nodesFileEntries(text)
	want := []string{"redis://a:1,redis://b:2", "redis://c:3", "redis://:p#w@d:4", "redis://e:5", "redis://f:6"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("nodesFileEntries = %q, want %q", got, want)
	}
	if got := nodesFileEntries("# only a comment\n\n"); len(got) != 0 {
		t.Errorf("nodesFileEntries of a file without entries = %q, want none", got)
	}
	// A file that names no node is a usage error pointing at 'redlock dev', as no nodes at all.
	path := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(path, []byte("# none yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(t, map[string]string{nodesFileEnv: path}, "status", "k")
	requireOneLineError(t, code, errOut, exitUsage, "names no nodes: write redis://HOST:PORT URLs in it")
	if !strings.Contains(errOut, "redlock dev") {
		t.Errorf("no hint of 'redlock dev': %q", errOut)
	}
}

// TestNodeURLCommaHintOnlyWhenCut: a bad URL in a list of good ones gets no hint about a ','
// inside a password; one with no '@' before an entry that has one does.
func TestNodeURLCommaHintOnlyWhenCut(t *testing.T) {
	for _, tc := range []struct {
		spec string
		hint bool
	}{
		{"redis://127.0.0.1:x,redis://127.0.0.1:7612", false},
		{"redis://127.0.0.1:x,redis://:pw@127.0.0.1:7612", true}, // ambiguous: said as a possibility
		{"redis://:a@127.0.0.1:x,redis://:pw@127.0.0.1:7612", false},
		{"redis://:a,redis://b@127.0.0.1:7611", true},
	} {
		_, err := parseNodeURLs(tc.spec, "--nodes", "")
		if err == nil || strings.Contains(err.Error(), "a ',' inside a password") != tc.hint {
			t.Errorf("%s: %v; want the ',' hint: %v", tc.spec, err, tc.hint)
		}
	}
}

// TestSchemeProbesBounded: the wrong-scheme probes of a port that accepts connections and
// answers nothing, and of a port nobody listens on, find nothing, each within the probe's
// bound; an address no URL named is not probed.
func TestSchemeProbesBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn // accepted and never answered
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	silent := ln.Addr().String()
	closed := "127.0.0.1:" + strconv.Itoa(testutil.FreePortT(t))
	if _, err := parseNodeURLs("rediss://"+silent+",redis://"+closed, "--nodes", ""); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{silent, closed, "127.0.0.1:1"} {
		start := time.Now()
		if h := schemeHint(addr); h != "" {
			t.Errorf("%s: hint %q, want none", addr, h)
		}
		if d := time.Since(start); d > schemeProbeTimeout+200*time.Millisecond {
			t.Errorf("%s: the probe took %v, bound %v", addr, d, schemeProbeTimeout)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), schemeProbeTimeout)
	defer cancel()
	if speaksTLS(ctx, silent) {
		t.Error("a port that answers nothing speaks TLS")
	}
}

// TestMayBeScheme: a failure that quotes the server's own reply, a certificate problem or a
// refused connection is never probed for a wrong scheme; for a redis:// URL only a connection
// the server closed is (a TLS port's answer to plain Redis; a plain port that hangs is no wrong
// scheme), for a rediss:// URL anything else too (a plain port never answers the handshake);
// an address no URL named is not.
func TestMayBeScheme(t *testing.T) {
	const plain, secure = "127.0.0.1:1001", "127.0.0.1:1002"
	if _, err := parseNodeURLs("redis://"+plain+",rediss://"+secure, "--nodes", ""); err != nil {
		t.Fatal(err)
	}
	never := []string{"WRONGPASS invalid username-password pair or user is disabled.", "NOAUTH Authentication required.",
		"tls: failed to verify certificate: x509: certificate signed by unknown authority",
		"remote error: tls: certificate required", "dial tcp 127.0.0.1:1: connect: connection refused"}
	closed := []string{"EOF", "read tcp 127.0.0.1:5->127.0.0.1:6: read: connection reset by peer", "redis: invalid reply: \"\\x15\\x03\""}
	silent := []string{"no answer within 2s", "not sent: the node is not answering (every call in flight is past the node timeout)",
		"no reply to SCAN within 2s"}
	for _, tc := range []struct {
		addr string
		msgs []string
		want bool
	}{
		{plain, never, false}, {secure, never, false}, {"127.0.0.1:1003", closed, false},
		{plain, closed, true}, {plain, silent, false},
		{secure, closed, true}, {secure, silent, true},
	} {
		for _, msg := range tc.msgs {
			if got := mayBeScheme(tc.addr, msg); got != tc.want {
				t.Errorf("mayBeScheme(%s, %q) = %v, want %v", tc.addr, msg, got, tc.want)
			}
		}
	}
}

// TestTLSHint: a server's alert about our certificate asks for a client certificate, a
// server certificate that does not verify for the CA, and a message that already names a TLS
// flag gets nothing more.
func TestTLSHint(t *testing.T) {
	for msg, want := range map[string]string{
		"remote error: tls: certificate required":                                          "pass --tls-cert FILE and --tls-key FILE",
		"remote error: tls: bad certificate":                                               "pass --tls-cert FILE and --tls-key FILE",
		"tls: failed to verify certificate: x509: certificate signed by unknown authority": "pass --tls-ca FILE",
		"EOF": "",
	} {
		got := tlsHint(msg)
		if want == "" && got != msg || want != "" && !strings.Contains(got, want) {
			t.Errorf("tlsHint(%q) = %q, want it to add %q", msg, got, want)
		}
	}
	if msg := "x509: certificate signed by unknown authority (for a private CA, pass --tls-ca FILE)"; tlsHint(msg) != msg {
		t.Errorf("a hinted message got another hint: %q", tlsHint(msg))
	}
}
