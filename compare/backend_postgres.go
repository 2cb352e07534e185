package compare

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/redlock/internal/pgtest"
)

// postgresServer is one PostgreSQL server with PostgreSQL's own durability settings, shared by
// the code of both PostgreSQL recipes.
type postgresServer struct {
	srv *pgtest.Server
	dsn string
}

func (p *postgresServer) start(ctx context.Context, schema string) error {
	srv, err := pgtest.Launch(ctx, pgtest.Config{Durable: true})
	if err != nil {
		return err
	}
	_, dsn, err := srv.NewDatabase(ctx, "locks")
	if err != nil {
		_ = srv.Close()
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, schema); err != nil {
		_ = srv.Close()
		return fmt.Errorf("schema: %w", err)
	}
	p.srv, p.dsn = srv, dsn
	return nil
}

func (p *postgresServer) addr() string { return net.JoinHostPort(p.srv.Host, strconv.Itoa(p.srv.Port)) }

// connect opens one session to the server through via.
func (p *postgresServer) connect(ctx context.Context, via func(string) string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(p.dsn)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(via(p.addr()))
	if err != nil {
		return nil, err
	}
	cfg.Host = host
	n, _ := strconv.Atoi(port)
	cfg.Port = uint16(n)
	cfg.ConnectTimeout = 2 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

func (p *postgresServer) restart(ctx context.Context) (string, error) {
	if err := p.srv.Restart(ctx, true); err != nil {
		return "", err
	}
	return "PostgreSQL crashed (SIGQUIT, an immediate shutdown: no checkpoint) and restarted on the same data directory, which replays the WAL; every session ended", nil
}

func (p *postgresServer) close() error {
	if p.srv == nil {
		return nil
	}
	return p.srv.Close()
}

// lockID maps a lock name to the 64-bit key of an advisory lock.
func lockID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// pgAdvisoryBackend: a session-level advisory lock, held by the connection that took it.
type pgAdvisoryBackend struct {
	pg  postgresServer
	ttl time.Duration
}

func newPgAdvisoryBackend() Backend { return &pgAdvisoryBackend{} }

func (b *pgAdvisoryBackend) Name() string { return "pg-advisory" }

func (b *pgAdvisoryBackend) Recipe() string {
	return "PostgreSQL 15 with its default durability (fsync and synchronous_commit on), one session per holder: " +
		"pg_try_advisory_lock(key) and, when it is taken, pg_advisory_lock(key), which waits in the server; the " +
		"token is nextval of a sequence, taken once the lock is held. The lock lasts as long as the session: no " +
		"TTL, no renewal; a careful holder pings its session before each write. Release: pg_advisory_unlock. " +
		"Recipe: PostgreSQL's documentation, §13.3.5 Advisory Locks and §9.27.10."
}

func (b *pgAdvisoryBackend) Start(ctx context.Context, ttl time.Duration) error {
	b.ttl = ttl
	return b.pg.start(ctx, `CREATE SEQUENCE fence`)
}

func (b *pgAdvisoryBackend) Endpoints() []string { return []string{b.pg.addr()} }

func (b *pgAdvisoryBackend) NewClient(ctx context.Context, via func(string) string) (Client, error) {
	return &pgAdvisoryClient{pgSession: pgSession{pg: &b.pg, via: via}, ping: min(b.ttl/4, 500*time.Millisecond)}, nil
}

func (b *pgAdvisoryBackend) KillPrimary(ctx context.Context) (string, error) {
	return b.pg.restart(ctx)
}

func (b *pgAdvisoryBackend) RestartEmpty(context.Context) (string, error) {
	return "", ErrNotApplicable
}

func (b *pgAdvisoryBackend) Close() error { return b.pg.close() }

// pgSession is one client's PostgreSQL session, opened on first use and again after it
// failed. Both PostgreSQL recipes hold one.
type pgSession struct {
	pg  *postgresServer
	via func(string) string

	mu   sync.Mutex
	conn *pgx.Conn // nil until the first use and after a session failed
}

// session returns the client's session, opening one when it has none.
func (c *pgSession) session(ctx context.Context) (*pgx.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	conn, err := c.pg.connect(ctx, c.via)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// drop closes a session that failed; a lock it held ends with it on the server.
func (c *pgSession) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close(context.Background())
		c.conn = nil
	}
}

type pgAdvisoryClient struct {
	pgSession
	ping time.Duration
}

type advisoryLease struct {
	id   int64
	conn *pgx.Conn
}

func (c *pgAdvisoryClient) Acquire(ctx context.Context, key string) (*Lease, error) {
	id := lockID(key)
	for {
		conn, err := c.session(ctx)
		if err == nil {
			var ok bool
			if err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, id).Scan(&ok); err == nil && !ok {
				_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, id)
				ok = err == nil
			}
			if err == nil && ok {
				var tok int64
				if err = conn.QueryRow(ctx, `SELECT nextval('fence')`).Scan(&tok); err == nil {
					return &Lease{Key: key, Token: uint64(tok), impl: advisoryLease{id: id, conn: conn}}, nil
				}
			}
		}
		if ctx.Err() != nil {
			c.drop()
			return nil, ctx.Err()
		}
		c.drop() // a failed session: any lock it held is gone with it
		if err := sleepCtx(ctx, time.Duration(50+rand.IntN(50))*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func (c *pgAdvisoryClient) Renew(context.Context, *Lease) (time.Time, error) {
	return time.Time{}, errors.New("an advisory lock has no TTL to renew")
}

func (c *pgAdvisoryClient) Check(ctx context.Context, l *Lease) error {
	conn := l.impl.(advisoryLease).conn
	if conn.IsClosed() {
		return errors.New("the session that held the lock has ended")
	}
	pctx, cancel := context.WithTimeout(ctx, c.ping)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		c.drop()
		return fmt.Errorf("the session that holds the lock does not answer: %w", err)
	}
	return nil
}

func (c *pgAdvisoryClient) Release(ctx context.Context, l *Lease) error {
	a := l.impl.(advisoryLease)
	if a.conn.IsClosed() {
		return errors.New("the session that held the lock has ended")
	}
	var ok bool
	if err := a.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, a.id).Scan(&ok); err != nil {
		c.drop()
		return err
	}
	if !ok {
		return errNotHeld
	}
	return nil
}

func (c *pgAdvisoryClient) Close() error {
	c.drop()
	return nil
}

// pgTableBackend: a lock table with a unique key and an expiry column, renewed by a
// watchdog; the server's clock decides expiry.
type pgTableBackend struct {
	pg  postgresServer
	ttl time.Duration
}

func newPgTableBackend() Backend { return &pgTableBackend{} }

func (b *pgTableBackend) Name() string { return "pg-table" }

func (b *pgTableBackend) Recipe() string {
	return "PostgreSQL 15 with its default durability, a table locks(name primary key, holder, expires_at, token). " +
		"Acquire: one INSERT … ON CONFLICT (name) DO UPDATE … WHERE locks.expires_at < now() RETURNING token, with " +
		"expires_at = now() + TTL on the server's clock and the token from a sequence; a refused acquire is retried " +
		"after 10–30 ms. A watchdog runs UPDATE … SET expires_at = now() + TTL WHERE name and holder match every " +
		"TTL/3; release deletes the row if it is still ours. Each statement is its own transaction (autocommit)."
}

const lockTable = `CREATE SEQUENCE fence;
CREATE TABLE locks (name text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL, token bigint NOT NULL)`

func (b *pgTableBackend) Start(ctx context.Context, ttl time.Duration) error {
	b.ttl = ttl
	return b.pg.start(ctx, lockTable)
}

func (b *pgTableBackend) Endpoints() []string { return []string{b.pg.addr()} }

func (b *pgTableBackend) NewClient(ctx context.Context, via func(string) string) (Client, error) {
	return &pgTableClient{pgSession: pgSession{pg: &b.pg, via: via}, ttl: b.ttl}, nil
}

func (b *pgTableBackend) KillPrimary(ctx context.Context) (string, error) { return b.pg.restart(ctx) }

func (b *pgTableBackend) RestartEmpty(context.Context) (string, error) { return "", ErrNotApplicable }

func (b *pgTableBackend) Close() error { return b.pg.close() }

type pgTableClient struct {
	pgSession
	ttl time.Duration
}

// query runs one statement on the client's session; a session that fails is dropped, so
// the next statement opens a new one. The renewer and the holder share the session under
// the client's lock (a pgx.Conn is not safe for concurrent use).
func (c *pgTableClient) query(ctx context.Context, sql string, args []any, dest ...any) error {
	conn, err := c.session(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	err = conn.QueryRow(ctx, sql, args...).Scan(dest...)
	c.mu.Unlock()
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.drop()
	}
	return err
}

const acquireRow = `INSERT INTO locks (name, holder, expires_at, token)
VALUES ($1, $2, now() + $3 * interval '1 millisecond', nextval('fence'))
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, token = EXCLUDED.token
WHERE locks.expires_at < now()
RETURNING token`

func (c *pgTableClient) Acquire(ctx context.Context, key string) (*Lease, error) {
	holder := randomValue()
	for {
		start := time.Now()
		var tok int64
		err := c.query(ctx, acquireRow, []any{key, holder, c.ttl.Milliseconds()}, &tok)
		if err == nil {
			return &Lease{Key: key, Token: uint64(tok), Until: start.Add(c.ttl), RenewEvery: c.ttl / 3, impl: holder}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := retryPause(ctx); err != nil {
			return nil, err
		}
	}
}

func (c *pgTableClient) Renew(ctx context.Context, l *Lease) (time.Time, error) {
	start := time.Now()
	var one int
	err := c.query(ctx, `UPDATE locks SET expires_at = now() + $3 * interval '1 millisecond' WHERE name = $1 AND holder = $2 RETURNING 1`,
		[]any{l.Key, l.impl.(string), c.ttl.Milliseconds()}, &one)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, errNotHeld
	}
	if err != nil {
		return time.Time{}, err
	}
	return start.Add(c.ttl), nil
}

func (c *pgTableClient) Check(context.Context, *Lease) error { return nil }

func (c *pgTableClient) Release(ctx context.Context, l *Lease) error {
	var one int
	err := c.query(ctx, `DELETE FROM locks WHERE name = $1 AND holder = $2 RETURNING 1`, []any{l.Key, l.impl.(string)}, &one)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotHeld
	}
	return err
}

func (c *pgTableClient) Close() error {
	c.drop()
	return nil
}
