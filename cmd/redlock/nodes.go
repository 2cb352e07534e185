package main

// Connecting to the nodes a command works with: dialling and pinging them, and starting
// the embedded nodes of the demo. Where the node list comes from is in nodelist.go;
// parsing its URLs and hiding their passwords is in nodeurl.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/embedded"
	"github.com/redis/go-redis/v9"
)

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
			s.clients = append(s.clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialerRetries: 1}))
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
		o.MaxRetries = -1   // the lock retries whole attempts itself (docs/operations.md)
		o.DialerRetries = 1 // and a refused connection fails at once, as "connection refused"
		s.clients = append(s.clients, redis.NewClient(&o))
		s.addrs = append(s.addrs, u.opts.Addr)
	}
	return s, nil
}

// pingAll checks that every node answers PING within pingTimeout, all in parallel, and
// reports the first node (in list order) that did not, and how many others failed too.
func pingAll(ctx context.Context, urls []nodeURL, source string) error {
	errs := pingNodes(ctx, urls, len(urls))
	probeFailures(urlAddrs(urls), errs)
	var first error
	failed := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if first == nil {
			first = fmt.Errorf("node %s (from %s) did not answer PING: %s", urls[i].opts.Addr, source, withNodeHint(urls[i].opts.Addr, err.Error()))
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more nodes failed)", first, failed-1)
	}
	return first
}

// urlAddrs returns the URLs' addresses, in order.
func urlAddrs(urls []nodeURL) []string {
	addrs := make([]string, len(urls))
	for i, u := range urls {
		addrs[i] = u.opts.Addr
	}
	return addrs
}

// errNotWaited is the ping result of a node that had not answered when enough others had.
var errNotWaited = errors.New("not waited for: enough other nodes answered")

// pingNodes sends PING to every node in parallel and returns one error per node, nil for
// a node that answered. It stops waiting once need nodes have answered (the others get
// errNotWaited), pingTimeout has passed, or ctx ends (the nodes not heard from get its
// error). It probes with throwaway clients that dial once and do not retry, so that a
// refused connection fails at once. Every probe has ended when it returns: the probes still
// waiting are closed, which ends their PING at once (go-redis stops a read at its deadline,
// not when its context is cancelled, so a hung node would otherwise hold the caller for the
// whole pingTimeout after a quorum had answered).
func pingNodes(ctx context.Context, urls []nodeURL, need int) []error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(urls))
	probes := make([]*redis.Client, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		o := *u.opts // a copy: the probe's settings are its own
		o.DialerRetries = 1
		o.MaxRetries = -1
		o.ContextTimeoutEnabled = true
		probes[i] = redis.NewClient(&o)
		wg.Go(func() {
			err := probes[i].Ping(ctx).Err()
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
				err = fmt.Errorf("no answer within %v", pingTimeout) // the read stops at ctx's deadline
			}
			results <- result{i: i, err: err}
		})
	}
	errs := make([]error, len(urls))
	for i := range errs {
		errs[i] = errNotWaited
	}
	ok := 0
wait:
	for range urls {
		select {
		case r := <-results:
			errs[r.i] = r.err
			if r.err == nil {
				if ok++; ok >= need {
					break wait
				}
			}
		case <-ctx.Done(): // pingTimeout passed, or the caller gave up (a signal)
			why := ctx.Err()
			if errors.Is(why, context.DeadlineExceeded) {
				why = fmt.Errorf("no answer within %v", pingTimeout)
			}
			for i, err := range errs {
				if err == errNotWaited {
					errs[i] = why
				}
			}
			break wait
		}
	}
	for _, p := range probes {
		_ = p.Close()
	}
	wg.Wait()
	return errs
}

// dialNodes returns one go-redis client per URL for the commands that work with real nodes
// (exec, status, top). The clients honour context deadlines on reads and writes, so no call
// outlives the library's exec budget (4 × the node timeout, at least 1 s) nor go-redis's
// read timeout, whichever comes first, and a hung node delays no renewal. They dial once
// and do not resend a command: a refused connection is then reported as such instead of as
// a timeout, and retrying is the lock protocol's business (the next attempt or renewal).
// Close them with shutdown, which does not wait for a hung node.
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

// shutdown closes the Clients cs and then the go-redis clients they run on, at the end of
// a command. It waits at most patience for the calls the Clients still have in flight (a
// release on a slow node, say): Client.Close waits for every such call, and one written to a
// hung node ends only at go-redis's read timeout (3 s) or the library's exec budget (4 × the
// node timeout, at least 1 s), queued calls one batch after another. Past patience it closes
// the go-redis clients, which ends those calls at once as failures of the connection, and
// waits at most patience again: what still holds Close then (a wake-up subscription being
// dialled to a hung node, which closing the client does not end) is left to the process's
// exit. Nothing the command waits for is lost: its reads are done, its lock released (or
// not) on the nodes that answer, and a release that did not reach a node expires there with
// its TTL.
func shutdown(clients []redis.UniversalClient, patience time.Duration, cs ...*redlock.Client) {
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() { _ = c.Close() })
		}
		wg.Wait()
		close(done)
	}()
	if waitFor(done, patience) {
		closeClients(clients)
		return
	}
	closeClients(clients)
	waitFor(done, patience)
}

// waitFor waits at most d for done to close and reports whether it did.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
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

// readerOptions is what a reading command's command line says about its nodes and its
// Client: --nodes, the TLS flags, --node-timeout, --amnesia-tolerance and --counter-layout.
type readerOptions struct {
	nodes       string
	tls         *tlsFlags
	nodeTimeout time.Duration
	amnesia     int
	layout      redlock.CounterLayout
}

// openReader dials the real nodes named by --nodes (or the environment), with the TLS flags,
// and makes a Client with the command's node timeout, amnesia tolerance and counter layout.
func openReader(e *env, cmd string, o readerOptions) (*reader, error) {
	urls, _, err := realNodes(e, cmd, o.nodes)
	if err != nil {
		return nil, err
	}
	if err := o.tls.apply(cmd, urls); err != nil {
		return nil, err
	}
	clients := dialNodes(urls)
	c, err := redlock.New(clients, redlock.WithNodeTimeout(o.nodeTimeout), redlock.WithAmnesiaTolerance(o.amnesia), redlock.WithCounterLayout(o.layout))
	if err != nil {
		closeClients(clients)
		return nil, usageErrorf("%s: %s", cmd, bare(err))
	}
	return &reader{c: c, clients: clients, urls: urls}, nil
}

// close closes the reader without waiting for a node that did not answer: its reads are
// done, and their late replies are of no use.
func (r *reader) close() { shutdown(r.clients, 0, r.c) }
