package redlock

import (
	"reflect"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis server (or cluster) taking part in the quorum.
type node struct {
	client redis.UniversalClient
	addr   string     // for errors and logs; "" when the client type does not expose one
	q      *nodeQueue // every command to this node goes through it (transport.go)
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

// honoursContext reports whether a go-redis client applies context deadlines to its socket
// reads (ContextTimeoutEnabled); for client types that do not say, it assumes so.
func honoursContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return true
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

// nodeErr wraps a per-node failure.
func (c *Client) nodeErr(i int, err error) *NodeError {
	return &NodeError{Node: i, Addr: c.nodes[i].addr, Err: err}
}
