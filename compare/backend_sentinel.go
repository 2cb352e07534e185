package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// sentinelBackend is the recipe most services use: one Redis master with a replica and three
// Sentinels, SET NX PX with a random value, compare-and-delete, and a watchdog.
type sentinelBackend struct {
	g   *redisproc.SentinelGroup
	ttl time.Duration
}

func newSentinelBackend() Backend { return &sentinelBackend{} }

const sentinelMaster = "m1"

func (b *sentinelBackend) Name() string { return "sentinel" }

func (b *sentinelBackend) Recipe() string {
	return "One Redis master, one replica (asynchronous replication), three Sentinels (quorum 2, " +
		"down-after-milliseconds 1000 so that a bounded run sees the failover), no persistence; clients are go-redis " +
		"failover clients. Acquire: one Lua script runs SET key value NX PX ttl with a random value and, when it " +
		"succeeds, INCR on a counter on the master, the only token a single node can give; a refused SET is retried " +
		"after 10–30 ms. A watchdog extends the key every TTL/3 with a compare-and-PEXPIRE script; release is " +
		"compare-and-delete. Recipe: the single-instance section of the redis.io distributed-locks page and the " +
		"Sentinel documentation."
}

func (b *sentinelBackend) Start(ctx context.Context, ttl time.Duration) error {
	g, err := redisproc.StartSentinelGroup(ctx, redisproc.SentinelConfig{Masters: 1, Replicas: 1, Sentinels: 3,
		DownAfter: time.Second, FailoverTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	b.g, b.ttl = g, ttl
	return nil
}

// Endpoints are the data nodes (master and replica); the Sentinels are reached directly.
func (b *sentinelBackend) Endpoints() []string {
	var out []string
	for _, n := range b.g.Nodes(sentinelMaster) {
		out = append(out, n.Addr())
	}
	return out
}

func (b *sentinelBackend) NewClient(ctx context.Context, via func(string) string) (Client, error) {
	data := map[string]bool{}
	for _, a := range b.Endpoints() {
		data[a] = true
	}
	var d net.Dialer
	rc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    sentinelMaster,
		SentinelAddrs: b.g.SentinelAddrs(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if data[addr] {
				addr = via(addr)
			}
			return d.DialContext(ctx, network, addr)
		},
	})
	return &sentinelClient{rc: rc, ttl: b.ttl}, nil
}

func (b *sentinelBackend) master(ctx context.Context) (*redisproc.Node, error) {
	addr, err := b.g.MasterAddr(ctx, sentinelMaster)
	if err != nil {
		return nil, err
	}
	n := b.g.NodeAt(sentinelMaster, addr)
	if n == nil {
		return nil, fmt.Errorf("the Sentinels name %s, which is not a process of the group", addr)
	}
	return n, nil
}

func (b *sentinelBackend) KillPrimary(ctx context.Context) (string, error) {
	n, err := b.master(ctx)
	if err != nil {
		return "", err
	}
	if err := n.Kill(); err != nil {
		return "", err
	}
	return fmt.Sprintf("master %s killed (SIGKILL); the Sentinels fail over to the replica after down-after-milliseconds", n.Addr()), nil
}

func (b *sentinelBackend) RestartEmpty(ctx context.Context) (string, error) {
	n, err := b.master(ctx)
	if err != nil {
		return "", err
	}
	if err := n.RestartEmpty(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("master %s restarted empty at once (no persistence), faster than the Sentinels' down-after-milliseconds; the replica then resyncs from it", n.Addr()), nil
}

func (b *sentinelBackend) Close() error {
	if b.g == nil {
		return nil
	}
	return b.g.Close()
}

var (
	// acquireSingle sets the key if it is free and then mints the token on the same node.
	acquireSingle = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	renewSingle   = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	releaseSingle = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// errNotHeld is what a renewal or a release reports when the key no longer holds our value.
var errNotHeld = errors.New("the lock is no longer held")

type sentinelClient struct {
	rc  *redis.Client
	ttl time.Duration
}

type singleLease struct{ value string }

func randomValue() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

func (c *sentinelClient) Acquire(ctx context.Context, key string) (*Lease, error) {
	value := randomValue()
	for {
		start := time.Now()
		tok, err := acquireSingle.Run(ctx, c.rc, []string{key, "fence:" + key}, value, c.ttl.Milliseconds()).Int64()
		if err == nil && tok > 0 {
			return &Lease{Key: key, Token: uint64(tok), Until: start.Add(c.ttl), RenewEvery: c.ttl / 3, impl: singleLease{value}}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := retryPause(ctx); err != nil {
			return nil, err
		}
	}
}

func (c *sentinelClient) Renew(ctx context.Context, l *Lease) (time.Time, error) {
	start := time.Now()
	n, err := renewSingle.Run(ctx, c.rc, []string{l.Key}, l.impl.(singleLease).value, c.ttl.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, err
	}
	if n != 1 {
		return time.Time{}, errNotHeld
	}
	return start.Add(c.ttl), nil
}

func (c *sentinelClient) Check(ctx context.Context, l *Lease) error { return nil }

func (c *sentinelClient) Release(ctx context.Context, l *Lease) error {
	n, err := releaseSingle.Run(ctx, c.rc, []string{l.Key}, l.impl.(singleLease).value).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

func (c *sentinelClient) Close() error { return c.rc.Close() }
