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

// sentinelConf is the name of a Sentinel's configuration file in its node directory.
const sentinelConf = "sentinel.conf"

// SentinelConfig describes a Sentinel group started by StartSentinelGroup.
type SentinelConfig struct {
	// Config is how the data nodes (masters and replicas) start. Sentinels take only
	// Binary from it.
	Config
	// Masters is the number of masters, named m1, m2, …; at least 1.
	Masters int
	// Replicas is the number of replicas of each master; 0 for none.
	Replicas int
	// Sentinels is the number of Sentinel processes, each watching every master; at least 1.
	Sentinels int
	// Quorum is how many Sentinels must agree that a master is down before a failover
	// starts; 0 means a majority of Sentinels.
	Quorum int
	// DownAfter is Sentinel's down-after-milliseconds; 0 means 1 s.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout; 0 means 10 s.
	FailoverTimeout time.Duration
}

// SentinelGroup is a set of Sentinel-managed masters started by StartSentinelGroup: each
// master with its replicas (redis-server with --replicaof), and Sentinels that watch every
// master. Each process is a Node of the group's own directory, stopped by PID like the nodes of
// a Cluster. Its methods are safe for concurrent use.
type SentinelGroup struct {
	c         *Cluster // every process of the group
	names     []string
	data      map[string][]*Node // per master name: the first master, then its replicas
	sentinels []*Node
}

// StartSentinelGroup starts cfg.Masters masters, cfg.Replicas replicas of each and
// cfg.Sentinels Sentinels, each process on its own free 127.0.0.1 port and in its own
// temporary directory. It returns once every replica's link to its master is up, and
// every Sentinel knows every master, its replicas and the other Sentinels, so that a
// failover can start at once (SENTINEL FAILOVER needs a known replica; a failover after a
// master went down needs Sentinels that know each other). ctx bounds only the start-up.
// On failure every process started is stopped.
func StartSentinelGroup(ctx context.Context, cfg SentinelConfig) (*SentinelGroup, error) {
	switch {
	case cfg.Masters < 1:
		return nil, fmt.Errorf("redisproc: a Sentinel group needs at least 1 master, got %d", cfg.Masters)
	case cfg.Replicas < 0:
		return nil, fmt.Errorf("redisproc: replicas per master %d is negative", cfg.Replicas)
	case cfg.Sentinels < 1:
		return nil, fmt.Errorf("redisproc: a Sentinel group needs at least 1 Sentinel, got %d", cfg.Sentinels)
	case cfg.Quorum < 0 || cfg.Quorum > cfg.Sentinels:
		return nil, fmt.Errorf("redisproc: Sentinel quorum %d is outside [0, %d]", cfg.Quorum, cfg.Sentinels)
	}
	quorum := cfg.Quorum
	if quorum == 0 {
		quorum = cfg.Sentinels/2 + 1
	}
	downAfter, failoverTimeout := cfg.DownAfter, cfg.FailoverTimeout
	if downAfter <= 0 {
		downAfter = time.Second
	}
	if failoverTimeout <= 0 {
		failoverTimeout = 10 * time.Second
	}
	c, dataCfg, err := newCluster(cfg.Config)
	if err != nil {
		return nil, err
	}
	g := &SentinelGroup{c: c, data: map[string][]*Node{}}
	fail := func(err error) (*SentinelGroup, error) {
		_ = c.Close()
		return nil, err
	}
	for i := range cfg.Masters {
		g.names = append(g.names, fmt.Sprintf("m%d", i+1))
	}

	// A master that syncs a replica without disk waits repl-diskless-sync-delay (5 s by
	// default) for more replicas before it starts; a group's replicas all start at once.
	// Set on every data node: a replica becomes a master in a failover.
	dataCfg.ExtraArgs = append([]string{"--repl-diskless-sync-delay", "0"}, dataCfg.ExtraArgs...)
	masters, err := c.startNodes(ctx, slices.Repeat([]nodeSpec{{cfg: dataCfg}}, cfg.Masters))
	if err != nil {
		return fail(err)
	}
	var replicas []nodeSpec
	for _, m := range masters {
		rc := dataCfg
		rc.ExtraArgs = append(slices.Clone(dataCfg.ExtraArgs), "--replicaof", "127.0.0.1", strconv.Itoa(m.port))
		replicas = append(replicas, slices.Repeat([]nodeSpec{{cfg: rc}}, cfg.Replicas)...)
	}
	reps, err := c.startNodes(ctx, replicas)
	if err != nil {
		return fail(err)
	}
	for i, name := range g.names {
		g.data[name] = append([]*Node{masters[i]}, reps[i*cfg.Replicas:(i+1)*cfg.Replicas]...)
	}
	// A Sentinel finds the replicas in its master's INFO, which it asks for once when it
	// connects and then every 10 s: start it only once the replicas are attached, or it may
	// not know them for 10 s.
	if err := poll(ctx, "the replicas' links to their masters", func(ctx context.Context) error {
		return g.replicationUp(ctx)
	}); err != nil {
		return fail(err)
	}

	var conf strings.Builder
	fmt.Fprintf(&conf, "protected-mode no\n")
	for i, name := range g.names {
		fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d %d\n", name, masters[i].port, quorum)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", name, downAfter.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", name, failoverTimeout.Milliseconds())
	}
	sentCfg := Config{Binary: dataCfg.Binary}
	g.sentinels, err = c.startNodes(ctx, slices.Repeat([]nodeSpec{{cfg: sentCfg, sentinel: conf.String()}}, cfg.Sentinels))
	if err != nil {
		return fail(err)
	}
	if err := poll(ctx, "the Sentinels to know every master's replicas and each other", func(ctx context.Context) error {
		return g.sentinelsReady(ctx, cfg.Replicas)
	}); err != nil {
		return fail(err)
	}
	return g, nil
}

// replicationUp returns nil once every master reports all its replicas connected and every
// replica reports its link up.
func (g *SentinelGroup) replicationUp(ctx context.Context) error {
	for _, name := range g.names {
		nodes := g.data[name]
		info, err := nodeInfo(ctx, nodes[0], "replication")
		if err != nil {
			return err
		}
		if v := infoField(info, "connected_slaves"); v != strconv.Itoa(len(nodes)-1) {
			return fmt.Errorf("master %s: connected_slaves:%s, want %d", name, v, len(nodes)-1)
		}
		for _, r := range nodes[1:] {
			info, err := nodeInfo(ctx, r, "replication")
			if err != nil {
				return err
			}
			if v := infoField(info, "master_link_status"); v != "up" {
				return fmt.Errorf("replica %s of %s: master_link_status:%s", r.Addr(), name, v)
			}
		}
	}
	return nil
}

// sentinelsReady returns nil once every Sentinel knows, for every master, the given number
// of replicas, none of them down or disconnected, and every other Sentinel.
func (g *SentinelGroup) sentinelsReady(ctx context.Context, replicas int) error {
	for _, s := range g.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		err := func() error {
			defer sc.Close()
			for _, name := range g.names {
				rs, err := sc.Replicas(ctx, name).Result()
				if err != nil {
					return fmt.Errorf("sentinel %s: SENTINEL REPLICAS %s: %w", s.Addr(), name, err)
				}
				good := 0
				for _, r := range rs {
					if f := r["flags"]; !strings.Contains(f, "s_down") && !strings.Contains(f, "disconnected") {
						good++
					}
				}
				if good != replicas {
					return fmt.Errorf("sentinel %s knows %d good replicas of %s, want %d", s.Addr(), good, name, replicas)
				}
				peers, err := sc.Sentinels(ctx, name).Result()
				if err != nil {
					return fmt.Errorf("sentinel %s: SENTINEL SENTINELS %s: %w", s.Addr(), name, err)
				}
				if len(peers) != len(g.sentinels)-1 {
					return fmt.Errorf("sentinel %s knows %d other sentinels for %s, want %d", s.Addr(), len(peers), name, len(g.sentinels)-1)
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// MasterNames returns the names of the masters, m1, m2, …
func (g *SentinelGroup) MasterNames() []string { return slices.Clone(g.names) }

// SentinelAddrs returns the "127.0.0.1:PORT" address of every Sentinel, for
// redis.FailoverOptions.SentinelAddrs.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Sentinels returns the Sentinel processes.
func (g *SentinelGroup) Sentinels() []*Node { return slices.Clone(g.sentinels) }

// Nodes returns the data processes of the named master's set: the one started as its
// master first, then its replicas. After a failover the roles differ from that order;
// MasterAddr says which is the master now. Nil for an unknown name.
func (g *SentinelGroup) Nodes(name string) []*Node { return slices.Clone(g.data[name]) }

// NodeAt returns the data process of the named master's set listening on addr, or nil.
func (g *SentinelGroup) NodeAt(name, addr string) *Node {
	for _, n := range g.data[name] {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// MasterAddr returns the address of the named master as the first Sentinel that answers
// reports it.
func (g *SentinelGroup) MasterAddr(ctx context.Context, name string) (string, error) {
	var errs []error
	for _, s := range g.sentinels {
		addr, err := sentinelMaster(ctx, s, name)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// Failover makes the named master fail over to one of its replicas with SENTINEL FAILOVER,
// sent to the first Sentinel, and returns the new master's address once every Sentinel
// reports it as the master and it reports itself as one (role:master). SENTINEL FAILOVER
// does not wait for the replica to catch up: replication is asynchronous, so writes the old
// master acknowledged late may be missing on the new one, and so are the writes it goes on
// acknowledging, to clients that have not switched yet, until it becomes a replica itself.
// ctx bounds the wait.
func (g *SentinelGroup) Failover(ctx context.Context, name string) (string, error) {
	if _, ok := g.data[name]; !ok {
		return "", fmt.Errorf("redisproc: no master named %q", name)
	}
	before, err := sentinelMaster(ctx, g.sentinels[0], name)
	if err != nil {
		return "", err
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: g.sentinels[0].Addr(), MaxRetries: -1})
	err = sc.Failover(ctx, name).Err()
	_ = sc.Close()
	if err != nil {
		return "", fmt.Errorf("redisproc: SENTINEL FAILOVER %s: %w", name, err)
	}
	var after string
	err = poll(ctx, "the Sentinels to agree on a new master of "+name, func(ctx context.Context) error {
		after = ""
		for _, s := range g.sentinels {
			addr, err := sentinelMaster(ctx, s, name)
			if err != nil {
				return err
			}
			if addr == before {
				return fmt.Errorf("sentinel %s still reports %s", s.Addr(), before)
			}
			if after != "" && addr != after {
				return fmt.Errorf("the sentinels disagree: %s and %s", after, addr)
			}
			after = addr
		}
		n := g.NodeAt(name, after)
		if n == nil {
			return fmt.Errorf("the new master %s is not a process of the group", after)
		}
		info, err := nodeInfo(ctx, n, "replication")
		if err != nil {
			return err
		}
		if v := infoField(info, "role"); v != "master" {
			return fmt.Errorf("the new master %s reports role:%s", after, v)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return after, nil
}

// Close stops every process of the group and removes its directories, as Cluster.Close
// does.
func (g *SentinelGroup) Close() error { return g.c.Close() }

// sentinelMaster asks one Sentinel for the address of the named master.
func sentinelMaster(ctx context.Context, s *Node, name string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("redisproc: sentinel %s: master %s: %w", s.Addr(), name, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("redisproc: sentinel %s: master %s: reply %q", s.Addr(), name, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// nodeInfo returns one section of a node's INFO.
func nodeInfo(ctx context.Context, n *Node, section string) (string, error) {
	rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer rc.Close()
	info, err := rc.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("redisproc: %s: INFO %s: %w", n.Addr(), section, err)
	}
	return info, nil
}

// poll calls check every clusterPoll until it returns nil, or ctx ends; the error then
// names what was awaited and the last check's error.
func poll(ctx context.Context, what string, check func(ctx context.Context) error) error {
	ticker := time.NewTicker(clusterPoll)
	defer ticker.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: waiting for %s: %w (last check: %v)", what, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}
