package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/redis/go-redis/v9"
)

// nodesEnv is the environment variable that names real nodes when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

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
func nodeSpec(e *env, flagValue string) (spec, source string) {
	if strings.TrimSpace(flagValue) != "" {
		return flagValue, "--nodes"
	}
	if v := e.getenv(nodesEnv); strings.TrimSpace(v) != "" {
		return v, nodesEnv
	}
	return "", ""
}

// nodeURL is one entry of a node list: its text and its parsed options.
type nodeURL struct {
	raw  string
	opts *redis.Options
}

// parseNodeURLs parses a comma-separated list of redis:// (or rediss://, unix://) URLs.
func parseNodeURLs(spec, source string) ([]nodeURL, error) {
	var urls []nodeURL
	seen := map[string]int{}
	for i, raw := range strings.Split(spec, ",") {
		u := strings.TrimSpace(raw)
		if u == "" {
			return nil, fmt.Errorf("%s: entry %d of the node list is empty", source, i+1)
		}
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("%s: bad node URL %q: %v (want redis://HOST:PORT)", source, redactURL(u), err)
		}
		key := o.Network + " " + o.Addr
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s: entries %d and %d are the same node %s; Redlock needs independent nodes", source, j+1, i+1, o.Addr)
		}
		seen[key] = i
		urls = append(urls, nodeURL{raw: u, opts: o})
	}
	return urls, nil
}

// redactURL hides a password in a URL that is about to be printed.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return u
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return u
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// openNodes connects to the real nodes named by spec and checks that every one answers PING
// within pingTimeout. With an empty spec it starts n embedded nodes on free ports instead.
func openNodes(ctx context.Context, spec, source string, n int) (*nodeSet, error) {
	if spec == "" {
		en, err := embedded.Start(n, nil)
		if err != nil {
			return nil, err
		}
		s := &nodeSet{addrs: en.Addrs(), source: "embedded", embedded: en}
		for _, a := range s.addrs {
			s.clients = append(s.clients, redis.NewClient(&redis.Options{Addr: a}))
		}
		return s, nil
	}

	urls, err := parseNodeURLs(spec, source)
	if err != nil {
		return nil, err
	}
	if err := pingAll(ctx, urls, source); err != nil {
		return nil, err
	}
	s := &nodeSet{source: source}
	for _, u := range urls {
		s.clients = append(s.clients, redis.NewClient(u.opts))
		s.addrs = append(s.addrs, u.opts.Addr)
	}
	return s, nil
}

// pingAll checks that every node answers PING within pingTimeout, all in parallel, and
// reports the first node (in list order) that did not, and how many others failed too.
// It probes with throwaway clients that dial once and do not retry, so that a refused
// connection fails at once instead of after go-redis's dial retries.
func pingAll(ctx context.Context, urls []nodeURL, source string) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			o, _ := redis.ParseURL(u.raw) // a fresh copy: it parsed before
			o.DialerRetries = 1
			o.MaxRetries = -1
			c := redis.NewClient(o)
			defer c.Close()
			errs[i] = c.Ping(ctx).Err()
		})
	}
	wg.Wait()
	var first error
	failed := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if first == nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %v", pingTimeout)
			}
			first = fmt.Errorf("node %s (from %s) did not answer PING: %v", urls[i].opts.Addr, source, err)
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more nodes failed)", first, failed-1)
	}
	return first
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
