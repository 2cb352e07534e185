package main

// The pure half of the node list: parsing node URLs and hiding their passwords, apart from
// dialling and pinging the nodes (nodes.go), so that it can be fuzzed (FuzzNodeURLSecret)
// without a server.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// nodeURL is one entry of a node list: its text and its parsed options.
type nodeURL struct {
	raw  string
	opts *redis.Options
}

// parseNodeURLs parses a comma-separated list of redis:// (or rediss://, unix://) URLs.
// password, when not empty, is given to the nodes whose URL has none ($REDISCLI_AUTH).
func parseNodeURLs(spec, source, password string) ([]nodeURL, error) {
	var urls []nodeURL
	seen := map[string]int{}
	for i, raw := range strings.Split(spec, ",") {
		u := strings.TrimSpace(raw)
		if u == "" {
			return nil, fmt.Errorf("%s: entry %d of the node list is empty", source, i+1)
		}
		if problem := hostProblem(u); problem != "" {
			return nil, fmt.Errorf("%s: bad node URL %q: %s (want redis://HOST:PORT)", source, redactURL(u), problem)
		}
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("%s: bad node URL %q: %s (want redis://HOST:PORT)", source, redactURL(u), urlProblem(err, u))
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
	return urls, nil
}

// hostProblem says what is wrong with the host part of a redis:// or rediss:// URL that
// go-redis would accept but read differently from what was meant: no "//" (the rest is
// taken as opaque text and the node defaults to localhost:6379), no port (6379 is assumed),
// or a host with a stray ':'. "" when the URL is fine or not of those schemes (unix:// has
// a path, not a host). The message quotes nothing from the URL.
func hostProblem(u string) string {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") {
		return "" // left to redis.ParseURL and urlProblem
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
//   - with an '@': everything between the first ':' of the user information and the last '@'
//     of the text becomes "xxxxx" (a password may hold '/', '?', '#' or '@' unescaped); with
//     no ':' there and no scheme, all of it (the second half of a password that a ',' of the
//     node list cut in two);
//   - after the last '@' (or in the whole text, without one): a ':' in the host part not
//     followed by a port number starts what may be the first half of such a password, and
//     the rest of the text becomes "xxxxx".
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		scheme, rest = "", u
	} else {
		scheme += "://"
	}
	prefix, body := scheme, rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		switch {
		case hasPass:
			prefix += user + ":xxxxx@"
		case scheme == "" && at > 0:
			prefix += "xxxxx@"
		default:
			prefix += rest[:at+1]
		}
		body = rest[at+1:]
	}
	return prefix + redactHost(body)
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

// urlProblem says what is wrong with a node URL that did not parse, without any text taken
// from it: the parser's own messages quote the URL, and with it the password.
func urlProblem(err error, u string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "an invalid %-escape"
	case errors.As(err, &host):
		return "an invalid character in the host"
	}
	msg := err.Error()
	if strings.Contains(msg, "port") {
		return "an invalid port"
	}
	if redactURL(u) != u || strings.Contains(u, "@") {
		// The parser's message may quote the user information: say less.
		return "a malformed URL"
	}
	return msg
}
