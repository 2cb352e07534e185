package redlock

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
	"github.com/redis/go-redis/v9"
)

// node is one independent Redis server (or cluster) taking part in the quorum.
type node struct {
	client redis.UniversalClient
	addr   string           // for errors and logs; "" when the client type does not expose one
	q      *transport.Queue // every command to this node goes through it (internal/transport)
	// undoFailing: the last undo sent to the node failed (undoLog logs the changes).
	undoFailing atomic.Bool
}

// nodeAddr returns a printable address of a go-redis client, for the client types that
// expose their options.
func nodeAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		if a := c.Options().Addr; a != "FailoverClient" { // go-redis's placeholder for Sentinel
			return a
		}
		return "" // a Sentinel-managed master: told apart by its run_id (checkDistinct)
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

// nodeErr wraps a per-node failure.
func (c *Client) nodeErr(i int, err error) *NodeError {
	return &NodeError{Node: i, Addr: c.nodes[i].addr, Err: err}
}

// checkDistinct asks every node for its INFO (the default sections) and refuses two nodes
// that answer with the same run_id, since one server reached under two addresses
// (127.0.0.1:7604 and localhost:7604) is not two independent nodes, and a node that is a
// replica (role:slave), since a read-only copy of another server is not an independent
// node either: it refuses every acquire, and Status would count it as holding the keys
// its master holds. [WithReplicasAllowed] lets replicas through. It waits at most
// min(node timeout, 1 s); a node that does not answer by then, or cannot (a user without
// +info, a server whose INFO lacks those fields), is not checked.
func (c *Client) checkDistinct() error {
	n := len(c.nodes)
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.nodeTimeout, time.Second))
	defer cancel()
	ids := make([]string, n)
	roles := make([]string, n)
	_ = c.askAll(ctx, &command{args: []any{"info"}, kind: transport.ReplyString}, func(ev transport.Event) {
		if ev.Err == nil {
			ids[ev.Node], roles[ev.Node] = infoField(ev.Str, "run_id"), infoField(ev.Str, "role")
		}
	}) // a node that has not answered by the deadline is not checked
	seen := make(map[string]int, n)
	for i, id := range ids {
		if roles[i] == "slave" && !c.cfg.replicasAllowed {
			return invalidf("node %s is a replica: a read-only copy of another server is not an independent Redlock node; give the masters (WithReplicasAllowed lets replicas through)",
				c.nodeLabel(i))
		}
		if id == "" {
			continue
		}
		if j, dup := seen[id]; dup {
			return invalidf("nodes %s and %s are the same Redis server (run_id %s) under two addresses; Redlock needs independent nodes",
				c.nodeLabel(j), c.nodeLabel(i), id)
		}
		seen[id] = i
	}
	return nil
}

// nodeLabel names node i for a message: its index, and its address when it has one.
func (c *Client) nodeLabel(i int) string {
	if a := c.nodes[i].addr; a != "" {
		return fmt.Sprintf("%d (%s)", i, a)
	}
	return strconv.Itoa(i)
}

// infoField returns the value of field in an INFO reply, "" when there is none.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
