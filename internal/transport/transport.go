// Package transport is the per-node queue through which every command to a Redis node
// goes. It knows nothing of locks: a Call carries its arguments, the script source to resend
// on NOSCRIPT, how to decode its reply, whether it may be dropped before it is written, the
// owner's tag and sink, and a hook to run once its fate is known. A Queue writes the calls
// that are ready as one pipeline and reports each call's outcome as Events.
package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every command for a node goes through that node's Queue. A bounded number of senders per
// node (Config.Concurrency) take what is queued and write it as one go-redis pipeline: one
// write and one read for all the calls that were ready at that moment, on one pooled
// connection. Under load the batches grow instead of the number of connections and
// round trips, and a call that waits in the queue is not yet timing out: the node timeout
// starts when its batch is written. docs/design.md §3.7 gives the rules and why they keep
// the safety argument.

// Outcome is what the transport reports about one call.
type Outcome uint8

const (
	// Replied: the node answered (val or err) within the node timeout. Final.
	Replied Outcome = iota
	// TimedOut: the batch was written but the node did not answer within the node timeout.
	// The command may still be applied; a late event follows when its real fate is known.
	TimedOut
	// Late: the answer to a call that had timed out. Final.
	Late
	// NotSent: the call was dropped before it was written, so it changed nothing on the
	// node. Final.
	NotSent
)

// Event is one report about one call, delivered to the call's sink.
type Event struct {
	Call  *Call
	Node  int
	Tag   uint8 // the call's Tag: the owner's label, to tell its calls apart
	Out   Outcome
	Val   int64  // the integer reply (ReplyInt, ReplySetNX)
	Slice []any  // the array reply (ReplySlice)
	Str   string // the string reply (ReplyString)
	Err   error
}

// Final reports whether nothing more will be reported about this call.
func (e *Event) Final() bool { return e.Out != TimedOut }

// Sink receives the events of the calls it owns. Deliver runs on a transport goroutine (or
// on the enqueuing goroutine for a call refused at once) and must not block.
type Sink interface{ Deliver(ev Event) }

// ReplyKind tells the sender how to decode a reply.
type ReplyKind uint8

const (
	ReplyInt    ReplyKind = iota // an integer reply (the scripts)
	ReplySetNX                   // SET NX: OK is 1, nil is 0
	ReplySlice                   // an array reply
	ReplyString                  // a bulk string reply (INFO)
)

// Call states. Only the queued → sent and queued → cancelled moves race, and both are
// compare-and-swap, so a call is either written or never written, never both.
const (
	callQueued uint32 = iota
	callSent
	callCancelled // dropped before it was written
	callTimedOut  // written, first outcome reported as a timeout, real reply pending
	callDone
)

// Call is one command for one node.
type Call struct {
	Args []any // may be shared, read-only, by the calls of one fan-out
	// Src is the source of the script that Args run with EVALSHA ("evalsha", sha1,
	// numkeys, ...): a node that answers NOSCRIPT gets the call again as EVAL Src with the
	// same keys and arguments. Empty for other commands.
	Src  string
	Kind ReplyKind
	Keep bool // never dropped before it is written, even while the node is stalled or refusing
	// Patience: how long the call may wait for its reply when that is longer than the
	// node's timeout (at most half the exec budget, Budget); 0 for the node's timeout.
	Patience time.Duration
	Node     int   // the node's index, copied into the call's events
	Tag      uint8 // the owner's label, copied into the call's events
	Sink     Sink  // receives the call's events; nil: nobody listens
	state    atomic.Uint32

	mu    sync.Mutex
	final bool    // its real fate is known: answered, or never written
	next  []*Call // to enqueue once final (per-node ordering after this call)

	overdue atomic.Bool  // a timeout was reported before it was written (waiting behind a call)
	written atomic.Int64 // when its batch was written, in Unix ns; set only with Config.StampWrites

	// OnFinal, when set, is told once that the call is final: answered, or never written
	// (for instance, to keep later calls behind it until its fate is known).
	OnFinal Hook
}

// Hook is told when a call is final. Finished runs on a transport goroutine (or on the
// enqueuing goroutine for a call refused at once) and must not block.
type Hook interface{ Finished() }

// Written is when the call's batch was written, in Unix nanoseconds, or 0 when it was not
// (yet), or when the queue does not stamp writes (Config.StampWrites).
func (c *Call) Written() int64 { return c.written.Load() }

// Cancelled reports whether the call was dropped before it was written.
func (c *Call) Cancelled() bool { return c.state.Load() == callCancelled }

// Cancel drops the call if it has not been written yet. It reports whether it did; the
// caller then knows the call changed nothing and will get no event for it.
func (c *Call) Cancel() bool { return c.state.CompareAndSwap(callQueued, callCancelled) }

// Queue is the transport of one node.
type Queue struct {
	cfg     Config
	rc      redis.UniversalClient
	wake    chan struct{}  // work for an idle sender; buffered
	senders sync.WaitGroup // the sender goroutines

	mu       sync.Mutex
	queue    []*Call
	sliced   bool      // queue does not start at its array's start (a take left calls behind)
	active   int       // senders running, idle ones included
	idle     int       // senders waiting for work
	overdue  int       // batches in flight past the node timeout
	lastBack time.Time // when a batch of this node last returned
	lastErr  error     // the error of the last batch that failed without the node answering; nil once it answers
	// The node refuses our authentication (connRefused): calls that may be dropped are
	// refused at once until downUntil, a pause that doubles from downMin to downMax while
	// the refusals go on, so that a misconfigured node costs a dial per pause, not one per
	// call of every process.
	downUntil time.Time
	downFor   time.Duration

	// The node's round trips as this process sees them (write to reply of a batch the node
	// answered), smoothed as TCP smooths its RTT (RFC 6298): srtt the mean, rttvar the mean
	// deviation; 0 before the first sample. They set timeout().
	srtt, rttvar time.Duration
}

// RFC 6298's gains for the smoothed round trip and its deviation, and the multiple of the
// deviation in the timeout.
const (
	rttAlpha = 8 // srtt moves 1/8 of the way to each sample
	rttBeta  = 4 // rttvar moves 1/4 of the way
	rttK     = 4
)

// sampleRTT adds one round trip of a batch the node answered. Called with q.mu held.
func (q *Queue) sampleRTT(r time.Duration) {
	if q.srtt == 0 {
		q.srtt, q.rttvar = r, r/2
		return
	}
	dev := q.srtt - r
	if dev < 0 {
		dev = -dev
	}
	q.rttvar += (dev - q.rttvar) / rttBeta
	q.srtt += (r - q.srtt) / rttAlpha
}

// timeout is how long a batch written now waits for the node before its calls are reported
// as timed out: the node timeout, or when the node has lately been slower than that (a node
// shared by many processes under load), its smoothed round trip plus four deviations, as
// TCP's retransmission timer follows the RTT; at most half the exec budget. A node that stops
// answering keeps the timeout its last answers gave it, so it still fails fast. Called with
// q.mu held.
func (q *Queue) timeout() time.Duration {
	return min(max(q.cfg.Timeout, q.srtt+rttK*q.rttvar), q.budget()/2)
}

// batchTimeout is the timeout of a batch of calls: the node's, or the longest patience among
// them, at most half the exec budget. Called with q.mu held.
func (q *Queue) batchTimeout(calls []*Call) time.Duration {
	t := q.timeout()
	for _, c := range calls {
		t = max(t, min(c.Patience, q.budget()/2))
	}
	return t
}

// Config is what a Queue needs from its owner.
type Config struct {
	// Timeout is the node timeout: how long a written batch waits for its replies before
	// its calls are reported as timed out (longer for a node that has lately been slower,
	// up to half the exec budget). Must be positive.
	Timeout time.Duration
	// Concurrency is the most senders (pipelines in flight) for the node; at least 1.
	Concurrency int
	// StampWrites records when each call was written (Call.Written), for an observer.
	StampWrites bool
	// Work counts every call sent until it is final; the owner waits on it before it
	// closes Stop. Required.
	Work *sync.WaitGroup
	// Stop is closed by the owner once every call is final (Work is zero and no more will
	// be sent): the idle senders end. Required.
	Stop <-chan struct{}
}

// New returns the queue of one node. It starts no goroutine until the first call.
func New(rc redis.UniversalClient, cfg Config) *Queue {
	cfg.Concurrency = max(cfg.Concurrency, 1)
	return &Queue{cfg: cfg, rc: rc, wake: make(chan struct{}, cfg.Concurrency)}
}

// Wait waits for the queue's senders to end: call it after closing Config.Stop.
func (q *Queue) Wait() { q.senders.Wait() }

// Budget bounds how long one batch may hold a sender for clients that honour context
// deadlines: long enough for a busy node to answer late (an undo then still lands), short
// enough that a hung node does not hold a sender for ever. It is four node timeouts, at
// least a second.
func Budget(timeout time.Duration) time.Duration { return max(4*timeout, time.Second) }

func (q *Queue) budget() time.Duration { return Budget(q.cfg.Timeout) }

// batch is what one sender writes at once. Each sender keeps one and reuses it.
type batch struct {
	mu      sync.Mutex    // held by expire while it reports, so that exec reports after it
	calls   []*Call       // nil between batches; guarded by mu
	written time.Time     // guarded by mu
	timeout time.Duration // batchTimeout when it was written; guarded by mu
	graced  bool          // expire put the timeout off once because its timer ran late; guarded by mu
	timer   *time.Timer   // the node timeout of the batch in flight
	overdue bool          // past the node timeout while in flight; guarded by the queue's mu
	back    bool          // its replies are in; guarded by the queue's mu
	ctx     *batchCtx     // the context of the batch in flight (batch.context)
}

// batchCtx is the context a sender gives go-redis for each of its batches: no values, a
// deadline of the exec budget, and Done closed at that deadline. A context.WithTimeout per
// batch was a tenth of an acquire's allocations, so a sender reuses one from batch to batch
// (each batch a new generation, so that a timer that fires late cannot end a later batch)
// for as long as it has not expired. Once it has, it stays expired: Done closed and Err
// DeadlineExceeded for whoever still holds it, and the sender's next batch gets a new one.
// Un-expiring it would let the two disagree, and a child context (context.WithCancel or
// WithTimeout on it, as go-redis makes while it dials) whose watcher sees Done closed and
// then reads a nil Err panics ("context: internal error: missing cancel error").
type batchCtx struct {
	timer *time.Timer

	mu       sync.Mutex
	gen      uint64
	armed    uint64 // the generation the timer was set for
	deadline time.Time
	done     chan struct{} // made on first Done, closed by expire
	expired  bool          // never reset
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newBatchCtx() *batchCtx {
	c := &batchCtx{}
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()
	return c
}

// context starts the context of the batch's next write, with a deadline budget from now:
// the one of the batch before unless it expired.
func (b *batch) context(budget time.Duration) *batchCtx {
	if b.ctx == nil || b.ctx.hasExpired() {
		if b.ctx != nil {
			b.ctx.timer.Stop()
		}
		b.ctx = newBatchCtx()
	}
	b.ctx.start(budget)
	return b.ctx
}

func (c *batchCtx) hasExpired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expired
}

// start begins a new generation with a deadline budget from now. c has not expired.
func (c *batchCtx) start(budget time.Duration) {
	c.mu.Lock()
	c.gen++
	c.armed = c.gen
	c.deadline = time.Now().Add(budget)
	c.mu.Unlock()
	c.timer.Reset(budget)
}

// stop ends the generation.
func (c *batchCtx) stop() {
	c.timer.Stop()
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

func (c *batchCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A fire for a generation that has ended: either it ended since (gen moved on), or the
	// callback was so late that a later generation has started; that one's deadline, set
	// before its Reset, is then still ahead.
	if c.armed != c.gen || c.expired || time.Now().Before(c.deadline) {
		return
	}
	c.expired = true
	if c.done != nil {
		close(c.done)
	}
}

func (c *batchCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

func (c *batchCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.expired && c.done == nil:
		return closedChan
	case c.done == nil:
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *batchCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expired {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *batchCtx) Value(any) any { return nil }

// maxBatch caps the calls of one pipeline, so that one write stays a bounded amount of
// work for the node and for the reader.
const maxBatch = 64

// maxKeptQueue is the largest queue array a drained queue keeps for its next calls; a larger
// one (left by a burst) is let go.
const maxKeptQueue = 1024

// Stalled reports that every sender is waiting on a batch that is past the node timeout: the
// node is not answering, and a call that may be dropped is refused at once.
func (q *Queue) Stalled() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stalled()
}

// Queued is the number of calls waiting to be written.
func (q *Queue) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// stalled is Stalled with q.mu held.
func (q *Queue) stalled() bool { return q.overdue > 0 && q.overdue == q.active-q.idle }

// Send enqueues c. The call holds Config.Work until it is final. A call that may be dropped
// (not Keep) is refused at once (NotSent, ErrStalled or ErrRefusing) while the node is
// stalled or refusing our authentication.
func (q *Queue) Send(c *Call) {
	q.cfg.Work.Add(1)
	q.mu.Lock()
	if !c.Keep && (q.stalled() || q.refusing()) {
		why := ErrStalled
		if !q.stalled() {
			why = ErrRefusing
		}
		q.mu.Unlock()
		if c.state.CompareAndSwap(callQueued, callCancelled) {
			q.report(c, Event{Out: NotSent, Err: q.downErr(why)})
		} // else the owner cancelled it first
		q.finish(c)
		return
	}
	q.queue = append(q.queue, c)
	switch {
	case q.idle > 0:
		select {
		case q.wake <- struct{}{}:
		default: // enough wake-ups are pending
		}
	case q.active < q.cfg.Concurrency:
		q.active++
		q.senders.Add(1)
		go q.run()
	}
	// A kept call on a stalled node, with no sender free or started for it, waits behind
	// batches the node is not answering: its owner hears its timeout now, as it would have
	// from a written batch (expire).
	waitsBehindStall := q.idle == 0 && q.stalled()
	q.mu.Unlock()
	if waitsBehindStall {
		q.reportWaitingTimeout(c)
	}
}

// SendAfter enqueues c once prev is final, so that c cannot overtake prev on this node.
// prev nil means no ordering.
//
// While c waits behind a call that has already timed out (the node is not answering it), c
// is reported as timed out too, so that its owner can decide without it; c itself still goes
// out, in order, once prev is final.
func (q *Queue) SendAfter(prev, c *Call) {
	if prev != nil {
		prev.mu.Lock()
		if !prev.final {
			q.cfg.Work.Add(1) // held by c while it waits; released when it is enqueued
			prev.next = append(prev.next, c)
			prev.mu.Unlock()
			if prev.state.Load() == callTimedOut || prev.overdue.Load() {
				q.reportWaitingTimeout(c)
			}
			return
		}
		prev.mu.Unlock()
	}
	q.Send(c)
}

// reportWaitingTimeout reports, once, that c is timed out while it waits behind a call, and
// so are the calls waiting behind c.
func (q *Queue) reportWaitingTimeout(c *Call) {
	if !c.overdue.CompareAndSwap(false, true) {
		return
	}
	q.report(c, Event{Out: TimedOut, Err: q.downErr(ErrTimeout)})
	q.reportWaiting(c)
}

// reportWaiting reports the calls waiting behind c as timed out.
func (q *Queue) reportWaiting(c *Call) {
	c.mu.Lock()
	waiting := slices.Clone(c.next)
	c.mu.Unlock()
	for _, n := range waiting {
		q.reportWaitingTimeout(n)
	}
}

// run is one sender: it writes batches while there is work, and waits for more when there
// is none, until the owner closes Config.Stop (once every call is final). An idle sender
// waits on a channel, not a timer: a process that sends a few calls a second would
// otherwise wake for every sender's timer after every batch, which on a machine shared by
// tens of processes costs more than the batches.
func (q *Queue) run() {
	defer q.senders.Done()
	b := &batch{back: true}
	b.timer = time.AfterFunc(time.Hour, func() { q.expire(b) })
	b.timer.Stop()
	defer b.timer.Stop()
	defer func() {
		if b.ctx != nil {
			b.ctx.timer.Stop()
		}
	}()
	var spare []*Call
	var cmds []*redis.Cmd
	for {
		q.mu.Lock()
		calls, dropped := q.take(spare[:0])
		if len(calls) == 0 && len(dropped) == 0 {
			q.idle++
			q.mu.Unlock()
			stop := false
			select {
			case <-q.wake:
			case <-q.cfg.Stop:
				stop = true
			}
			q.mu.Lock()
			q.idle--
			if stop && len(q.queue) == 0 {
				q.active--
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			continue
		}
		q.mu.Unlock()
		for _, c := range dropped {
			q.finish(c) // cancelled by its owner: never written
		}
		if len(calls) > 0 {
			cmds = q.exec(b, calls, cmds[:0])
			clear(calls) // no references kept to finished calls
			spare = calls
		}
	}
}

// take moves up to maxBatch calls from the queue into calls and marks them sent. It also
// returns the cancelled calls it met, for the caller to finish once q.mu is released.
// Called with q.mu held.
func (q *Queue) take(calls []*Call) (sent, dropped []*Call) {
	n := 0
	for n < len(q.queue) && len(calls) < maxBatch {
		c := q.queue[n]
		q.queue[n] = nil
		n++
		if c.state.CompareAndSwap(callQueued, callSent) {
			calls = append(calls, c)
		} else {
			dropped = append(dropped, c)
		}
	}
	switch {
	case n < len(q.queue):
		q.queue = q.queue[n:]
		q.sliced = true
	case q.sliced || cap(q.queue) > maxKeptQueue:
		// A burst's array is not kept: its capacity is more than maxKeptQueue, or unknown
		// once the slice no longer starts at the array's start.
		q.queue, q.sliced = nil, false
	default:
		q.queue = q.queue[:0] // the next Send appends without allocating
	}
	return calls, dropped
}

// exec writes one batch and reports every call's outcome. The node timeout runs from the
// write: when it passes first (see expire), the calls are reported as timed out, and their
// real replies follow as late events. It returns cmds for reuse.
func (q *Queue) exec(b *batch, calls []*Call, cmds []*redis.Cmd) []*redis.Cmd {
	b.mu.Lock()
	q.mu.Lock()
	b.back, b.overdue = false, false
	b.timeout, b.graced = q.batchTimeout(calls), false
	q.mu.Unlock()
	b.calls = calls
	b.written = time.Now()
	if q.cfg.StampWrites {
		w := b.written.UnixNano()
		for _, c := range calls {
			c.written.Store(w)
		}
	}
	b.timer.Reset(b.timeout)
	b.mu.Unlock()
	// Every batch carries a deadline, the exec budget: clients that honour context deadlines
	// (and go-redis hooks that watch ctx) stop there; the others stop at their own read
	// timeout. The node timeout itself is the timer above.
	ctx := b.context(q.budget())
	defer ctx.stop()
	cmds = q.write(ctx, calls, cmds)
	b.mu.Lock() // an expire that has started reports its timeouts first
	defer b.mu.Unlock()
	b.timer.Stop()
	b.calls = nil
	alive := nodeAnswered(cmds)
	q.mu.Lock()
	b.back = true
	if down, err := connRefused(cmds); down {
		q.lastErr = err
		q.downFor = min(max(2*q.downFor, downMin), downMax)
		q.downUntil = time.Now().Add(q.downFor)
	} else if alive {
		q.lastBack = time.Now()
		q.sampleRTT(q.lastBack.Sub(b.written))
		q.lastErr, q.downFor, q.downUntil = nil, 0, time.Time{}
	} else if len(cmds) > 0 {
		q.lastErr = cmds[0].Err()
	}
	if b.overdue {
		q.overdue--
	}
	q.mu.Unlock()
	for i, c := range calls {
		ev := decode(c.Kind, cmds[i])
		if c.state.CompareAndSwap(callSent, callDone) {
			ev.Out = Replied
		} else { // timed out
			c.state.Store(callDone)
			ev.Out = Late
		}
		q.report(c, ev)
		q.finish(c)
	}
	clear(cmds)
	return cmds
}

// write sends the calls as one pipeline (or one command) and resends as EVAL the scripts a
// node answered with NOSCRIPT (its script cache was lost by a restart or SCRIPT FLUSH).
func (q *Queue) write(ctx context.Context, calls []*Call, cmds []*redis.Cmd) []*redis.Cmd {
	cmds = append(cmds[:0], make([]*redis.Cmd, len(calls))...)
	if len(calls) == 1 {
		cmds[0] = redis.NewCmd(ctx, calls[0].Args...)
		_ = q.rc.Process(ctx, cmds[0])
	} else {
		pipe := q.rc.Pipeline()
		for i, c := range calls {
			cmds[i] = pipe.Do(ctx, c.Args...)
		}
		_, err := pipe.Exec(ctx)
		unsent(cmds, err)
	}
	var again []int
	for i, c := range calls {
		if c.Src != "" && cmds[i].Err() != nil && redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	// The node has applied none of these: they go again with an exec budget of their own.
	// Under the first write's, a node slower than the budget answered NOSCRIPT after it had
	// ended, and the EVAL was never written: a release or an undo, which are never dropped,
	// then left our key there until its TTL (TestRealScriptCacheLostOnSlowNode).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.budget())
	defer cancel()
	pipe := q.rc.Pipeline()
	for _, i := range again {
		eval := make([]any, len(calls[i].Args))
		copy(eval, calls[i].Args)
		eval[0], eval[1] = "eval", calls[i].Src
		cmds[i] = pipe.Do(rctx, eval...)
	}
	_, err := pipe.Exec(rctx)
	for _, i := range again {
		unsent(cmds[i:i+1], err)
	}
	return cmds
}

// unsent gives err, the error of a whole pipeline, to its commands that got neither a reply
// nor an error: go-redis v9.23 returns a failure to connect (a refused dial, a refused AUTH)
// from Exec without setting it on the commands, which would then read as empty replies.
func unsent(cmds []*redis.Cmd, err error) {
	if err == nil {
		return
	}
	for _, cmd := range cmds {
		if cmd.Err() == nil && cmd.Val() == nil {
			cmd.SetErr(err)
		}
	}
}

// expire runs at the node timeout of a batch that has not returned. If the timer itself
// ran more than a quarter of the timeout late, the process was starved of CPU and the reply
// may be waiting unread: the timeout is put off once. If the node has answered another batch
// within the last node timeout, it is alive and the delay is most likely this process's own
// (a sender waiting for a CPU behind thousands of goroutines): the timeout is put off, up to
// the exec budget after the write. Otherwise the calls are
// reported as timed out, and if every sender is now stuck, the queued calls that may be
// dropped are refused at once instead of waiting behind them.
func (q *Queue) expire(b *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	timeout := b.timeout
	if b.calls == nil {
		return // between batches: a timer that fired for a batch that has returned
	}
	if age := now.Sub(b.written); age < timeout {
		b.timer.Reset(timeout - age) // fired for an earlier batch of this sender
		return
	}
	if late := now.Sub(b.written.Add(timeout)); late > timeout/4 && !b.graced {
		// The timer itself ran late: this process was starved of CPU (a CPU limit, a
		// loaded machine), and the reply may be waiting unread. Give the sender the time to
		// read it once it runs again.
		b.graced = true
		b.timer.Reset(max(timeout/2, late))
		return
	}
	q.mu.Lock()
	if b.back {
		q.mu.Unlock()
		return
	}
	if since := now.Sub(q.lastBack); since < timeout && now.Sub(b.written) < q.budget() {
		q.mu.Unlock()
		b.timer.Reset(timeout - since)
		return
	}
	// The batch is overdue from now, before any owner hears of its timeout: a call the owner
	// sends on hearing it (the next attempt, say) finds the queue stalled if it is.
	var dropped []*Call
	if !b.overdue {
		b.overdue = true
		q.overdue++
	}
	var kept []*Call
	if q.stalled() {
		kept = q.queue[:0]
		for _, c := range q.queue {
			if !c.Keep && c.state.CompareAndSwap(callQueued, callCancelled) {
				dropped = append(dropped, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(q.queue[len(kept):])
		q.queue = kept
		kept = slices.Clone(kept) // reported below, without q.mu
	}
	q.mu.Unlock()
	// The kept calls wait behind batches the node is not answering: with one sender (the
	// default) that is every call sent to the node since. Their owners hear a timeout now,
	// as the written calls' do (reportWaitingTimeout: once, and the calls waiting behind
	// them too); they are still written in order once a sender is free. Without this a
	// release queued here held back the Client's next acquire call to the node until
	// go-redis gave up on the stuck batch, and an attempt split between the other nodes
	// waited for it (TestStalledQueueReportsKeptCalls).
	for _, c := range kept {
		if c.state.Load() == callQueued {
			q.reportWaitingTimeout(c)
		}
	}
	// Every call, Keep calls too, reports its timeout now: its owner gets an answer within
	// the node's timeout. The call itself goes on (up to the exec budget), and its late
	// answer still reaches the sink and the OnFinal hook.
	for _, c := range b.calls {
		if c.state.CompareAndSwap(callSent, callTimedOut) {
			q.report(c, Event{Out: TimedOut, Err: q.downErr(ErrTimeout)})
			q.reportWaiting(c)
		}
	}
	for _, c := range dropped {
		q.report(c, Event{Out: NotSent, Err: q.downErr(ErrStalled)})
		q.finish(c)
	}
}

// downErr is base (a timeout, or "not sent") with the node's last connection error, if any.
func (q *Queue) downErr(base error) error {
	q.mu.Lock()
	last := q.lastErr
	q.mu.Unlock()
	return DownError{base: base, last: last}
}

// FirstOutcome reports whether ev is the call's first outcome: not a late answer, and not
// the answer of a call reported timed out while it waited behind another.
func FirstOutcome(ev Event) bool {
	return ev.Out != Late && !(ev.Out == Replied && ev.Call != nil && ev.Call.overdue.Load())
}

// report gives an event to the call's owner.
func (q *Queue) report(c *Call, ev Event) {
	c.mu.Lock()
	s := c.Sink // finish clears it, possibly on another goroutine
	c.mu.Unlock()
	if s == nil {
		return
	}
	ev.Call, ev.Node, ev.Tag = c, c.Node, c.Tag
	s.Deliver(ev)
}

// finish marks c final: the calls ordered after it are enqueued, and it stops counting as
// background work. References the call no longer needs are dropped, since a Lock keeps its
// acquire calls for as long as it lives.
func (q *Queue) finish(c *Call) {
	c.mu.Lock()
	c.final = true
	next := c.next
	c.next = nil
	c.Args, c.Sink = nil, nil
	c.mu.Unlock()
	if h := c.OnFinal; h != nil {
		c.OnFinal = nil
		h.Finished()
	}
	for _, n := range next {
		q.Send(n)
		q.cfg.Work.Done() // the hold taken in SendAfter
	}
	q.cfg.Work.Done()
}

// Bounds of the pause during which a node that refused our authentication gets no call that
// may be dropped (Queue.downUntil).
const (
	downMin = 50 * time.Millisecond
	downMax = time.Second
)

// refusing reports, with q.mu held, that the node refused the last connection's
// authentication and its pause has not passed.
func (q *Queue) refusing() bool {
	return !q.downUntil.IsZero() && time.Now().Before(q.downUntil)
}

// connRefused reports whether a batch failed because the node refused the connection's
// authentication, and returns that error: the first command failed with WRONGPASS or
// NOAUTH, which go-redis meets in the handshake of every new connection, dialling again for
// the next command as if the dial had been good, or with Redis's "Protocol error:
// unauthenticated …", with which a node that wants a password closes a connection that sent
// none at its first long command (more than ten arguments: every acquire script); and no
// command of the batch succeeded. A refused dial is not counted: go-redis's pool already
// stops dialling after PoolSize failed dials and probes once a second (internal/pool, tryDial,
// v9.23); and a timeout is a slow or hung node, the node timeout's business.
func connRefused(cmds []*redis.Cmd) (bool, error) {
	if len(cmds) == 0 {
		return false, nil
	}
	err := cmds[0].Err()
	if err == nil {
		return false, nil
	}
	var rerr redis.Error // declared after the nil check: errors.As moves it to the heap
	if !errors.As(err, &rerr) ||
		!(redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH") ||
			redis.HasErrorPrefix(err, "Protocol error: unauthenticated")) {
		return false, nil
	}
	for _, cmd := range cmds[1:] {
		if cmd.Err() == nil {
			return false, nil
		}
	}
	return true, err
}

// nodeAnswered reports whether the node itself answered at least one command of a batch
// (a reply, or an error reply such as NOSCRIPT), as opposed to a batch that failed on the
// connection (a read timeout, a reset): only an answer shows the node is alive.
func nodeAnswered(cmds []*redis.Cmd) bool {
	for _, cmd := range cmds {
		err := cmd.Err()
		if err == nil || errors.Is(err, redis.Nil) {
			return true
		}
		var rerr redis.Error // declared here, not before the checks above: it escapes
		if errors.As(err, &rerr) {
			return true
		}
	}
	return false
}

// decode turns a reply into an event's value.
func decode(kind ReplyKind, cmd *redis.Cmd) Event {
	switch kind {
	case ReplySetNX:
		switch err := cmd.Err(); {
		case err == nil:
			return Event{Val: 1}
		case errors.Is(err, redis.Nil):
			return Event{Val: 0}
		default:
			return Event{Err: err}
		}
	case ReplySlice:
		v, err := cmd.Slice()
		return Event{Slice: v, Err: err}
	case ReplyString:
		v, err := cmd.Text()
		return Event{Str: v, Err: err}
	}
	v, err := cmd.Int64()
	return Event{Val: v, Err: err}
}

// ErrTimeout is a node's error when it did not answer within the node timeout.
var ErrTimeout = errors.New("no reply within the node timeout")

// DownError is ErrTimeout, ErrStalled or ErrRefusing with what the node's connection last
// failed with (a refused dial, a refused AUTH), when it failed without the node answering:
// a timeout alone would hide that the node refuses connections.
type DownError struct {
	base, last error // last may be nil
}

func (e DownError) Error() string {
	if e.last == nil {
		return e.base.Error()
	}
	return e.base.Error() + " (the connection's last error: " + e.last.Error() + ")"
}

// Unwrap returns the sentinel and the connection's error, for errors.Is and errors.As.
func (e DownError) Unwrap() []error {
	if e.last == nil {
		return []error{e.base}
	}
	return []error{e.base, e.last}
}

// ErrStalled is a node's error when a call was not sent because every call in flight
// to that node was already past the node timeout.
var ErrStalled = errors.New("not sent: the node is not answering (every call in flight is past the node timeout)")

// ErrRefusing is a node's error when a call was not sent because the node refused its
// last connection's authentication (connRefused) and the pause before the next try has not
// passed.
var ErrRefusing = errors.New("not sent: the node refused the last connection's authentication (it is tried again after a pause)")

// Do writes one call to rc directly, outside any queue (with the NOSCRIPT fallback), and
// returns its reply: an Event with Out Replied, whose Err is the node's or the connection's
// error. It waits as long as rc and ctx let it. For tests and tools.
func Do(ctx context.Context, rc redis.UniversalClient, c *Call) Event {
	q := &Queue{rc: rc}
	ev := decode(c.Kind, q.write(ctx, []*Call{c}, nil)[0])
	ev.Call, ev.Node, ev.Tag, ev.Out = c, c.Node, c.Tag, Replied
	return ev
}
