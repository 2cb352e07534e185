package redlock

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Multi-key locks: one lock over several keys, taken on each node by one script that sets
// all of the keys or none (acquire_multi.lua), so that a node never holds part of a set for
// anyone. Two transfers A→B and B→A therefore cannot deadlock: on every node one of them
// gets both keys and the other neither, and the one with a quorum wins while the other
// retries, as two single-key acquires of one key would. Each key keeps its own fence
// counter, so every key gets its own fencing token. docs/design.md §5.8 has the protocol
// and its argument.

// TryAcquireMulti makes one attempt to acquire one lock over all of keys for ttl: all of
// them or none. It is [Client.TryAcquire] for a set of keys: the same timing, validity and
// undo rules, with one fencing token per key ([MultiLock.Token]), each minted by that key's
// own counter and agreed by a quorum. A node counts towards the quorum only when it set every
// key. Safe for concurrent use.
//
// keys must hold 1 to [MaxMultiKeys] distinct keys, each valid for TryAcquire; the order
// does not matter to the lock (Keys and Tokens keep it). When a node is a Redis Cluster
// (*redis.ClusterClient), every key must be in the same hash slot, because one script takes
// them all: give them a shared hash tag, as in "{acct}:A" and "{acct}:B". Keys in different
// slots are refused at the call (ErrInvalidArgument), not split into several scripts,
// because a split would let a node hold part of the set.
//
// Errors: as TryAcquire's, with ErrInvalidArgument also for an empty or nil keys, a key
// given twice, too many keys, or keys in several slots with a Cluster node; a *QuorumError
// has the keys in Keys.
func (c *Client) TryAcquireMulti(ctx context.Context, keys []string, ttl time.Duration) (*MultiLock, error) {
	ttl, set, err := c.multiArgs(ctx, keys, ttl)
	if err != nil {
		return nil, err
	}
	return multi(c.tryAcquire(ctx, set, ttl))
}

// AcquireMulti acquires one lock over all of keys for ttl, retrying as [Client.Acquire]
// does until it succeeds, the retry limit is reached or ctx ends. Arguments and errors are
// those of [Client.TryAcquireMulti]. Waiters of this Client for the same set of keys (in the
// same order) queue in arrival order; a release of any of the keys, by this Client or
// announced by another (wake-ups, docs/design.md §3.9), wakes the first of them. Unlike
// [Client.Acquire] of one key, it does not wait in the nodes' queues (docs/design.md §3.10):
// it takes the keys whenever all are free. Safe for concurrent use.
func (c *Client) AcquireMulti(ctx context.Context, keys []string, ttl time.Duration) (*MultiLock, error) {
	ttl, set, err := c.multiArgs(ctx, keys, ttl)
	if err != nil {
		return nil, err
	}
	return multi(c.acquire(ctx, set, ttl))
}

// DoMulti is [Client.Do] for a lock over several keys: it acquires all of keys as
// [Client.AcquireMulti] does, runs fn while holding them, renews them together, cancels fn's
// context before they can expire when renewal fails, and releases them when fn returns.
// Errors as Do's, with the argument errors of TryAcquireMulti.
func (c *Client) DoMulti(ctx context.Context, keys []string, ttl time.Duration, fn func(ctx context.Context, l *MultiLock) error) error {
	if fn == nil {
		return invalidf("fn is nil")
	}
	ttl, set, err := c.multiArgs(ctx, keys, ttl)
	if err != nil {
		return err
	}
	if err := c.checkDoTTL(ttl); err != nil {
		return err
	}
	return c.do(ctx, set, ttl, func(ctx context.Context, l *Lock) error { return fn(ctx, &MultiLock{l: l}) })
}

// multiArgs validates the arguments of the Multi calls.
func (c *Client) multiArgs(ctx context.Context, keys []string, ttl time.Duration) (time.Duration, lockKeys, error) {
	if ctx == nil {
		return 0, lockKeys{}, invalidf("context is nil")
	}
	set, err := newLockKeys(keys...) // copies keys: the caller's slice is not kept
	if err != nil {
		return 0, lockKeys{}, err
	}
	if len(set.keys) > 1 && c.hasClusterNode() {
		slot := keySlot(set.keys[0])
		for _, k := range set.keys[1:] {
			if s := keySlot(k); s != slot {
				return 0, lockKeys{}, invalidf("keys %q (slot %d) and %q (slot %d) are in different cluster hash slots, and a node is a Redis Cluster: give the keys a shared hash tag, such as {account}",
					quoteKey(set.keys[0]), slot, quoteKey(k), s)
			}
		}
	}
	ttl, err = c.checkKeyTTL(ttl)
	if err != nil {
		return 0, lockKeys{}, err
	}
	return ttl, set, nil
}

func (c *Client) hasClusterNode() bool {
	for i := range c.nodes {
		if _, ok := c.nodes[i].client.(*redis.ClusterClient); ok {
			return true
		}
	}
	return false
}

func multi(l *Lock, err error) (*MultiLock, error) {
	if err != nil {
		return nil, err
	}
	return &MultiLock{l: l}, nil
}

// MultiLock is a lock over several keys, held on a quorum of nodes, with one fencing token
// per key. It is safe for concurrent use. Like a [Lock], it is yours until [MultiLock.Until]
// at the latest, and only the tokens protect your writes after that.
type MultiLock struct{ l *Lock }

// Keys returns the lock's keys, in the order given to AcquireMulti.
func (m *MultiLock) Keys() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.l.set.keys)
}

// Token returns the fencing token of key in this acquisition, minted by key's own counter:
// send it with every write to the resource that key protects. It is 0 when key is not one of
// the lock's keys, or when the Client was made [WithoutFencing].
func (m *MultiLock) Token(key string) Token {
	if m == nil {
		return 0
	}
	for i, k := range m.l.set.keys {
		if k == key {
			return m.l.tokens[i]
		}
	}
	return 0
}

// Tokens returns the fencing tokens, one per key, in the order of Keys.
func (m *MultiLock) Tokens() []Token {
	if m == nil {
		return nil
	}
	return slices.Clone(m.l.tokens)
}

// ID returns the holder id stored under every key on the nodes (see [Lock.ID]).
func (m *MultiLock) ID() string {
	if m == nil {
		return ""
	}
	return m.l.id
}

// Until returns the validity deadline of all the keys (see [Lock.Until]).
func (m *MultiLock) Until() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.l.Until()
}

// Extend gives every key a new TTL of ttl from now, as [Lock.Extend] does for one key. A
// node counts towards the quorum only when it still holds every key for us; it then extends
// all of them, and otherwise none. Errors as Lock.Extend's.
func (m *MultiLock) Extend(ctx context.Context, ttl time.Duration) error {
	if m == nil {
		return invalidf("extend of a nil *MultiLock")
	}
	return m.l.Extend(ctx, ttl)
}

// Release deletes the keys that still hold our id on every node, as [Lock.Release] does for
// one key; a node counts towards the quorum when every key was still ours there. Errors as
// Lock.Release's.
func (m *MultiLock) Release(ctx context.Context) error {
	if m == nil {
		return invalidf("release of a nil *MultiLock")
	}
	return m.l.Release(ctx)
}

// Context returns a copy of ctx that carries the lock, as [Lock.Context] does: an acquire
// by the same Client of any subset of the keys with that context joins this hold.
func (m *MultiLock) Context(ctx context.Context) context.Context { return m.l.Context(ctx) }
