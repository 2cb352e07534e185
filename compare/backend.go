package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// A Backend is one lock service under comparison: the servers it runs on this machine and
// the recipe its clients follow. Start, the faults and Close are called by one goroutine at
// a time; NewClient may be called from several.
type Backend interface {
	// Name is the backend's short name, as the reports and -backends name it.
	Name() string
	// Recipe says in one paragraph how the lock is taken, kept, released and fenced, and
	// which documentation the recipe follows.
	Recipe() string
	// Start starts the service's processes. ttl is the lock's TTL or lease.
	Start(ctx context.Context, ttl time.Duration) error
	// Endpoints are the server addresses (host:port) a client connects to; every client
	// reaches each one through a fault proxy of its own.
	Endpoints() []string
	// NewClient returns a client that reaches every endpoint addr through via(addr).
	NewClient(ctx context.Context, via func(addr string) string) (Client, error)
	// KillPrimary is the fault "the service's primary is killed": what that is for this
	// backend (the master, the leader, the database server, one node of five) and what was
	// done, or ErrNotApplicable. It returns once the fault has been injected; recovery, if the
	// backend recovers by itself (a failover, an election), happens in the background.
	KillPrimary(ctx context.Context) (string, error)
	// RestartEmpty restarts the server holding the lock without its data, or returns
	// ErrNotApplicable for a backend whose servers persist their state by design.
	RestartEmpty(ctx context.Context) (string, error)
	// Close stops every process the backend started.
	Close() error
}

// ErrNotApplicable is what a Backend's fault returns when the fault has no meaning for it.
var ErrNotApplicable = errors.New("not applicable to this backend")

// A Client is one holder's connection to a lock service. Its methods are called by one
// goroutine at a time, except Renew, which a holder's renewer calls beside the holder.
type Client interface {
	// Acquire waits until the lock on key is held, or ctx ends.
	Acquire(ctx context.Context, key string) (*Lease, error)
	// Renew moves the lease's validity on (a watchdog calls it every Lease.RenewEvery); it
	// returns the new validity deadline. A backend whose lock lives as long as a session
	// never has it called.
	Renew(ctx context.Context, l *Lease) (time.Time, error)
	// Check is what a careful holder asks before each write: an error when it knows it no
	// longer holds the lock (a session that ended, a connection that failed), nil otherwise.
	Check(ctx context.Context, l *Lease) error
	// Release gives the lock up.
	Release(ctx context.Context, l *Lease) error
	// Close closes the client's connections without releasing anything.
	Close() error
}

// A Lease is one acquisition as its holder knows it.
type Lease struct {
	Key   string
	Token uint64 // the fencing token the recipe gives
	// Until is the validity deadline the holder knows of, on this process's clock; zero for a
	// lock held as long as a session lives, which the holder believes it holds until Check
	// says otherwise.
	Until time.Time
	// RenewEvery is the watchdog's period; zero when the backend keeps the lock alive itself
	// (a session's keep-alive) or not at all.
	RenewEvery time.Duration
	impl       any
}

// backends lists every backend, in the order the reports give them.
var backends = []struct {
	name string
	mk   func() Backend
}{
	{"redlock", newRedlockBackend},
	{"sentinel", newSentinelBackend},
	{"pg-advisory", newPgAdvisoryBackend},
	{"pg-table", newPgTableBackend},
	{"etcd", newEtcdBackend},
}

// BackendNames returns the names of every backend.
func BackendNames() []string {
	var out []string
	for _, b := range backends {
		out = append(out, b.name)
	}
	return out
}

// NewBackend returns a constructor of the named backend.
func NewBackend(name string) (func() Backend, error) {
	for _, b := range backends {
		if b.name == name {
			return b.mk, nil
		}
	}
	return nil, fmt.Errorf("compare: unknown backend %q (known: %s)", name, strings.Join(BackendNames(), ", "))
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryPause waits 10 to 30 ms (uniformly, so that clients that were refused together do not
// come back together) before a lease lock's next try for a held key, or until ctx ends.
func retryPause(ctx context.Context) error {
	return sleepCtx(ctx, time.Duration(10+rand.IntN(21))*time.Millisecond)
}
