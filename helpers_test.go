package redlock

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// miniNodes starts n miniredis servers and one go-redis client per server, built with
// default options. Everything is closed when the test ends.
func miniNodes(tb testing.TB, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	tb.Helper()
	servers := make([]*miniredis.Miniredis, n)
	clients := make([]redis.UniversalClient, n)
	for i := range servers {
		servers[i] = miniredis.RunT(tb)
		rc := redis.NewClient(&redis.Options{Addr: servers[i].Addr()})
		tb.Cleanup(func() { rc.Close() })
		clients[i] = rc
		inProcess.Store(rc, true)
		tb.Cleanup(func() { inProcess.Delete(rc) })
	}
	return servers, clients
}

// inProcess holds the node clients made by miniNodes: clients of servers that run inside
// the test's own process.
var inProcess sync.Map

// inProcessNodeTimeout is newTestClient's node timeout for Clients whose nodes all run in
// the test's process (miniNodes), unless the test gives its own: such a node answers only
// when the test's process is scheduled, and a -race run of every package on two cores has
// starved it past the default 100 ms (a release then failed on two nodes of three, once in
// TestSlotCountersBoundMemory, once in TestAcquireAfterOwnRelease). A real redis-server
// answers whatever this process does, so tests on real nodes keep the default.
const inProcessNodeTimeout = 2 * time.Second

// newTestClient builds a Client and closes it when the test ends (before the node clients,
// since cleanups run last-in first-out). Over miniNodes' clients alone its node timeout is
// inProcessNodeTimeout unless opts set one.
func newTestClient(tb testing.TB, clients []redis.UniversalClient, opts ...Option) *Client {
	tb.Helper()
	all := len(clients) > 0
	for _, rc := range clients {
		if _, ok := inProcess.Load(rc); !ok {
			all = false
		}
	}
	if all { // first, so that the test's own WithNodeTimeout wins
		opts = append([]Option{WithNodeTimeout(inProcessNodeTimeout)}, opts...)
	}
	c, err := New(clients, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// commandCounts returns how many commands each miniredis server has processed.
func commandCounts(servers []*miniredis.Miniredis) []int {
	out := make([]int, len(servers))
	for i, s := range servers {
		out[i] = s.CommandCount()
	}
	return out
}

// hungNode is a TCP server that accepts connections and reads requests but never answers,
// like a Redis process stopped with SIGSTOP (the kernel still completes the handshake).
type hungNode struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startHungNode(tb testing.TB) *hungNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	h := &hungNode{ln: ln}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, conn)
			h.mu.Unlock()
		}
	}()
	tb.Cleanup(h.close)
	return h
}

// withHungNodes returns clients followed by clients of k nodes that accept connections and
// never answer (startHungNode, with go-redis's default options), and those nodes.
func withHungNodes(tb testing.TB, clients []redis.UniversalClient, k int) ([]redis.UniversalClient, []*hungNode) {
	tb.Helper()
	out := append([]redis.UniversalClient(nil), clients...)
	hung := make([]*hungNode, k)
	for i := range hung {
		hung[i] = startHungNode(tb)
		rc := redis.NewClient(&redis.Options{Addr: hung[i].addr()})
		tb.Cleanup(func() { rc.Close() })
		out = append(out, rc)
	}
	return out, hung
}

func (h *hungNode) addr() string { return h.ln.Addr().String() }

// close drops every connection, so clients blocked on a read get an error at once.
func (h *hungNode) close() {
	h.ln.Close()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

// ctxT returns a context bounded for a test step.
func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// settle waits for the background work of c's past calls (replies after a decided outcome,
// undos). Only for tests that make no concurrent call.
func settle(c *Client) { c.bg.Wait() }

// holderIDs is a go-redis hook that records the holder id of every acquire script a client
// sends, alone or in a pipeline. Each attempt draws a new id, so the number of distinct ids
// is the number of attempts that reached the nodes, whichever nodes they reached. An id
// counts from the first time it is sent: an attempt decided before reset may still send to
// its last node afterwards (the transport sends on its own), and that does not count again.
type holderIDs struct {
	mu   sync.Mutex
	ids  map[string]bool // first sent since the last reset
	seen map[string]bool // ever sent
}

func (h *holderIDs) note(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 || args[0] != "evalsha" && args[0] != "eval" {
		return
	}
	switch args[1] {
	case acquireScript.Hash(), acquireScript.src, acquireQueuedScript.Hash(), acquireQueuedScript.src:
	default:
		return
	}
	if n, ok := args[2].(int); ok && len(args) > 3+n {
		id := fmt.Sprint(args[3+n])
		h.mu.Lock()
		if h.ids == nil {
			h.ids = map[string]bool{}
		}
		if h.seen == nil {
			h.seen = map[string]bool{}
		}
		if !h.seen[id] {
			h.seen[id], h.ids[id] = true, true
		}
		h.mu.Unlock()
	}
}

func (h *holderIDs) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

func (h *holderIDs) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = nil
}

func (*holderIDs) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holderIDs) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h *holderIDs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return next(ctx, cmds)
	}
}

// countAttempts installs a holderIDs hook on every client.
func countAttempts(clients []redis.UniversalClient) *holderIDs {
	h := &holderIDs{}
	for _, c := range clients {
		c.(*redis.Client).AddHook(h)
	}
	return h
}

// aheadOfSeeds is a counter value an hour ahead of the clock in microseconds, for tests that
// set counters out of step: with the slot layout every token is at least the acquiring
// client's clock reading, which would hide counters set below it.
func aheadOfSeeds() int64 { return time.Now().Add(time.Hour).UnixMicro() }

// schedLag starts measuring how late a 5 ms ticker fires, at most, until the returned
// function is called: how far this process is from being scheduled on time. A test whose
// bound assumes timers run on time (within a cancel margin, say) can tell a starved machine
// from a broken bound with it. It stops at tb's cleanup if not before (a test that fails
// first leaves no ticker running).
func schedLag(tb testing.TB) (stop func() time.Duration) {
	const every = 5 * time.Millisecond
	done := make(chan struct{})
	var worst time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case now := <-t.C:
				worst = max(worst, now.Sub(last)-every, time.Since(now))
				last = now
			case <-done:
				return
			}
		}
	})
	var once sync.Once
	stop = func() time.Duration {
		once.Do(func() { close(done) })
		wg.Wait()
		return worst
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// aclUserClients returns one go-redis client per address that logs in as the ACL user "lock"
// with password pw (the real-server ACL tests start their nodes with that user), closed when
// the test ends.
func aclUserClients(tb testing.TB, addrs []string, pw string) []redis.UniversalClient {
	tb.Helper()
	cs := make([]redis.UniversalClient, 0, len(addrs))
	for _, a := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: a, Username: "lock", Password: pw, MaxRetries: -1})
		tb.Cleanup(func() { rc.Close() })
		cs = append(cs, rc)
	}
	return cs
}

// slowLastNode starts n real redis-server nodes and returns clients that reach every node
// directly (admin), clients for a Client (nodes) that reach the last node through a
// faultproxy, built with opts (its Addr set here), and that proxy, which adds no delay until
// SetDelay. Everything is closed and stopped when the test ends.
func slowLastNode(t *testing.T, n int, opts redis.Options) (admin, nodes []redis.UniversalClient, slow *faultproxy.Proxy) {
	t.Helper()
	cluster := redisproc.StartT(t, n, redisproc.Config{})
	slow, err := faultproxy.Start(cluster.Addrs()[n-1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	nodes = cluster.ClientsT(t)
	opts.Addr = slow.Addr()
	rc := redis.NewClient(&opts)
	t.Cleanup(func() { rc.Close() })
	nodes[n-1] = rc
	return cluster.ClientsT(t), nodes, slow
}
