package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/redis/go-redis/v9"
)

// nodesEnv is the environment variable that names real nodes when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

// nodesFileEnv names a file that holds the node list, for credentials that should appear
// neither in argv (/proc/PID/cmdline) nor in the environment of every child: one or more
// URLs per line, separated by commas or new lines; blank lines and lines starting with '#'
// are skipped. Used when neither --nodes nor REDLOCK_NODES is given.
const nodesFileEnv = "REDLOCK_NODES_FILE"

// authEnv is the password for the nodes whose URL has none, as redis-cli reads it.
const authEnv = "REDISCLI_AUTH"

// credentialEnv lists the variables that carry node addresses or credentials; exec removes
// them from its command's environment unless --keep-node-env is given.
var credentialEnv = []string{nodesEnv, nodesFileEnv, authEnv}

// pingTimeout bounds the reachability check of real nodes.
const pingTimeout = 2 * time.Second

// nodeSet is the Redis nodes a command works with: real ones named by the user, or
// embedded ones started for this run. Close releases whichever it holds.
type nodeSet struct {
	clients  []redis.UniversalClient
	addrs    []string
	source   string          // where the nodes came from: "--nodes", "REDLOCK_NODES" or "embedded"
	embedded *embedded.Nodes // nil for real nodes
}

// nodeSpec returns the node list the user asked for: the --nodes flag's value, else the
// REDLOCK_NODES environment variable, and which of the two it came from. An empty spec
// means no real nodes were named.
func nodeSpec(e *env, flagValue string) (spec, source string, err error) {
	if strings.TrimSpace(flagValue) != "" {
		return flagValue, "--nodes", nil
	}
	if v := e.getenv(nodesEnv); strings.TrimSpace(v) != "" {
		return v, nodesEnv, nil
	}
	if path := e.getenv(nodesFileEnv); strings.TrimSpace(path) != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", "", fmt.Errorf("%s: %v", nodesFileEnv, err)
		}
		var entries []string
		for line := range strings.Lines(string(b)) {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			entries = append(entries, strings.TrimRight(line, ","))
		}
		if len(entries) == 0 {
			return "", "", fmt.Errorf("%s: %s names no nodes", nodesFileEnv, path)
		}
		return strings.Join(entries, ","), nodesFileEnv + " (" + path + ")", nil
	}
	return "", "", nil
}

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

// openNodes connects to the real nodes named by spec and checks that every one answers PING
// within pingTimeout. With an empty spec it starts n embedded nodes on free ports instead.
func openNodes(ctx context.Context, spec, source, password string, n int) (*nodeSet, error) {
	if spec == "" {
		en, err := embedded.Start(n, nil)
		if err != nil {
			return nil, err
		}
		s := &nodeSet{addrs: en.Addrs(), source: "embedded", embedded: en}
		for _, a := range s.addrs {
			s.clients = append(s.clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
		}
		return s, nil
	}

	urls, err := parseNodeURLs(spec, source, password)
	if err != nil {
		return nil, err
	}
	if err := pingAll(ctx, urls, source); err != nil {
		return nil, err
	}
	s := &nodeSet{source: source}
	for _, u := range urls {
		o := *u.opts
		o.MaxRetries = -1 // the lock retries whole attempts itself (docs/operations.md)
		s.clients = append(s.clients, redis.NewClient(&o))
		s.addrs = append(s.addrs, u.opts.Addr)
	}
	return s, nil
}

// pingAll checks that every node answers PING within pingTimeout, all in parallel, and
// reports the first node (in list order) that did not, and how many others failed too.
func pingAll(ctx context.Context, urls []nodeURL, source string) error {
	errs := pingNodes(ctx, urls, len(urls))
	var first error
	failed := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if first == nil {
			first = fmt.Errorf("node %s (from %s) did not answer PING: %s", urls[i].opts.Addr, source, tlsHint(err.Error()))
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more nodes failed)", first, failed-1)
	}
	return first
}

// errNotWaited is the ping result of a node that had not answered when enough others had.
var errNotWaited = errors.New("not waited for: enough other nodes answered")

// pingNodes sends PING to every node in parallel and returns one error per node, nil for
// a node that answered. It stops waiting once need nodes have answered (the others get
// errNotWaited) or pingTimeout has passed. It probes with throwaway clients that dial once,
// do not retry and honour the context's deadline, so that a refused connection fails at
// once and a hung node costs no more than pingTimeout. Every probe has ended when it
// returns.
func pingNodes(ctx context.Context, urls []nodeURL, need int) []error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			o := *u.opts // a copy: the probe's settings are its own
			o.DialerRetries = 1
			o.MaxRetries = -1
			o.ContextTimeoutEnabled = true
			c := redis.NewClient(&o)
			defer c.Close()
			err := c.Ping(ctx).Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %v", pingTimeout)
			}
			results <- result{i: i, err: err}
		})
	}
	errs := make([]error, len(urls))
	for i := range errs {
		errs[i] = errNotWaited
	}
	ok := 0
	for range urls {
		r := <-results
		errs[r.i] = r.err
		if r.err == nil {
			if ok++; ok >= need {
				break
			}
		}
	}
	cancel()
	wg.Wait()
	return errs
}

// dialNodes returns one go-redis client per URL for the commands that work with real nodes
// (exec, status). The clients honour context deadlines on reads and writes, so no call
// outlives the library's node timeout: a hung node then delays neither a renewal nor
// Client.Close, which otherwise waits for go-redis's read timeout (5 s in v9.23) and its retries. They dial once and
// do not resend a command: a refused connection is then reported as such instead of as a
// timeout, and retrying is the lock protocol's business (the next attempt or renewal).
func dialNodes(urls []nodeURL) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(urls))
	for i, u := range urls {
		o := *u.opts
		o.ContextTimeoutEnabled = true
		o.DialerRetries = 1
		o.MaxRetries = -1
		clients[i] = redis.NewClient(&o)
	}
	return clients
}

// closeClients closes go-redis clients made by dialNodes.
func closeClients(clients []redis.UniversalClient) {
	for _, c := range clients {
		_ = c.Close()
	}
}

// realNodes resolves the node list of a command that needs real nodes (exec, status): the
// --nodes flag, else REDLOCK_NODES. No list at all is a usage error that points at
// 'redlock dev'; a malformed list is an ordinary error naming the bad entry.
func realNodes(e *env, cmdName, flagValue string) ([]nodeURL, string, error) {
	spec, source, err := nodeSpec(e, flagValue)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", cmdName, err)
	}
	if spec == "" {
		return nil, "", usageErrorf("%s: no nodes: pass --nodes redis://HOST:PORT,... or set %s or %s (try 'redlock dev' for local nodes)", cmdName, nodesEnv, nodesFileEnv)
	}
	urls, err := parseNodeURLs(spec, source, e.getenv(authEnv))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", cmdName, err)
	}
	return urls, source, nil
}

// describe says in a few words which nodes these are.
func (s *nodeSet) describe() string {
	if s.embedded != nil {
		return fmt.Sprintf("%d embedded nodes (%s)", len(s.addrs), strings.Join(s.addrs, ", "))
	}
	return fmt.Sprintf("%d nodes from %s (%s)", len(s.addrs), s.source, strings.Join(s.addrs, ", "))
}

// Close closes the go-redis clients and stops embedded nodes. Call it after closing any
// redlock.Client built on the clients.
func (s *nodeSet) Close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
	if s.embedded != nil {
		s.embedded.Close()
	}
}

// reader is a Client for the commands that only read the nodes (status, top), with its
// go-redis clients.
type reader struct {
	c       *redlock.Client
	clients []redis.UniversalClient
	urls    []nodeURL
}

// openReader dials the real nodes named by --nodes (or the environment), with the TLS flags,
// and makes a Client with the command's node timeout and amnesia tolerance.
func openReader(e *env, cmd, nodesFlag string, tlsf *tlsFlags, nodeTimeout time.Duration, amnesia int, layout redlock.CounterLayout) (*reader, error) {
	urls, _, err := realNodes(e, cmd, nodesFlag)
	if err != nil {
		return nil, err
	}
	if err := tlsf.apply(cmd, urls); err != nil {
		return nil, err
	}
	clients := dialNodes(urls)
	c, err := redlock.New(clients, redlock.WithNodeTimeout(nodeTimeout), redlock.WithAmnesiaTolerance(amnesia), redlock.WithCounterLayout(layout))
	if err != nil {
		closeClients(clients)
		return nil, usageErrorf("%s: %s", cmd, bare(err))
	}
	return &reader{c: c, clients: clients, urls: urls}, nil
}

func (r *reader) close() {
	r.c.Close()
	closeClients(r.clients)
}
