package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// clusterPoll is how often StartRedisCluster asks the nodes whether they agree.
const clusterPoll = 20 * time.Millisecond

// StartRedisCluster starts one Redis Cluster of the given number of shards: that many
// cluster-enabled redis-server processes (masters, no replicas), each on its own free
// 127.0.0.1 port and in its own directory, as Start does. The 16384 hash slots are split
// into contiguous ranges, shard i owning [SlotRange(shards, i)], the nodes are introduced
// to each other with CLUSTER MEET, and StartRedisCluster returns once every node reports
// cluster_state:ok, knows every other node and shows the same slot map (CLUSTER SHARDS).
// ctx bounds only the start-up. On failure every process started is stopped.
//
// cfg is used as for Start; "--cluster-enabled yes" and the node's own cluster config
// file are appended to cfg.ExtraArgs, so they win over anything given there. The nodes of
// the returned Cluster are the shards, in slot order; Close stops them by PID like any
// other Cluster. A node restarted with RestartEmpty loses its cluster config file too,
// and comes back as a lone node that owns no slot.
func StartRedisCluster(ctx context.Context, shards int, cfg Config) (*Cluster, error) {
	if shards < 1 {
		return nil, fmt.Errorf("redisproc: a Redis Cluster needs at least 1 shard, got %d", shards)
	}
	if shards > SlotCount {
		return nil, fmt.Errorf("redisproc: a Redis Cluster has at most %d shards, got %d", SlotCount, shards)
	}
	cfg.ExtraArgs = append(slices.Clone(cfg.ExtraArgs),
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	c, err := Start(ctx, shards, cfg)
	if err != nil {
		return nil, err
	}
	c.shards = shards
	if err := formCluster(ctx, c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// SlotRange returns the first and last hash slot (inclusive) that shard i of a Redis
// Cluster of the given number of shards owns when started by StartRedisCluster.
func SlotRange(shards, i int) (first, last int) {
	return i * SlotCount / shards, (i+1)*SlotCount/shards - 1
}

// Shards returns the number of shards when the Cluster is a Redis Cluster started by
// StartRedisCluster, and 0 for a set of independent nodes started by Start.
func (c *Cluster) Shards() int { return c.shards }

// ShardOfSlot returns the index of the node that owns slot in a Redis Cluster started by
// StartRedisCluster, as long as no slot has been moved since; -1 for a Cluster of
// independent nodes or a slot out of range.
func (c *Cluster) ShardOfSlot(slot int) int {
	if c.shards == 0 || slot < 0 || slot >= SlotCount {
		return -1
	}
	for i := range c.shards {
		if first, last := SlotRange(c.shards, i); slot >= first && slot <= last {
			return i
		}
	}
	return -1
}

// formCluster assigns the slots, introduces the nodes and waits until they agree.
func formCluster(ctx context.Context, c *Cluster) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	}
	defer func() {
		for _, rc := range clients {
			_ = rc.Close()
		}
	}()
	for i, rc := range clients {
		first, last := SlotRange(len(clients), i)
		// Distinct config epochs, as redis-cli gives them, so that the nodes need not
		// resolve a collision before they agree.
		if err := rc.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return fmt.Errorf("redisproc: shard %d: CLUSTER SET-CONFIG-EPOCH: %w", i, err)
		}
		if err := rc.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return fmt.Errorf("redisproc: shard %d: CLUSTER ADDSLOTSRANGE %d %d: %w", i, first, last, err)
		}
	}
	for i, n := range c.nodes[1:] {
		host, port, err := net.SplitHostPort(n.Addr())
		if err != nil {
			return fmt.Errorf("redisproc: shard %d: %w", i+1, err)
		}
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("redisproc: CLUSTER MEET %s: %w", n.Addr(), err)
		}
	}
	want := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		first, last := SlotRange(len(c.nodes), i)
		want[i] = fmt.Sprintf("%05d-%05d@%s", first, last, n.Addr())
	}
	ticker := time.NewTicker(clusterPoll)
	defer ticker.Stop()
	for {
		err := clusterAgrees(ctx, clients, want)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: Redis Cluster of %d shards not ready: %w (last check: %v)", len(clients), ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// clusterAgrees returns nil when every node reports cluster_state:ok, knows all the nodes
// and shows the slot map want in CLUSTER SHARDS (one "first-last@addr" per range, with
// zero-padded slots, sorted, the address that of an online master).
func clusterAgrees(ctx context.Context, clients []*redis.Client, want []string) error {
	for i, rc := range clients {
		info, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("shard %d: CLUSTER INFO: %w", i, err)
		}
		if v := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("shard %d: cluster_state:%s", i, v)
		}
		if v := infoField(info, "cluster_known_nodes"); v != strconv.Itoa(len(clients)) {
			return fmt.Errorf("shard %d: cluster_known_nodes:%s, want %d", i, v, len(clients))
		}
		shards, err := rc.ClusterShards(ctx).Result()
		if err != nil {
			return fmt.Errorf("shard %d: CLUSTER SHARDS: %w", i, err)
		}
		var got []string
		for _, sh := range shards {
			var master string
			for _, n := range sh.Nodes {
				if n.Role == "master" && n.Health == "online" {
					master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
			for _, r := range sh.Slots {
				got = append(got, fmt.Sprintf("%05d-%05d@%s", r.Start, r.End, master))
			}
		}
		slices.Sort(got) // by first slot: the numbers are zero-padded
		if !slices.Equal(got, want) {
			return fmt.Errorf("shard %d: slot map %v, want %v", i, got, want)
		}
	}
	return nil
}

// infoField returns the value of field in a CLUSTER INFO (or INFO) reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// errNotRedisCluster is returned by ClusterClient for a Cluster of independent nodes.
var errNotRedisCluster = errors.New("redisproc: not a Redis Cluster (started by Start, not StartRedisCluster)")

// ClusterClient returns a go-redis client of the whole Redis Cluster, seeded with every
// shard's address and otherwise built with default options. The caller closes it.
func (c *Cluster) ClusterClient() (*redis.ClusterClient, error) {
	if c.shards == 0 {
		return nil, errNotRedisCluster
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()}), nil
}
