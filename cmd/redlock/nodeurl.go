package main

// The pure half of the node list: parsing the nodes file and the node URLs, and hiding
// their passwords, apart from reading the list (nodelist.go) and dialling and pinging the
// nodes (nodes.go), so that it can be fuzzed (FuzzNodeURLSecret) without a server.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// nodeURL is one entry of a node list: its text and its parsed options.
type nodeURL struct {
	raw  string
	opts *redis.Options
}

// nodesFileEntries returns the entries of a nodes file ($REDLOCK_NODES_FILE): one or more
// URLs per line, separated by commas or new lines; blank lines and lines starting with '#'
// are skipped, a '#' after a space, a tab or a comma starts a comment that runs to the end of
// the line (a URL holds none of these: a '#' in one, starting a fragment or in a password,
// follows something else), and a line's trailing commas are dropped.
func nodesFileEntries(text string) []string {
	var entries []string
	for line := range strings.Lines(text) {
		if i := trailingComment.FindStringIndex(line); i != nil {
			line = line[:i[0]+1] // keeps the comma before a comment, dropped below
		}
		line = strings.TrimRight(strings.TrimSpace(line), ",")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entries = append(entries, line)
	}
	return entries
}

// trailingComment matches a comment after an entry on a line of a nodes file.
var trailingComment = regexp.MustCompile(`[ \t,]#`)

// commaHint ends the error of a node list that a ',' in a URL seems to have cut.
const commaHint = "; a ',' inside a password or a query value splits the list: write it as %2C"

// parseNodeURLs parses a comma-separated list of redis:// (or rediss://, unix://) URLs.
// password, when not empty, is given to the nodes whose URL has none ($REDISCLI_AUTH). No
// error quotes more of an entry than redactURL shows, and an entry that is not a URL of
// those schemes is named by its place in the list alone: it may be the second half of a
// password that a ',' cut in two.
func parseNodeURLs(spec, source, password string) ([]nodeURL, error) {
	var urls []nodeURL
	seen := map[string]int{}
	entries := strings.Split(spec, ",")
	for i, raw := range entries {
		u := strings.TrimSpace(raw)
		if u == "" {
			return nil, fmt.Errorf("%s: entry %d of the node list is empty", source, i+1)
		}
		if !nodeScheme(u) {
			hint := ""
			if len(entries) > 1 {
				hint = commaHint
			}
			return nil, fmt.Errorf("%s: bad node URL: entry %d of the node list is not a redis://, rediss:// or unix:// URL (want redis://HOST:PORT%s)", source, i+1, hint)
		}
		o, problem := parseNodeURL(u)
		if problem != "" {
			hint := ""
			if i+1 < len(entries) && (!nodeScheme(strings.TrimSpace(entries[i+1])) || cutBeforeAt(u, entries[i+1:])) {
				// The next entry is no URL either, or this one has no '@' and a later one
				// has: most likely a ',' in a password cut this one short.
				hint = commaHint
			}
			return nil, fmt.Errorf("%s: bad node URL %q: %s (want redis://HOST:PORT%s)", source, redactURL(u), problem, hint)
		}
		if redactURL(o.Addr) != o.Addr {
			// The address itself holds what may be a password (a socket path with "user:pass@"
			// in it, say): it would show in every message that names the node.
			return nil, fmt.Errorf("%s: bad node URL %q: the address looks like it holds a password (want redis://HOST:PORT)", source, redactURL(u))
		}
		key := o.Network + " " + o.Addr
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s: entries %d and %d are the same node %s; Redlock needs independent nodes", source, j+1, i+1, o.Addr)
		}
		seen[key] = i
		if o.Password == "" && password != "" {
			o.Password = password
		}
		urls = append(urls, nodeURL{raw: u, opts: o})
	}
	noteSchemes(urls)
	return urls, nil
}

// cutBeforeAt reports whether entry u of a node list has no '@' while one of the entries
// after it has: the shape of a URL whose password held a ',' (the list was cut inside the
// password, and the '@' that ends it went with the rest).
func cutBeforeAt(u string, rest []string) bool {
	if strings.Contains(u, "@") {
		return false
	}
	for _, r := range rest {
		if strings.Contains(r, "@") {
			return true
		}
	}
	return false
}

// nodeScheme reports whether u starts with one of the schemes go-redis dials, in any case
// (as url.Parse reads a scheme).
func nodeScheme(u string) bool {
	scheme, _, ok := strings.Cut(u, ":")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
		return true
	}
	return false
}

// parseNodeURL parses one node URL as go-redis does, and says what is wrong with one it
// refuses or would read otherwise than meant, in words that quote nothing of the URL.
func parseNodeURL(u string) (*redis.Options, string) {
	o, problem := nodeOptions(u)
	if problem != "" && atAfterAuthority(u) {
		problem += "; a '/', '?', '#' or '%' in a password is written %2F, %3F, %23 or %25"
	}
	return o, problem
}

// atAfterAuthority reports whether an '@' comes after the first '/', '?' or '#' that follows
// the scheme's "//": a password holding one of those unescaped, which ends the host part
// early (url.Parse then reads the password as a port, a path or a query).
func atAfterAuthority(u string) bool {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return false
	}
	i := strings.IndexAny(rest, "/?#")
	return i >= 0 && strings.Contains(rest[i:], "@")
}

// nodeOptions is parseNodeURL without the hint about a password's reserved characters.
func nodeOptions(u string) (*redis.Options, string) {
	if problem := hostProblem(u); problem != "" {
		return nil, problem
	}
	pu, err := url.Parse(u)
	if err != nil {
		return nil, urlProblem(err)
	}
	if pu.Fragment != "" || strings.HasSuffix(u, "#") {
		return nil, "a '#' fragment, which go-redis ignores (a '#' in a password must be written %23)"
	}
	if _, err := url.ParseQuery(pu.RawQuery); err != nil {
		return nil, urlProblem(err)
	}
	for k := range pu.Query() {
		if secretOption[strings.ToLower(k)] {
			return nil, "a password in the query, which go-redis does not read: write redis://USER:PASSWORD@HOST:PORT, " +
				"or set $" + authEnv + " to the password"
		}
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, optionProblem(err, pu)
	}
	if o.DB < 0 { // go-redis takes /-1 and ?db=-1, and the server's SELECT is never sent: DB 0
		return nil, "an invalid database number (/0, /1, ...)"
	}
	if o.Network == "tcp" {
		if _, port, err := net.SplitHostPort(o.Addr); err == nil {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return nil, "a port outside 1-65535"
			}
		}
	}
	return o, ""
}

// queryOptions are the query parameters that go-redis's ParseURL reads (v9.23): their names
// show in a redacted URL and in messages, their values never do.
var queryOptions = map[string]bool{
	"db": true, "protocol": true, "client_name": true, "max_retries": true, "min_retry_backoff": true,
	"max_retry_backoff": true, "dial_timeout": true, "read_timeout": true, "write_timeout": true,
	"pool_fifo": true, "pool_size": true, "pool_timeout": true, "min_idle_conns": true,
	"max_idle_conns": true, "max_active_conns": true, "max_concurrent_dials": true,
	"pipeline_pool_size": true, "pipeline_read_buffer_size": true, "pipeline_write_buffer_size": true,
	"conn_max_idle_time": true, "idle_timeout": true, "conn_max_lifetime": true, "max_conn_age": true,
	"conn_max_lifetime_jitter": true, "skip_verify": true,
}

// secretOption are query parameters that other Redis clients read a password or a user from
// (go-redis's Sentinel URLs among them) but go-redis's ParseURL refuses; lower case.
var secretOption = map[string]bool{
	"password": true, "username": true, "user": true, "pass": true, "passwd": true, "pwd": true, "auth": true,
}

// optionProblem says what go-redis refused in a URL that url.Parse accepted. go-redis's
// messages quote the path, option values and unknown option names, any of which may be a
// password, so only the names of its own options are taken from them.
func optionProblem(err error, pu *url.URL) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "invalid database number"):
		return "an invalid database number (/0, /1, ...)"
	case strings.Contains(msg, "invalid URL path"):
		return "a path other than /DB"
	case strings.Contains(msg, "empty unix socket path"):
		return "an empty unix socket path"
	case strings.Contains(msg, "unexpected option"):
		for i, p := range strings.Split(pu.RawQuery, "&") {
			k, _, _ := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); err != nil || !queryOptions[name] {
				return fmt.Sprintf("an option go-redis does not know (query parameter %d)", i+1)
			}
		}
		return "an option given twice, or skip_verify without rediss://"
	}
	for name := range queryOptions {
		if strings.Contains(msg, "invalid "+name+" ") {
			return "an invalid value for " + name
		}
	}
	return "a malformed URL"
}

// hostProblem says what is wrong with the host part of a redis:// or rediss:// URL that
// go-redis would accept but read differently from what was meant: no "//" (the rest is
// taken as opaque text and the node defaults to localhost:6379), no port (6379 is assumed),
// or a host with a stray ':'. "" when the URL is fine or not of those schemes (unix:// has
// a path, not a host). The message quotes nothing from the URL.
func hostProblem(u string) string {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") {
		return "" // left to parseNodeURL
	}
	switch {
	case pu.Opaque != "" || pu.Host == "":
		return `no host: "//" missing after the scheme`
	case pu.Port() == "":
		return "no port"
	case strings.Contains(pu.Hostname(), ":") && !strings.HasPrefix(pu.Host, "["):
		return "a malformed host:port (an IPv6 address needs brackets)"
	}
	return ""
}

// redactURL hides the password of a URL that is about to be printed. It works on text that
// does not parse as a URL too, which is when it is needed, and errs on the side of hiding:
//   - with an '@' before any '?' or '#': everything between the first ':' of the user
//     information and the last such '@' becomes "xxxxx" (a password may hold '/' or '@'
//     unescaped); with no ':' there and no scheme, all of it (the second half of a password
//     that a ',' of the node list cut in two);
//   - after that '@' (or in the whole text, without one): a ':' in the host part not
//     followed by a port number starts what may be the first half of such a password, and
//     the rest of the text up to the query becomes "xxxxx"; so does a path other than /DB;
//   - the query and the fragment: every value becomes "xxxxx", and every name that is not
//     one of go-redis's options or a password's; an '@' after the '?' or '#' may end user
//     information whose password holds one, so all after the first ':' is hidden then.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		scheme, rest = "", u
	} else {
		scheme += "://"
	}
	head, tail := rest, ""
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		head, tail = rest[:q], rest[q:]
	}
	if strings.IndexByte(tail, '@') >= 0 {
		if user, _, hasPass := strings.Cut(head, ":"); hasPass {
			return scheme + user + ":xxxxx" + redactTail(tail)
		}
	}
	prefix, body := scheme, head
	if at := strings.LastIndexByte(head, '@'); at >= 0 {
		user, _, hasPass := strings.Cut(head[:at], ":")
		switch {
		case hasPass:
			prefix += user + ":xxxxx@"
		case scheme == "" && at > 0:
			prefix += "xxxxx@"
		default:
			prefix += head[:at+1]
		}
		body = head[at+1:]
	}
	if scheme != "" && !strings.EqualFold(scheme, "unix://") {
		body = redactPath(body)
	}
	return prefix + redactHost(body) + redactTail(tail)
}

// redactPath hides the path after a host unless it is a database number.
func redactPath(s string) string {
	host, path, ok := strings.Cut(s, "/")
	if !ok || path == "" || strings.Trim(path, "0123456789") == "" {
		return s
	}
	return host + "/xxxxx"
}

// redactTail hides the query and the fragment of a URL (the text from its first '?' or '#')
// but the names of go-redis's options and of password parameters.
func redactTail(s string) string {
	query, frag, hasFrag := strings.Cut(s, "#")
	var b strings.Builder
	if params, ok := strings.CutPrefix(query, "?"); ok {
		b.WriteByte('?')
		for i, p := range strings.Split(params, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, v, hasValue := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			switch {
			case err == nil && (queryOptions[name] || secretOption[strings.ToLower(name)]):
				b.WriteString(name)
			case k != "":
				b.WriteString("xxxxx")
			}
			if hasValue {
				b.WriteByte('=')
				if v != "" {
					b.WriteString("xxxxx")
				}
			}
		}
	}
	if hasFrag {
		b.WriteByte('#')
		if frag != "" {
			b.WriteString("xxxxx")
		}
	}
	return b.String()
}

// redactHost hides what follows a ':' in the host part that is not a port number: it may be
// the first half of a password cut off by the ',' that separates the entries of a node list.
func redactHost(s string) string {
	off := 0
	if strings.HasPrefix(s, "[") { // an IPv6 literal: its port follows the ']'
		if end := strings.IndexByte(s, ']'); end >= 0 {
			off = end + 1
		}
	}
	i := strings.IndexByte(s[off:], ':')
	if i < 0 {
		return s
	}
	i += off
	after := s[i+1:]
	j := 0
	for j < len(after) && after[j] >= '0' && after[j] <= '9' {
		j++
	}
	if j > 0 && j <= 5 && (j == len(after) || strings.IndexByte("/?#", after[j]) >= 0) {
		return s // a port
	}
	return s[:i] + ":xxxxx"
}

// urlProblem says what url.Parse refused in a node URL, without any text taken from it:
// the parser's own messages quote the URL, and with it the password.
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	var host url.InvalidHostError
	switch msg := err.Error(); {
	case errors.As(err, &esc):
		return "an invalid %-escape; a '%' in a password is written %25"
	case errors.As(err, &host):
		return "an invalid character in the host"
	case strings.Contains(msg, "port"):
		return "an invalid port"
	case strings.Contains(msg, "control character"):
		return "a control character"
	case strings.Contains(msg, "semicolon"):
		return "a ';' in the query (options are separated by '&')"
	case strings.Contains(msg, "userinfo"):
		return "an invalid character in the user information (escape it as %XX)"
	}
	return "a malformed URL"
}
