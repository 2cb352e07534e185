// Package redisproc starts and controls real redis-server processes.
//
// It is meant for integration tests and for fault-injection tools: every
// node of a Cluster started by Start is an independent redis-server (no
// replication, no Redis Cluster mode) listening on its own loopback port and
// working in its own temporary directory. StartRedisCluster instead makes the
// nodes the shards of one Redis Cluster (cluster mode, masters only), and
// StartSentinelGroup starts Sentinel-managed masters with their replicas and
// Sentinels. Nodes can be killed, restarted on the same port (with or without
// their data), and paused with SIGSTOP to simulate a hung server.
//
// The core API does not depend on package testing; the helpers in
// testing.go (Require, StartT, StartRedisClusterT, StartSentinelGroupT,
// Cluster.ClientsT, Cluster.ClusterClientT) wrap it for tests.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
)

// Config describes how every node of a Cluster is started.
type Config struct {
	// Persist turns on the append-only file with appendfsync always, so
	// every acknowledged write survives a kill -9. When Persist is false
	// the node keeps no AOF and no RDB snapshot.
	Persist bool
	// Binary is the path of redis-server; "" means look it up on PATH.
	Binary string
	// ExtraArgs are appended to the redis-server command line, for example
	// []string{"--maxmemory-policy", "noeviction"}. Later arguments
	// override earlier ones.
	ExtraArgs []string
}

// Cluster is a set of independent redis-server processes started by Start.
// Its methods are safe for concurrent use.
type Cluster struct {
	root   string
	nodes  []*Node
	shards int // > 0 when the nodes form one Redis Cluster (StartRedisCluster)

	closeOnce sync.Once
	closeErr  error
}

// Start starts n independent redis-server nodes in parallel, each on its own
// free 127.0.0.1 port and in its own temporary directory, and waits until
// every node answers PING. ctx bounds only the start-up; the processes keep
// running until Close. If any node fails to start, the nodes already
// started are stopped and the error describes every failure.
func Start(ctx context.Context, n int, cfg Config) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redisproc: cluster size must be at least 1, got %d", n)
	}
	c, cfg, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	specs := make([]nodeSpec, n)
	for i := range specs {
		specs[i] = nodeSpec{cfg: cfg}
	}
	if _, err := c.startNodes(ctx, specs); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// newCluster makes an empty Cluster with its temporary directory, and returns cfg with the
// binary resolved.
func newCluster(cfg Config) (*Cluster, Config, error) {
	bin, err := resolveBinary(cfg.Binary)
	if err != nil {
		return nil, cfg, err
	}
	cfg.Binary = bin
	cfg.ExtraArgs = slices.Clone(cfg.ExtraArgs)
	root, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, cfg, fmt.Errorf("redisproc: create temp dir: %w", err)
	}
	return &Cluster{root: root}, cfg, nil
}

// nodeSpec is how one node of startNodes is started.
type nodeSpec struct {
	cfg      Config
	sentinel string // Node.sentinel
}

// startNodes adds one node per spec to the cluster, starts them in parallel and waits until
// every one answers PING. It returns the new nodes; on failure the caller closes the cluster,
// which stops the nodes that did start.
func (c *Cluster) startNodes(ctx context.Context, specs []nodeSpec) ([]*Node, error) {
	var added []*Node
	for _, sp := range specs {
		i := len(c.nodes)
		dir := filepath.Join(c.root, fmt.Sprintf("node%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("redisproc: create node dir: %w", err)
		}
		n := &Node{index: i, dir: dir, cfg: sp.cfg, sentinel: sp.sentinel}
		c.nodes = append(c.nodes, n)
		added = append(added, n)
	}
	errs := make([]error, len(added))
	var wg sync.WaitGroup
	for i, node := range added {
		wg.Go(func() { errs[i] = node.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return added, nil
}

// resolveBinary returns bin, or the redis-server found on PATH when bin is
// empty.
func resolveBinary(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redisproc: redis-server not found on PATH: %w", err)
	}
	return path, nil
}

// Nodes returns the nodes of the cluster, ordered by index.
func (c *Cluster) Nodes() []*Node {
	return slices.Clone(c.nodes)
}

// Addrs returns the "127.0.0.1:PORT" address of every node, ordered by index.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URLs returns the "redis://127.0.0.1:PORT" URL of every node, ordered by
// index.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = "redis://" + n.Addr()
	}
	return urls
}

// Close stops every node and removes the temporary directories. A paused
// node is resumed first; each node gets SIGTERM and, if it has not exited
// after a short grace period, SIGKILL. Close waits until every process has
// been reaped. It is idempotent: later calls return the first call's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Go(n.close)
		}
		wg.Wait()
		if err := os.RemoveAll(c.root); err != nil {
			c.closeErr = fmt.Errorf("redisproc: remove temp dir: %w", err)
		}
	})
	return c.closeErr
}
