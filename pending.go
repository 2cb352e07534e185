package redlock

import (
	"hash/maphash"
	"sync"

	"github.com/quorumlock/redlock/internal/transport"
)

// pendingReleases keeps a new acquire of a key behind this client's own releases of that key
// (a Release, or the undo of a failed attempt) that have not reached every node yet.
//
// A Release returns once a quorum has deleted the key; on the other nodes its call may still
// wait, for instance behind the lock's acquire call there, which had not answered when the
// acquire was won. Without this, the client's next acquire of the key could reach such a node
// first (even in the same pipeline, ahead of the release), find the old key still there and
// count the node as refused: an attempt that fails, or needs a retry pause, right after the
// client itself released the lock. With it, the acquire call to that node is queued after the
// release call (internal/transport, SendAfter), which costs the acquire at most that release's
// round trip on that node. Only liveness depends on this; the safety argument does not use it.
type pendingReleases struct {
	shards [pendingShards]pendingShard // by key, so that thousands of releases do not share a mutex
}

const pendingShards = 64

var pendingSeed = maphash.MakeSeed()

type pendingShard struct {
	mu sync.Mutex
	m  map[string]*pendingRelease // per key: the last release of it that is not final everywhere
}

func (p *pendingReleases) shard(key string) *pendingShard {
	return &p.shards[maphash.String(pendingSeed, key)%pendingShards]
}

// pendingRelease is one release's calls, one per node (nil where none was sent).
type pendingRelease struct {
	set   *pendingReleases
	keys  []string
	mu    sync.Mutex
	calls []*transport.Call
	left  int // calls not yet final, plus one while the release is being sent
	// prev holds, per key, the release of that key that this one replaced in the map. A
	// release sends nothing to a node where its acquire was never written, yet an older
	// release of the key may still be on its way there: after looks back to it.
	prev []*pendingRelease
	one  [1]*pendingRelease // prev of a single-key release, without an allocation of its own
}

// prevFor returns the release this one replaced for key.
func (pr *pendingRelease) prevFor(key string) *pendingRelease {
	for j, k := range pr.keys {
		if k == key {
			return pr.prev[j]
		}
	}
	return nil
}

// begin registers a release of keys about to be sent to n nodes; add each call, then end.
func (p *pendingReleases) begin(keys []string, n int) *pendingRelease {
	pr := &pendingRelease{set: p, keys: keys, calls: make([]*transport.Call, n), left: 1}
	if len(keys) == 1 {
		pr.prev = pr.one[:]
	} else {
		pr.prev = make([]*pendingRelease, len(keys))
	}
	for j, k := range keys {
		sh := p.shard(k)
		sh.mu.Lock()
		if sh.m == nil {
			sh.m = map[string]*pendingRelease{}
		}
		pr.prev[j] = sh.m[k]
		sh.m[k] = pr
		sh.mu.Unlock()
	}
	return pr
}

// add records the release's call to node i, before it is sent.
func (p *pendingReleases) add(pr *pendingRelease, i int, c *transport.Call) {
	pr.mu.Lock()
	pr.calls[i] = c
	pr.left++
	pr.mu.Unlock()
	c.OnFinal = pr
}

// Finished is told by the transport that one of the release's calls is final.
func (pr *pendingRelease) Finished() { pr.set.done(pr) }

// end marks the release as sent; done marks one of its calls final (its calls' OnFinal).
// When nothing of it is left, the map falls back, per key, to the newest older release that
// is still on its way, or forgets the key.
func (p *pendingReleases) end(pr *pendingRelease) { p.done(pr) }

func (p *pendingReleases) done(pr *pendingRelease) {
	pr.mu.Lock()
	pr.left--
	last := pr.left == 0
	pr.mu.Unlock()
	if !last {
		return
	}
	for j, k := range pr.keys {
		sh := p.shard(k)
		sh.mu.Lock()
		if sh.m[k] == pr {
			if older := live(pr.prev[j], k); older != nil {
				sh.m[k] = older
			} else {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}

// live returns pr or the newest release before it for key that is still on its way.
func live(pr *pendingRelease, key string) *pendingRelease {
	for ; pr != nil; pr = pr.prevFor(key) {
		pr.mu.Lock()
		left := pr.left
		pr.mu.Unlock()
		if left > 0 {
			return pr
		}
	}
	return nil
}

// after returns, per node, the release call that an acquire of keys must follow there, or
// nil when there is none: the newest release's call, or where it sent none, the call of an
// older release of the key still on its way. For several keys with different pending
// releases it takes, per node, the one of the last key that has one: the order is kept for
// the common case, and anything else only costs an attempt.
func (p *pendingReleases) after(keys []string) []*transport.Call {
	var out []*transport.Call
	for _, k := range keys {
		sh := p.shard(k)
		sh.mu.Lock()
		pr := sh.m[k]
		sh.mu.Unlock()
		var found []*transport.Call
		for ; pr != nil; pr = pr.prevFor(k) {
			pr.mu.Lock()
			if pr.left > 0 {
				if found == nil {
					found = make([]*transport.Call, len(pr.calls))
				}
				for i, c := range pr.calls {
					if found[i] == nil && c != nil {
						found[i] = c
					}
				}
			}
			pr.mu.Unlock()
		}
		if found == nil {
			continue
		}
		if out == nil {
			out = found
			continue
		}
		for i, c := range found {
			if c != nil {
				out[i] = c
			}
		}
	}
	return out
}

// len counts the keys with a pending release (for tests).
func (p *pendingReleases) len() int {
	n := 0
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
