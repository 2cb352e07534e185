package redlock

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis server (or cluster) taking part in the quorum.
type node struct {
	client redis.UniversalClient
	addr   string // for errors and logs; "" when the client type does not expose one
}

// nodeAddr returns a printable address of a go-redis client, for the client types that
// expose their options.
func nodeAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		addrs := append([]string(nil), c.Options().Addrs...)
		sort.Strings(addrs)
		return strings.Join(addrs, ",")
	}
	return ""
}

// isNil reports whether c is nil, including a typed nil pointer inside the interface.
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// newNodes validates the clients given to New: none nil, none given twice, and no two
// pointing at the same address (two clients of one server are not independent nodes).
func newNodes(clients []redis.UniversalClient) ([]node, error) {
	if len(clients) == 0 {
		return nil, invalidf("no nodes")
	}
	nodes := make([]node, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, invalidf("node %d is nil", i)
		}
		for j := 0; j < i; j++ {
			if clients[j] == c {
				return nil, invalidf("node %d is the same client as node %d", i, j)
			}
		}
		addr := nodeAddr(c)
		if addr != "" {
			if j, dup := seen[addr]; dup {
				return nil, invalidf("node %d has the same address %s as node %d; Redlock needs independent nodes", i, addr, j)
			}
			seen[addr] = i
		}
		nodes[i] = node{client: c, addr: addr}
	}
	return nodes, nil
}

// eval runs a call on node i, bounded by the node timeout for clients that honour
// context deadlines. The caller must not rely on that bound: see the select loops in
// acquire.go and quorumop.go, which stop waiting at the node timeout on their own.
func (c *Client) eval(ctx context.Context, i int, sc *scriptCall) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.nodeTimeout)
	defer cancel()
	return sc.run(ctx, c.nodes[i].client)
}

// batch is one context with the node timeout shared by the calls of one fan-out, all sent
// at the same moment: one timer instead of one per node. Its timer is released when the
// last call is done.
type batch struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   atomic.Int32
}

func (c *Client) newBatch(parent context.Context) *batch {
	b := &batch{}
	b.ctx, b.cancel = context.WithTimeout(parent, c.cfg.nodeTimeout)
	b.left.Store(int32(len(c.nodes)))
	return b
}

// done marks one call finished.
func (b *batch) done() {
	if b.left.Add(-1) == 0 {
		b.cancel()
	}
}

// nodeErr wraps a per-node failure.
func (c *Client) nodeErr(i int, err error) *NodeError {
	return &NodeError{Node: i, Addr: c.nodes[i].addr, Err: err}
}
