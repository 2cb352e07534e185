package compare

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// redlockBackend is this library on five independent redis-servers, with its defaults.
type redlockBackend struct {
	nodes *redisproc.Cluster
	ttl   time.Duration
}

func newRedlockBackend() Backend { return &redlockBackend{} }

func (b *redlockBackend) Name() string { return "redlock" }

func (b *redlockBackend) Recipe() string {
	return "This library (github.com/quorumlock/redlock) on 5 independent redis-servers without persistence, " +
		"redlock.New with its defaults: Acquire (a quorum of 3, validity = TTL − elapsed − drift), a fencing token " +
		"minted on the nodes, Extend every TTL/3 by the lab's watchdog, Release. Recipe: docs/design.md and the " +
		"redis.io Redlock page."
}

func (b *redlockBackend) Start(ctx context.Context, ttl time.Duration) error {
	c, err := redisproc.Start(ctx, 5, redisproc.Config{})
	if err != nil {
		return err
	}
	b.nodes, b.ttl = c, ttl
	return nil
}

func (b *redlockBackend) Endpoints() []string { return b.nodes.Addrs() }

func (b *redlockBackend) NewClient(ctx context.Context, via func(string) string) (Client, error) {
	var rcs []*redis.Client
	var nodes []redis.UniversalClient
	for _, a := range b.nodes.Addrs() {
		rc := redis.NewClient(&redis.Options{Addr: via(a)})
		rcs = append(rcs, rc)
		nodes = append(nodes, rc)
	}
	c, err := redlock.New(nodes)
	if err != nil {
		for _, rc := range rcs {
			_ = rc.Close()
		}
		return nil, err
	}
	return &redlockClient{c: c, rcs: rcs, ttl: b.ttl}, nil
}

func (b *redlockBackend) KillPrimary(ctx context.Context) (string, error) {
	n := b.nodes.Nodes()[0]
	if err := n.Kill(); err != nil {
		return "", err
	}
	return "node 0 of 5 killed (SIGKILL); Redlock has no primary, so one node of five is the nearest fault; it stays down", nil
}

func (b *redlockBackend) RestartEmpty(ctx context.Context) (string, error) {
	n := b.nodes.Nodes()[0]
	if err := n.RestartEmpty(ctx); err != nil {
		return "", err
	}
	return "node 0 of 5 restarted empty (no persistence), at once, without the delayed restart the Redlock page recommends", nil
}

func (b *redlockBackend) Close() error {
	if b.nodes == nil {
		return nil
	}
	return b.nodes.Close()
}

type redlockClient struct {
	c   *redlock.Client
	rcs []*redis.Client
	ttl time.Duration
}

func (c *redlockClient) Acquire(ctx context.Context, key string) (*Lease, error) {
	l, err := c.c.Acquire(ctx, key, c.ttl)
	if err != nil {
		return nil, err
	}
	return &Lease{Key: key, Token: uint64(l.Token()), Until: l.Until(), RenewEvery: c.ttl / 3, impl: l}, nil
}

func (c *redlockClient) Renew(ctx context.Context, l *Lease) (time.Time, error) {
	lk := l.impl.(*redlock.Lock)
	if err := lk.Extend(ctx, c.ttl); err != nil {
		return time.Time{}, err
	}
	return lk.Until(), nil
}

func (c *redlockClient) Check(ctx context.Context, l *Lease) error { return nil }

func (c *redlockClient) Release(ctx context.Context, l *Lease) error {
	return l.impl.(*redlock.Lock).Release(ctx)
}

func (c *redlockClient) Close() error {
	errs := []error{c.c.Close()}
	for _, rc := range c.rcs {
		errs = append(errs, rc.Close())
	}
	return errors.Join(errs...)
}
