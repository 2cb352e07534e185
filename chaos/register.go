package chaos

// The fenced store the workload writes to: per key, a write is admitted only with a token
// at least the highest admitted so far, transfers are written whole or not at all, and
// every write goes into the history.

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// Register is the fenced downstream store of the lab: per key, an append-only log of the
// writes it accepted, the highest fencing token it has admitted, and a balance. A write is
// accepted iff its token is at least that highest token (the ≥ rule of docs/design.md §8),
// and the check, the append and the new highest token happen under one mutex, so nothing can
// slip in between. Every write and its outcome goes to the Recorder, with the instant the
// store decided.
//
// WriteAll writes several keys in one atomic step, as a transfer between two accounts must
// be written (one SQL transaction, or one Lua script over both keys): every leg is checked
// against its own key's highest token, and the store applies all the legs or none.
//
// Writes can also be held in flight (SendDelayed) and delivered later, as a packet stuck in a
// network would be. Close waits for every such delivery.
type Register struct {
	rec *Recorder

	mu       sync.Mutex
	highest  map[string]redlock.Token
	log      map[string][]int
	balances map[string]int64
	fenced   bool // false only in the checkers' control experiments: every write is accepted
	// apart is true only in the checkers' control experiments: the legs of a WriteAll are
	// decided one by one, as separate writes, so a transfer can be half applied.
	apart bool

	wg     sync.WaitGroup
	ctx    context.Context // ends when the register closes
	cancel context.CancelFunc
}

// NewRegister returns an empty fenced register that records into rec.
func NewRegister(rec *Recorder) *Register {
	ctx, cancel := context.WithCancel(context.Background())
	return &Register{rec: rec, highest: map[string]redlock.Token{}, log: map[string][]int{},
		balances: map[string]int64{}, fenced: true, ctx: ctx, cancel: cancel}
}

// WriteReq is one write: who makes it, under which hold and token, and what it adds to the
// key's balance.
type WriteReq struct {
	Client int
	Hold   int
	Key    string
	Token  redlock.Token
	Seq    int
	Delta  int64
}

func (req WriteReq) record(now time.Duration, delayed bool) Write {
	return Write{Client: req.Client, Hold: req.Hold, Key: req.Key, Token: req.Token, Seq: req.Seq, Delta: req.Delta,
		Sent: now, Delayed: delayed}
}

// Write sends the write and applies it at once. It returns whether the store accepted it.
func (g *Register) Write(req WriteReq) bool { return g.WriteAll([]WriteReq{req}) }

// WriteAll sends one write over several distinct keys, one leg per key (each under its own
// key's hold and token), and applies it at once, atomically: the store accepts every leg if
// each one's token is at least its key's highest token, and otherwise refuses them all. It
// returns whether the store accepted the write. Each leg is recorded as a Write, linked by
// Legs; a leg refused only because another was stale is marked Vetoed.
func (g *Register) WriteAll(reqs []WriteReq) bool {
	ws := make([]Write, len(reqs))
	now := g.rec.Now()
	for i, req := range reqs {
		ws[i] = req.record(now, false)
	}
	ids := g.rec.sendWrites(ws)
	ok := g.apply(ids, reqs)
	g.rec.ackWrites(ids, g.rec.Now())
	return ok
}

// apply decides on writes ids, the legs of one write: the atomic check-and-write.
func (g *Register) apply(ids []int, reqs []WriteReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds := make([]decision, len(reqs))
	all := true
	for i, req := range reqs {
		ds[i].highest = g.highest[req.Key]
		ds[i].accepted = !g.fenced || req.Token >= ds[i].highest
		all = all && ds[i].accepted
	}
	for i, req := range reqs {
		switch {
		case !all && !g.apart && ds[i].accepted:
			ds[i].accepted, ds[i].vetoed = false, true
		case ds[i].accepted:
			g.highest[req.Key] = max(ds[i].highest, req.Token)
			g.log[req.Key] = append(g.log[req.Key], ids[i])
			if req.Delta != 0 {
				g.balances[req.Key] += req.Delta
			}
		}
	}
	// Recorded under the store's lock, so the recorded order of decisions is the real one.
	g.rec.applyWrites(ids, g.rec.Now(), ds)
	return all
}

// SendDelayed sends a write that the network holds in flight: it reaches the store no
// earlier than delay from now, and not before release returns (release may wait for an
// event, and must return when its context ends; nil means no condition). The result channel
// gets the store's answer when it is delivered. If the register is closed first, the write
// is never delivered and the channel is closed without a value. It also returns the write's
// ID.
func (g *Register) SendDelayed(req WriteReq, delay time.Duration, release func(ctx context.Context)) (int, <-chan bool) {
	id := g.rec.sendWrites([]Write{req.record(g.rec.Now(), true)})[0]
	res := make(chan bool, 1)
	g.wg.Add(1)
	go func() { // owned by the register: Close waits for it
		defer g.wg.Done()
		defer close(res)
		timer := time.NewTimer(delay) // the fault itself: the write sits in the network
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-g.ctx.Done():
			return
		}
		if release != nil {
			release(g.ctx)
		}
		if g.ctx.Err() != nil {
			return
		}
		res <- g.apply([]int{id}, []WriteReq{req})
	}()
	return id, res
}

// Ack records that the writer of a delayed write learned its outcome.
func (g *Register) Ack(id int) { g.rec.ackWrites([]int{id}, g.rec.Now()) }

// Contents is what the store holds, per key: the IDs of the accepted writes in the order
// it accepted them, the highest admitted token, and the balance.
type Contents struct {
	Stored   map[string][]int
	Highest  map[string]redlock.Token
	Balances map[string]int64
}

// Contents returns a copy of what the store holds.
func (g *Register) Contents() Contents {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := Contents{Stored: make(map[string][]int, len(g.log)), Highest: maps.Clone(g.highest), Balances: maps.Clone(g.balances)}
	for k, v := range g.log {
		c.Stored[k] = slices.Clone(v)
	}
	return c
}

// Close drops the writes still in flight and waits for their goroutines.
func (g *Register) Close() {
	g.cancel()
	g.wg.Wait()
}
