package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
	"github.com/redis/go-redis/v9"
)

// Client acquires locks on a fixed set of independent Redis nodes. It is safe for
// concurrent use by many goroutines. Create it with [New]; call [Client.Close] when done so
// that background work (undoing failed acquires, replies from slow nodes) is waited for.
type Client struct {
	nodes  []node
	quorum int
	cfg    config
	id     string // random, 128 bits in hex: this Client's member in the nodes' waiter queues (queue.go)

	mu        sync.RWMutex // guards closed against bg.Add racing with Close's Wait
	closed    bool
	closeDone chan struct{} // closed when the first Close has finished

	heldMu  sync.Mutex
	held    map[*Lock]struct{}       // locks acquired and not yet released, for Close
	permits map[string]*Lock         // semaphore permits held (or, trying, being attempted) here, by key (semaphore.go)
	leaders map[*Leadership]struct{} // leaderships not resigned (election.go): Close ends them
	wait    waitQueues               // this client's Acquire calls waiting for a key, in arrival order
	wake    wakeHub                  // releases announced by other processes, for the waiters (wakehub.go)
	renewer renewer                  // the renewals of every Do of this client (renew.go)
	bg      sync.WaitGroup           // calls in flight and the background work they started
	// stopSenders is closed by Close once every call is final: the transport's idle
	// senders end.
	stopSenders chan struct{}
	pending     pendingReleases // releases not yet final on every node (pending.go)
}

// New returns a Client over the given nodes. Each element must be a distinct, non-nil
// go-redis client of an independent Redis server (or cluster); two clients with the same
// address count as the same node. The quorum is a majority of the nodes, raised by
// [WithAmnesiaTolerance]. New sends one command, INFO server, to every node, and refuses two
// nodes that are the same server under two addresses (same run_id); it waits at most
// min(node timeout, 1 s) for that, and a node that does not answer in time is not checked.
// It returns an error matching ErrInvalidArgument for no nodes, a nil node, a node given
// twice (the same client, the same address, or the same run_id), a nil option or an option
// out of range. Sentinel-managed clients (redis.NewFailoverClient) have no address of their
// own and are told apart by run_id alone. The clients stay owned by the caller: Close does
// not close them.
//
// An even number of nodes is accepted; without [WithAmnesiaTolerance], New then logs a
// warning (Warn, to [WithLogger]'s logger): its majority tolerates no more failed nodes than
// one node fewer would (2 nodes: quorum 2, none may fail; 4 nodes: quorum 3, one), while each
// acquire pays for the extra node. Use an odd number; the Redlock algorithm's description
// (redis.io) uses 5.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	ns, err := newNodes(nodes)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return nil, invalidf("option %d is nil", i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.renewFraction+cfg.cancelMargin >= 1 {
		return nil, invalidf("renew fraction %v plus cancel margin %v must be below 1", cfg.renewFraction, cfg.cancelMargin)
	}
	q, err := quorumSize(len(ns), cfg.amnesiaTolerance)
	if err != nil {
		return nil, err
	}
	c := &Client{nodes: ns, quorum: q, cfg: cfg, id: newHolderID(), closeDone: make(chan struct{}),
		stopSenders: make(chan struct{}), held: map[*Lock]struct{}{}}
	for i := range c.nodes {
		c.nodes[i].q = transport.New(c.nodes[i].client, transport.Config{
			Timeout: cfg.nodeTimeout, Concurrency: cfg.nodeConcurrency, StampWrites: cfg.observer != nil,
			Work: &c.bg, Stop: c.stopSenders,
		})
	}
	c.renewer.c = c
	c.wake = wakeHub{off: cfg.noWakeups, quorum: q, id: c.id, logger: cfg.logger, waiters: &c.wait,
		soonAfter: runnerUpWait(cfg.retryDelay), linger: wakeLinger, turnLinger: turnLinger, pubsubLinger: pubsubLinger}
	for i := range c.nodes {
		c.wake.nodes = append(c.wake.nodes, c.nodes[i].client)
	}
	if err := c.checkDistinct(); err != nil {
		c.Close()
		return nil, err
	}
	if n := len(c.nodes); n%2 == 0 && cfg.amnesiaTolerance == 0 {
		c.cfg.logger.Warn("redlock: an even number of nodes tolerates no more failed nodes than one node fewer would; use an odd number (the Redlock algorithm's description uses 5)",
			"nodes", n, "quorum", q, "failures_tolerated", n-q)
	}
	return c, nil
}

// Quorum returns how many nodes must agree for an acquire, extend or release to succeed.
func (c *Client) Quorum() int { return c.quorum }

// Nodes returns the number of nodes.
func (c *Client) Nodes() int { return len(c.nodes) }

// Close shuts the Client down, and always returns nil. Acquire calls that wait return
// ErrClosed at once, and their places in the nodes' waiter queues are given up as a waiter
// whose context ended gives its place up; Close waits for the calls in flight (a running
// [Client.Do] included) and the background work they started, releases every Lock of this
// Client still held, waits for those releases, and makes every later call fail with
// ErrClosed. A Release after Close matches ErrReleased when Close released that lock,
// ErrClosed when it could not. Close does not close the node clients: stop the work that
// uses the locks, Close the Client, then close them (docs/operations.md, "Shutdown order",
// which also says how long a hung node can delay Close). Idempotent and safe for concurrent
// use; a second Close waits for the first.
func (c *Client) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if !first {
		<-c.closeDone
		return nil
	}
	placed := c.wait.closeAll() // Acquire calls waiting for a key return ErrClosed at once
	c.wake.close()              // the subscriptions and their goroutines
	for _, key := range placed {
		// Their places in the nodes' queues go, as their own leave would have taken them
		// (the waiters' leaves find the Client closed); waited for below with every call.
		c.sendLeave(key)
	}
	c.heldMu.Lock()
	leaders := make([]*Leadership, 0, len(c.leaders))
	for ld := range c.leaders {
		leaders = append(leaders, ld)
	}
	c.heldMu.Unlock()
	for _, ld := range leaders { // their renewals end; their keys are released below
		ld.stop(ErrClosed)
	}
	c.bg.Wait()
	c.heldMu.Lock()
	left := make([]*Lock, 0, len(c.held))
	for l := range c.held {
		left = append(left, l)
	}
	c.heldMu.Unlock()
	var wg sync.WaitGroup
	for _, l := range left {
		wg.Go(func() { _ = l.release(context.Background(), true) })
	}
	wg.Wait()
	c.bg.Wait()
	close(c.stopSenders)
	for i := range c.nodes {
		c.nodes[i].q.Wait()
	}
	close(c.closeDone)
	return nil
}

// remember records a lock this client holds, for Close; forget removes it.
func (c *Client) remember(l *Lock) {
	c.heldMu.Lock()
	c.held[l] = struct{}{}
	c.heldMu.Unlock()
}

func (c *Client) forget(l *Lock) {
	c.heldMu.Lock()
	delete(c.held, l)
	if c.permits[l.key] == l {
		delete(c.permits, l.key)
	}
	c.heldMu.Unlock()
}

// begin registers a call; end must follow when it returns.
func (c *Client) begin() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	c.bg.Add(1)
	return nil
}

func (c *Client) end() { c.bg.Done() }

// isClosed reports whether Close has begun.
func (c *Client) isClosed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed
}

// lockArgs validates a key and a TTL and returns the TTL in whole milliseconds and the lock's
// keys (the key and its fence counter).
func (c *Client) lockArgs(key string, ttl time.Duration) (time.Duration, lockKeys, error) {
	set, err := newLockKeys(key)
	if err != nil {
		return 0, lockKeys{}, err
	}
	ttl, err = c.checkKeyTTL(ttl)
	if err != nil {
		return 0, lockKeys{}, err
	}
	return ttl, set, nil
}
