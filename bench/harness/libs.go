package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// lockTTL is the TTL of every lock in the harness: redsync's default expiry (8 s), which
// redsync gets by default and we pass explicitly to our library.
const lockTTL = 8 * time.Second

// impl is one way of taking and releasing a lock: one of the two libraries, or a floor.
type impl interface {
	// try makes one acquire attempt on key and returns a handle for release.
	try(ctx context.Context, key string) (any, error)
	// wait acquires key, retrying with the implementation's retry policy until ctx ends.
	wait(ctx context.Context, key string) (any, error)
	release(ctx context.Context, h any) error
	close()
}

// newClients returns one go-redis client per address, with default options apart from Addr,
// for both libraries alike.
func newClients(addrs []string) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	return cs
}

func closeClients(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// ours is github.com/quorumlock/redlock, with default options (fencing on) unless opts say
// otherwise.
type ours struct {
	c       *redlock.Client
	clients []*redis.Client
}

func newOurs(addrs []string, opts ...redlock.Option) (*ours, error) {
	return newOursOn(newClients(addrs), opts...)
}

// newOursOn is newOurs on go-redis clients the caller made (with hooks, say); they are
// closed with the client, also when New fails.
func newOursOn(cs []*redis.Client, opts ...redlock.Option) (*ours, error) {
	u := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		u[i] = c
	}
	c, err := redlock.New(u, opts...)
	if err != nil {
		closeClients(cs)
		return nil, err
	}
	return &ours{c: c, clients: cs}, nil
}

func (o *ours) try(ctx context.Context, key string) (any, error) {
	return o.c.TryAcquire(ctx, key, lockTTL)
}

func (o *ours) wait(ctx context.Context, key string) (any, error) {
	return o.c.Acquire(ctx, key, lockTTL)
}

func (o *ours) release(ctx context.Context, h any) error {
	return h.(*redlock.Lock).Release(ctx)
}

// close waits for the client's background work (Client.Close), then closes the go-redis
// clients. Call it after any fault proxy in front of a node has been closed, so that calls
// blocked on a hung node fail instead of waiting for go-redis's read timeout.
func (o *ours) close() {
	_ = o.c.Close()
	closeClients(o.clients)
}

// rsync is github.com/go-redsync/redsync/v4 over go-redis v9 pools, with default mutex
// options, plus WithFailFast(true) when failFast is set.
type rsync struct {
	rs      *redsync.Redsync
	opts    []redsync.Option
	tryOpts []redsync.Option
	clients []*redis.Client
}

func newRsync(addrs []string, failFast bool) *rsync {
	cs := newClients(addrs)
	pools := make([]rsredis.Pool, len(cs))
	for i, c := range cs {
		pools[i] = goredis.NewPool(c)
	}
	r := &rsync{rs: redsync.New(pools...), clients: cs}
	if failFast {
		r.opts = append(r.opts, redsync.WithFailFast(true))
	}
	// TryLock is Lock with tries = 1; the option is only needed for benchmark g, where
	// Lock is called with WithTries(1) as the targets ask.
	r.tryOpts = append(append([]redsync.Option(nil), r.opts...), redsync.WithTries(1))
	return r
}

func (r *rsync) try(ctx context.Context, key string) (any, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.TryLockContext(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// wait is LockContext with redsync's defaults: 32 tries, a pause drawn from [50, 250) ms
// between them. When the 32 tries are used up it starts again, as a caller that still
// wants the lock would.
func (r *rsync) wait(ctx context.Context, key string) (any, error) {
	for {
		m := r.rs.NewMutex(key, r.opts...)
		err := m.LockContext(ctx)
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
}

// rsyncLock is rsync whose single attempt is one LockContext call (redsync's own acquire,
// with its 32 tries), for the load scenarios, where ours makes one TryAcquire: on fresh keys
// both take the lock at their first attempt unless a quorum of nodes fails to answer.
type rsyncLock struct{ *rsync }

func (r rsyncLock) try(ctx context.Context, key string) (any, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

var errNotReleased = errors.New("unlock: no quorum")

func (r *rsync) release(ctx context.Context, h any) error {
	ok, err := h.(*redsync.Mutex).UnlockContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errNotReleased
	}
	return nil
}

func (r *rsync) close() { closeClients(r.clients) }

// releaseSrc is a compare-and-delete script: the library's release.lua without its wake-up
// announcement (the PUBLISH), which the floors do not need.
const releaseSrc = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

var releaseScript = redis.NewScript(releaseSrc)

// floorValue is the holder value the floors store: constant, so they pay for no randomness.
const floorValue = "floor-holder"

var errFloorNotAcquired = errors.New("floor: SET NX refused")

// floorSingle is the least a lock can cost: SET NX PX and compare-and-delete on one node.
type floorSingle struct{ c *redis.Client }

func newFloorSingle(addr string) *floorSingle { return &floorSingle{c: newClients([]string{addr})[0]} }

func (f *floorSingle) try(ctx context.Context, key string) (any, error) {
	ok, err := f.c.SetNX(ctx, key, floorValue, lockTTL).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errFloorNotAcquired
	}
	return key, nil
}

func (f *floorSingle) wait(ctx context.Context, key string) (any, error) {
	return f.try(ctx, key)
}

func (f *floorSingle) release(ctx context.Context, h any) error {
	return releaseScript.Run(ctx, f.c, []string{h.(string)}, floorValue).Err()
}

func (f *floorSingle) close() { _ = f.c.Close() }

// floorFanout is a naive Redlock without any coordination: the same two commands sent to
// every node in parallel with go-redis, waiting for all of them. It counts a quorum of OK
// replies as acquired, and has no timeouts of its own, no token, no undo.
type floorFanout struct{ cs []*redis.Client }

func newFloorFanout(addrs []string) *floorFanout { return &floorFanout{cs: newClients(addrs)} }

func (f *floorFanout) try(ctx context.Context, key string) (any, error) {
	var wg sync.WaitGroup
	oks := make([]bool, len(f.cs))
	for i, c := range f.cs {
		wg.Go(func() {
			ok, err := c.SetNX(ctx, key, floorValue, lockTTL).Result()
			oks[i] = ok && err == nil
		})
	}
	wg.Wait()
	n := 0
	for _, ok := range oks {
		if ok {
			n++
		}
	}
	if n < len(f.cs)/2+1 {
		return nil, fmt.Errorf("%w on %d of %d nodes", errFloorNotAcquired, len(f.cs)-n, len(f.cs))
	}
	return key, nil
}

func (f *floorFanout) wait(ctx context.Context, key string) (any, error) {
	return f.try(ctx, key)
}

func (f *floorFanout) release(ctx context.Context, h any) error {
	key := h.(string)
	var wg sync.WaitGroup
	for _, c := range f.cs {
		wg.Go(func() { _ = releaseScript.Run(ctx, c, []string{key}, floorValue).Err() })
	}
	wg.Wait()
	return nil
}

func (f *floorFanout) close() { closeClients(f.cs) }
