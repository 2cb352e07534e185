package compare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/quorumlock/redlock/compare/internal/etcdproc"
)

// etcdBackend: concurrency.Mutex on a 3-member etcd cluster, one session (lease) per holder.
type etcdBackend struct {
	c   *etcdproc.Cluster
	ttl time.Duration
}

func newEtcdBackend() Backend { return &etcdBackend{} }

func (b *etcdBackend) Name() string { return "etcd" }

func (b *etcdBackend) Recipe() string {
	return "A 3-member etcd cluster (Debian's etcd-server, default heartbeat and election timeouts), clientv3 with " +
		"every member as an endpoint. Each holder opens one concurrency.Session with the TTL as its lease (the " +
		"client keeps it alive every TTL/3; a new one when it has expired) and takes concurrency.Mutex.Lock, which waits for the keys before it " +
		"to be deleted; the token is the mutex key's create revision. A holder believes it holds the lock until the " +
		"session's Done channel closes. Release: Mutex.Unlock. " +
		"Recipe: the etcd client's concurrency package documentation."
}

func (b *etcdBackend) Start(ctx context.Context, ttl time.Duration) error {
	if ttl < 2*time.Second || ttl%time.Second != 0 {
		return fmt.Errorf("etcd leases are whole seconds and at least 2 s here; TTL %v", ttl)
	}
	c, err := etcdproc.Start(ctx, 3)
	if err != nil {
		return err
	}
	b.c, b.ttl = c, ttl
	return nil
}

func (b *etcdBackend) Endpoints() []string { return b.c.ClientAddrs() }

func (b *etcdBackend) NewClient(ctx context.Context, via func(string) string) (Client, error) {
	var eps []string
	for _, a := range b.c.ClientAddrs() {
		eps = append(eps, via(a))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: etcdproc.NopLogger()})
	if err != nil {
		return nil, err
	}
	return &etcdClient{cli: cli, ttl: int(b.ttl / time.Second)}, nil
}

func (b *etcdBackend) KillPrimary(ctx context.Context) (string, error) {
	m, err := b.c.Leader(ctx)
	if err != nil {
		return "", err
	}
	m.Kill()
	return fmt.Sprintf("leader %s killed (SIGKILL); the two other members elect a new one", m.Name), nil
}

func (b *etcdBackend) RestartEmpty(context.Context) (string, error) { return "", ErrNotApplicable }

func (b *etcdBackend) Close() error {
	if b.c == nil {
		return nil
	}
	return b.c.Close()
}

type etcdClient struct {
	cli *clientv3.Client
	ttl int

	mu   sync.Mutex
	sess *concurrency.Session // the holder's session, reused until its lease ends
}

type etcdLease struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

// session returns the client's session, opening a new one when it has none or its lease
// has ended. Its keep-alive lasts as long as ctx (the holder's whole run).
func (c *etcdClient) session(ctx context.Context) (*concurrency.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		select {
		case <-c.sess.Done():
			c.sess = nil
		default:
			return c.sess, nil
		}
	}
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	c.sess = s
	return s, nil
}

func (c *etcdClient) Acquire(ctx context.Context, key string) (*Lease, error) {
	for {
		l, err := c.acquireOnce(ctx, key)
		if err == nil || ctx.Err() != nil {
			return l, err
		}
		// The session or the wait failed (a member went away mid-call): try again.
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func (c *etcdClient) acquireOnce(ctx context.Context, key string) (*Lease, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, "/locks/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	resp, err := c.cli.Get(ctx, m.Key())
	if err == nil && len(resp.Kvs) == 0 {
		err = errors.New("the mutex key vanished right after Lock")
	}
	if err != nil {
		_ = m.Unlock(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Lease{Key: key, Token: uint64(resp.Kvs[0].CreateRevision), impl: etcdLease{s: s, m: m}}, nil
}

func (c *etcdClient) Renew(context.Context, *Lease) (time.Time, error) {
	return time.Time{}, errors.New("an etcd session keeps its lease alive itself")
}

func (c *etcdClient) Check(ctx context.Context, l *Lease) error {
	select {
	case <-l.impl.(etcdLease).s.Done():
		return errors.New("the session's lease has expired or been revoked")
	default:
		return nil
	}
}

func (c *etcdClient) Release(ctx context.Context, l *Lease) error {
	return l.impl.(etcdLease).m.Unlock(ctx)
}

// Close closes the connections; the session's lease is left to expire, as a killed
// process leaves it.
func (c *etcdClient) Close() error { return c.cli.Close() }
