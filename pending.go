package redlock

import (
	"hash/maphash"
	"sync"
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
// release call (transport.go, sendAfter), which costs the acquire at most that release's
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
	keys  []string
	mu    sync.Mutex
	calls []*call
	left  int // calls not yet final, plus one while the release is being sent
}

// begin registers a release of keys about to be sent to n nodes; add each call, then end.
func (p *pendingReleases) begin(keys []string, n int) *pendingRelease {
	pr := &pendingRelease{keys: keys, calls: make([]*call, n), left: 1}
	for _, k := range keys {
		sh := p.shard(k)
		sh.mu.Lock()
		if sh.m == nil {
			sh.m = map[string]*pendingRelease{}
		}
		sh.m[k] = pr
		sh.mu.Unlock()
	}
	return pr
}

// add records the release's call to node i, before it is sent.
func (p *pendingReleases) add(pr *pendingRelease, i int, c *call) {
	pr.mu.Lock()
	pr.calls[i] = c
	pr.left++
	pr.mu.Unlock()
	c.rel = pr
}

// end marks the release as sent; done marks one of its calls final (transport.go, finish).
// When nothing of it is left, its keys are forgotten (unless a newer release took them).
func (p *pendingReleases) end(pr *pendingRelease) { p.done(pr) }

func (p *pendingReleases) done(pr *pendingRelease) {
	pr.mu.Lock()
	pr.left--
	last := pr.left == 0
	pr.mu.Unlock()
	if !last {
		return
	}
	for _, k := range pr.keys {
		sh := p.shard(k)
		sh.mu.Lock()
		if sh.m[k] == pr {
			delete(sh.m, k)
		}
		sh.mu.Unlock()
	}
}

// after returns, per node, the release call that an acquire of keys must follow there, or
// nil when there is none. For several keys with different pending releases it takes, per
// node, the one of the last key that has one: the order is kept for the common case, and
// anything else only costs an attempt.
func (p *pendingReleases) after(keys []string) []*call {
	var out []*call
	for _, k := range keys {
		sh := p.shard(k)
		sh.mu.Lock()
		pr := sh.m[k]
		sh.mu.Unlock()
		if pr == nil {
			continue
		}
		pr.mu.Lock()
		if out == nil {
			out = make([]*call, len(pr.calls))
		}
		for i, c := range pr.calls {
			if c != nil {
				out[i] = c
			}
		}
		pr.mu.Unlock()
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
