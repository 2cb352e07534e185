package redlock

import "sync"

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
	mu sync.Mutex
	m  map[string]*pendingRelease // per key: the last release of it that is not final everywhere
}

// pendingRelease is one release's calls, one per node (nil where none was sent).
type pendingRelease struct {
	keys  []string
	calls []*call
	left  int // calls not yet final, plus one while the release is being sent
}

// begin registers a release of keys about to be sent to n nodes; add each call, then end.
func (p *pendingReleases) begin(keys []string, n int) *pendingRelease {
	pr := &pendingRelease{keys: keys, calls: make([]*call, n), left: 1}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*pendingRelease{}
	}
	for _, k := range keys {
		p.m[k] = pr
	}
	p.mu.Unlock()
	return pr
}

// add records the release's call to node i, before it is sent.
func (p *pendingReleases) add(pr *pendingRelease, i int, c *call) {
	p.mu.Lock()
	pr.calls[i] = c
	pr.left++
	p.mu.Unlock()
	c.rel = pr
}

// end marks the release as sent; done marks one of its calls final (transport.go, finish).
// When nothing of it is left, its keys are forgotten (unless a newer release took them).
func (p *pendingReleases) end(pr *pendingRelease) { p.done(pr) }

func (p *pendingReleases) done(pr *pendingRelease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.left--; pr.left > 0 {
		return
	}
	for _, k := range pr.keys {
		if p.m[k] == pr {
			delete(p.m, k)
		}
	}
}

// after returns, per node, the release call that an acquire of keys must follow there, or
// nil when there is none. For several keys with different pending releases it takes, per
// node, the one of the last key that has one: the order is kept for the common case, and
// anything else only costs an attempt.
func (p *pendingReleases) after(keys []string) []*call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) == 0 {
		return nil
	}
	var out []*call
	for _, k := range keys {
		pr := p.m[k]
		if pr == nil {
			continue
		}
		if out == nil {
			out = make([]*call, len(pr.calls))
		}
		for i, c := range pr.calls {
			if c != nil {
				out[i] = c
			}
		}
	}
	return out
}
