package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// Register is the fenced downstream store of the lab: per key, an append-only log of the
// writes it accepted and the highest fencing token it has admitted. A write is accepted iff
// its token is at least that highest token (the ≥ rule of docs/design.md §8), and the check,
// the append and the new highest token happen under one mutex, so nothing can slip in
// between. Every write and its outcome goes to the Recorder, with the instant the store
// decided.
//
// Writes can also be held in flight (SendDelayed) and delivered later, as a packet stuck in a
// network would be. Close waits for every such delivery.
type Register struct {
	rec *Recorder

	mu      sync.Mutex
	highest map[string]redlock.Token
	log     map[string][]int
	fenced  bool // false only in the checkers' control experiments: every write is accepted

	wg     sync.WaitGroup
	ctx    context.Context // ends when the register closes
	cancel context.CancelFunc
}

// NewRegister returns an empty fenced register that records into rec.
func NewRegister(rec *Recorder) *Register {
	ctx, cancel := context.WithCancel(context.Background())
	return &Register{rec: rec, highest: map[string]redlock.Token{}, log: map[string][]int{},
		fenced: true, ctx: ctx, cancel: cancel}
}

// WriteReq is one write: who makes it, under which hold and token.
type WriteReq struct {
	Client int
	Hold   int
	Key    string
	Token  redlock.Token
	Seq    int
}

// Write sends the write and applies it at once. It returns whether the store accepted it.
func (g *Register) Write(req WriteReq) bool {
	id := g.rec.sendWrite(Write{Client: req.Client, Hold: req.Hold, Key: req.Key, Token: req.Token, Seq: req.Seq, Sent: g.rec.Now()})
	ok := g.apply(id, req)
	g.rec.ackWrite(id, g.rec.Now())
	return ok
}

// apply decides on write id: the atomic check-and-write.
func (g *Register) apply(id int, req WriteReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.highest[req.Key]
	ok := !g.fenced || req.Token >= h
	if ok {
		g.highest[req.Key] = max(h, req.Token)
		g.log[req.Key] = append(g.log[req.Key], id)
	}
	// Recorded under the store's lock, so the recorded order of decisions is the real one.
	g.rec.applyWrite(id, g.rec.Now(), ok, h)
	return ok
}

// SendDelayed sends a write that the network holds in flight: it reaches the store no
// earlier than delay from now, and not before release returns (release may wait for an
// event, and must return when its context ends; nil means no condition). The result channel
// gets the store's answer when it is delivered. If the register is closed first, the write
// is never delivered and the channel is closed without a value. It also returns the write's
// ID.
func (g *Register) SendDelayed(req WriteReq, delay time.Duration, release func(ctx context.Context)) (int, <-chan bool) {
	id := g.rec.sendWrite(Write{Client: req.Client, Hold: req.Hold, Key: req.Key, Token: req.Token, Seq: req.Seq,
		Sent: g.rec.Now(), Delayed: true})
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
		res <- g.apply(id, req)
	}()
	return id, res
}

// Ack records that the writer of a delayed write learned its outcome.
func (g *Register) Ack(id int) { g.rec.ackWrite(id, g.rec.Now()) }

// Contents returns, per key, the IDs of the accepted writes in order, and the highest token.
func (g *Register) Contents() (map[string][]int, map[string]redlock.Token) {
	g.mu.Lock()
	defer g.mu.Unlock()
	log := make(map[string][]int, len(g.log))
	for k, v := range g.log {
		log[k] = append([]int(nil), v...)
	}
	hi := make(map[string]redlock.Token, len(g.highest))
	for k, v := range g.highest {
		hi[k] = v
	}
	return log, hi
}

// Close drops the writes still in flight and waits for their goroutines.
func (g *Register) Close() {
	g.cancel()
	g.wg.Wait()
}
