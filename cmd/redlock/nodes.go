package main

// The nodes a command works with: where the list comes from (--nodes, the environment, a
// file), dialling and pinging them, and the embedded nodes of the demo. Parsing the URLs
// and hiding their passwords is in nodeurl.go.

import (
	"context"
	"errors"
	"fmt"
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
