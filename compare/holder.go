package compare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/chaos"
	"github.com/quorumlock/redlock/internal/faultproxy"
)

// holder is one client of the workload: a Client of the backend whose every connection goes
// through fault proxies of its own, and the loop that takes the lock, writes under it and
// gives it up.
type holder struct {
	id      int
	cl      Client
	proxies []*faultproxy.Proxy
	rec     *chaos.Recorder
	st      *store
	key     string
	writes  int
	gap     time.Duration // before each write
	think   time.Duration // after a release

	ctx    context.Context // the holder's life; kill cancels it
	cancel context.CancelFunc
	dead   atomic.Bool

	mu      sync.Mutex
	pause   time.Duration // armed: the next write stops this long first
	paused  chan struct{} // closed when an armed pause has begun
	resumed chan struct{} // closed when it has ended

	acqErrs atomic.Int64
}

// newHolder starts the holder's proxies (one per endpoint) and its client.
func newHolder(ctx context.Context, id int, b Backend, rec *chaos.Recorder, st *store, key string, p plan) (*holder, error) {
	h := &holder{id: id, rec: rec, st: st, key: key, writes: p.writes, gap: p.gap, think: p.think}
	via := map[string]string{}
	for _, ep := range b.Endpoints() {
		px, err := faultproxy.Start(ep)
		if err != nil {
			h.closeProxies()
			return nil, err
		}
		h.proxies = append(h.proxies, px)
		via[ep] = px.Addr()
	}
	cl, err := b.NewClient(ctx, func(addr string) string {
		if a, ok := via[addr]; ok {
			return a
		}
		return addr
	})
	if err != nil {
		h.closeProxies()
		return nil, err
	}
	h.cl = cl
	h.ctx, h.cancel = context.WithCancel(ctx)
	return h, nil
}

func (h *holder) closeProxies() {
	for _, p := range h.proxies {
		_ = p.Close()
	}
}

// close ends the holder's client and proxies; call it once run has returned.
func (h *holder) close() {
	h.cancel()
	_ = h.cl.Close()
	h.closeProxies()
}

// partition cuts the holder off from every server (SetPartitioned) or heals it.
func (h *holder) partition(on bool) {
	for _, p := range h.proxies {
		p.SetPartitioned(on)
	}
}

func (h *holder) delay(d time.Duration) {
	for _, p := range h.proxies {
		p.SetDelay(d, d)
	}
}

// kill is what a SIGKILL does to the holder as the servers see it: its connections close
// and it sends nothing more; it releases nothing.
func (h *holder) kill() {
	h.dead.Store(true)
	for _, p := range h.proxies {
		_ = p.SetRefuse(true) // drops the open connections: the kernel of a killed process closes them
	}
	h.cancel()
}

// armPause makes the holder stop for d at its next write, after it has checked that it
// still holds the lock (a process pause, such as a long GC, between the check and the
// write). The returned channels close when the pause begins and when it ends.
func (h *holder) armPause(d time.Duration) (begun, ended <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pause, h.paused, h.resumed = d, make(chan struct{}), make(chan struct{})
	return h.paused, h.resumed
}

// gate runs an armed pause: the holder's connections are partitioned for the pause, as a
// stopped process neither sends nor closes anything.
func (h *holder) gate() {
	h.mu.Lock()
	d, paused, resumed := h.pause, h.paused, h.resumed
	h.pause = 0
	h.mu.Unlock()
	if d == 0 {
		return
	}
	f := h.rec.BeginFault("pause", nil, []int{h.id}, fmt.Sprintf("client %d stopped for %v between its check and its write", h.id, d))
	h.partition(true)
	close(paused)
	_ = sleepCtx(h.ctx, d) // the fault itself
	h.partition(false)
	h.rec.EndFault(f)
	close(resumed)
}

// run loops until ctx ends or the holder is killed: acquire, a critical section of h.writes
// writes, release, think.
func (h *holder) run() {
	ctx := h.ctx
	for n := 0; ctx.Err() == nil && !h.dead.Load(); n++ {
		asked := h.rec.Now()
		l, err := h.cl.Acquire(ctx, h.key)
		if err != nil {
			if ctx.Err() == nil && !h.dead.Load() {
				h.acqErrs.Add(1)
			}
			continue
		}
		if h.dead.Load() {
			return
		}
		h.section(ctx, n, asked, l)
		if h.dead.Load() {
			return
		}
		_ = sleepCtx(ctx, h.think)
	}
}

// section is one critical section under l.
func (h *holder) section(ctx context.Context, n int, asked time.Duration, l *Lease) {
	granted := h.rec.Now()
	// A lock held as long as a session has no deadline the holder can know: it knows the
	// lock valid when a check passes, so its validity is the last check that did.
	sessionHeld := l.Until.IsZero()
	until := granted
	if !sessionHeld {
		until = h.rec.Offset(l.Until)
	}
	hid := h.rec.BeginHold(chaos.Hold{Client: h.id, Key: h.key, Token: redlock.Token(l.Token),
		LockID: fmt.Sprintf("c%d#%d", h.id, n), Asked: asked, Granted: granted, Until: until})
	var deadline atomic.Int64 // l.Until in Unix nanoseconds, moved by the renewer
	deadline.Store(l.Until.UnixNano())
	var lost atomic.Bool // the renewer was told the lock is gone
	rctx, stopRenew := context.WithCancel(ctx)
	var renewer sync.WaitGroup
	if l.RenewEvery > 0 {
		renewer.Go(func() {
			t := time.NewTicker(l.RenewEvery)
			defer t.Stop()
			for {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				u, err := h.cl.Renew(rctx, l)
				if rctx.Err() != nil {
					return
				}
				if err != nil {
					if errors.Is(err, errNotHeld) {
						lost.Store(true)
						return
					}
					continue // a failed call: the holder stops at its deadline unless a later one lands
				}
				deadline.Store(u.UnixNano())
				h.rec.SeeUntil(hid, h.rec.Offset(u))
			}
		})
	}
	b := h.st.read(h.key)
	for seq := 1; seq <= h.writes; seq++ {
		// The gap before the write, cut short by the deadline: a careful holder ends its
		// section when its validity runs out, not at its next write.
		wait := h.gap
		if !sessionHeld {
			wait = min(wait, max(time.Until(time.Unix(0, deadline.Load())), 0))
		}
		if sleepCtx(ctx, wait) != nil {
			break
		}
		// The careful holder's check: its deadline, what the renewer heard, its session.
		if (!sessionHeld && time.Now().UnixNano() >= deadline.Load()) || lost.Load() || h.cl.Check(ctx, l) != nil {
			h.rec.MarkLost(hid)
			break
		}
		if sessionHeld {
			h.rec.SeeUntil(hid, h.rec.Now())
		}
		h.gate()
		if h.dead.Load() {
			break
		}
		h.st.write(h.id, hid, h.key, granted, l.Token, b, seq)
	}
	// The section is over: what follows (a renewal still in flight, the release) is not
	// part of it. A renewal that lands now is not seen: the renewer returns once stopped.
	end := h.rec.Now()
	stopRenew()
	renewer.Wait()
	if h.dead.Load() {
		h.rec.EndHold(hid, end)
		return
	}
	rc, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = h.cl.Release(rc, l)
	cancel()
	h.rec.EndHold(hid, end)
}
