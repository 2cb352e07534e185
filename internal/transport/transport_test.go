package transport

// The transport's own tests: its timing rules as pure functions of a queue's state, and its
// races (cancel against write, ordering behind an earlier call, timeouts with late replies,
// refusal while stalled, shutdown) on miniredis and, where the bytes on the wire matter, on
// a real redis-server.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

const nodeTimeout = 100 * time.Millisecond

// owner is what a client is to its queues in these tests: the work count and the stop.
type owner struct {
	work sync.WaitGroup
	stop chan struct{}
}

// newQueue returns a queue on rc, stopped and waited for when the test ends (after every
// call is final).
func newQueue(t *testing.T, rc redis.UniversalClient, timeout time.Duration, concurrency int) *Queue {
	t.Helper()
	o := &owner{stop: make(chan struct{})}
	q := New(rc, Config{Timeout: timeout, Concurrency: concurrency, Work: &o.work, Stop: o.stop})
	t.Cleanup(func() {
		o.work.Wait()
		close(o.stop)
		q.Wait()
	})
	return q
}

// chanSink delivers events into a channel with room for all of them.
type chanSink chan Event

func (s chanSink) Deliver(ev Event) { s <- ev }

// counter is a Hook that counts how often it is told.
type counter struct{ n atomic.Int32 }

func (c *counter) Finished() { c.n.Add(1) }

func miniClient(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rc.Close() })
	return m, rc
}

// TestNodeTimeoutFollowsRTT: a queue's timeout is the node timeout while the node answers
// faster, follows its smoothed round trip plus four deviations once it answers slower, comes
// back down when it is fast again, and never passes half the exec budget.
func TestNodeTimeoutFollowsRTT(t *testing.T) {
	q := &Queue{cfg: Config{Timeout: nodeTimeout}}
	if got := q.timeout(); got != nodeTimeout {
		t.Fatalf("timeout before any sample %v, want the node timeout", got)
	}
	for range 50 {
		q.sampleRTT(time.Millisecond)
	}
	if got := q.timeout(); got != nodeTimeout {
		t.Fatalf("timeout of a fast node %v, want the node timeout", got)
	}
	for range 50 {
		q.sampleRTT(200 * time.Millisecond)
	}
	if slow := q.timeout(); slow <= 200*time.Millisecond || slow > Budget(nodeTimeout)/2 {
		t.Fatalf("timeout of a node answering in 200 ms: %v, want above 200 ms and at most %v", slow, Budget(nodeTimeout)/2)
	}
	for range 100 {
		q.sampleRTT(2 * time.Second)
	}
	if got := q.timeout(); got != Budget(nodeTimeout)/2 {
		t.Fatalf("timeout of a node answering in 2 s: %v, want the cap %v", got, Budget(nodeTimeout)/2)
	}
	for range 200 {
		q.sampleRTT(time.Millisecond)
	}
	if got := q.timeout(); got != nodeTimeout {
		t.Fatalf("timeout once the node is fast again: %v, want the node timeout", got)
	}
}

// TestBudget: four node timeouts, at least a second.
func TestBudget(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{time.Millisecond, time.Second}, {nodeTimeout, time.Second}, {time.Second, 4 * time.Second},
	} {
		if got := Budget(tc.timeout); got != tc.want {
			t.Errorf("Budget(%v) = %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

// TestPatienceBoundsTimeout: a batch waits for the longest patience of its calls, never
// less than the queue's timeout, never more than half the exec budget.
func TestPatienceBoundsTimeout(t *testing.T) {
	q := &Queue{cfg: Config{Timeout: nodeTimeout}}
	calls := func(ps ...time.Duration) []*Call {
		var out []*Call
		for _, p := range ps {
			out = append(out, &Call{Patience: p})
		}
		return out
	}
	for _, tc := range []struct {
		patience []time.Duration
		want     time.Duration
	}{
		{nil, nodeTimeout},
		{[]time.Duration{50 * time.Millisecond}, nodeTimeout},
		{[]time.Duration{400 * time.Millisecond}, 400 * time.Millisecond},
		{[]time.Duration{50 * time.Millisecond, 300 * time.Millisecond}, 300 * time.Millisecond},
		{[]time.Duration{time.Hour}, Budget(nodeTimeout) / 2},
	} {
		if got := q.batchTimeout(calls(tc.patience...)); got != tc.want {
			t.Fatalf("patience %v: batch timeout %v, want %v", tc.patience, got, tc.want)
		}
	}
}

// TestLateTimerGraces: a batch's timeout timer that runs more than a quarter of the timeout
// late means the process was starved, not that the node was slow: the first such expiry
// puts the timeout off instead of reporting the calls timed out; a second one reports them.
func TestLateTimerGraces(t *testing.T) {
	q := &Queue{cfg: Config{Timeout: nodeTimeout}}
	events := make(chanSink, 4)
	cl := &Call{Sink: events}
	cl.state.Store(callSent)
	b := &batch{calls: []*Call{cl}, timeout: 100 * time.Millisecond}
	b.timer = time.AfterFunc(time.Hour, func() {})
	defer b.timer.Stop()
	b.written = time.Now().Add(-300 * time.Millisecond) // its timer fires 200 ms late
	q.expire(b)
	if len(events) != 0 || !b.graced {
		t.Fatalf("a timer 200 ms late reported %d events (graced %v), want the timeout put off", len(events), b.graced)
	}
	q.expire(b) // still no reply after the grace
	if len(events) != 1 {
		t.Fatalf("after the grace: %d events, want the timeout", len(events))
	}
	if ev := <-events; ev.Out != TimedOut || !errors.Is(ev.Err, ErrTimeout) {
		t.Fatalf("event %+v, want a timeout", ev)
	}
	// A timer on time reports at once.
	cl2 := &Call{Sink: events}
	cl2.state.Store(callSent)
	b2 := &batch{calls: []*Call{cl2}, timeout: 100 * time.Millisecond, timer: time.AfterFunc(time.Hour, func() {})}
	defer b2.timer.Stop()
	b2.written = time.Now().Add(-110 * time.Millisecond)
	q.expire(b2)
	if len(events) != 1 {
		t.Fatalf("a timer on time: %d events, want the timeout at once", len(events))
	}
}

// TestCancelRacesWrite: calls cancelled while their senders take them are either written
// (Cancel false, exactly one final event, the command applied) or never written (Cancel
// true, no event, nothing applied), never both; the hook of every call runs exactly once.
func TestCancelRacesWrite(t *testing.T) {
	m, rc := miniClient(t)
	q := newQueue(t, rc, time.Second, 4)
	const n = 2000
	events := make(chanSink, n)
	hooks := make([]counter, n)
	calls := make([]*Call, n)
	cancelled := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		calls[i] = &Call{Args: []any{"set", fmt.Sprint("k", i), "1"}, Kind: ReplySetNX, Node: 0, Tag: 7, Sink: events, OnFinal: &hooks[i]}
		q.Send(calls[i])
		if i%2 == 0 {
			wg.Go(func() { cancelled[i] = calls[i].Cancel() })
		}
	}
	wg.Wait()
	got := map[*Call]int{}
	for range n - count(cancelled) {
		select {
		case ev := <-events:
			if ev.Out != Replied || ev.Err != nil || ev.Val != 1 || ev.Tag != 7 {
				t.Fatalf("event %+v, want a reply of 1 with the call's tag", ev)
			}
			got[ev.Call]++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events, want %d", len(got), n-count(cancelled))
		}
	}
	for i, c := range calls {
		applied := m.Exists(fmt.Sprint("k", i))
		switch {
		case cancelled[i] && (applied || got[c] != 0):
			t.Fatalf("call %d: cancelled, yet applied %v with %d events", i, applied, got[c])
		case !cancelled[i] && (!applied || got[c] != 1):
			t.Fatalf("call %d: not cancelled, applied %v with %d events, want applied with one", i, applied, got[c])
		case !cancelled[i] && c.Cancelled():
			t.Fatalf("call %d: written, yet Cancelled()", i)
		}
	}
	testWaitFor(t, func() bool {
		for i := range hooks {
			if hooks[i].n.Load() != 1 {
				return false
			}
		}
		return true
	})
	if count(cancelled) == 0 {
		t.Log("no Cancel won its race this run")
	}
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// testWaitFor polls cond for up to 10 s: the hooks run just after the events.
func testWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSendAfterKeepsOrder: with eight senders, calls chained with SendAfter reach the node
// in the order of the chain.
func TestSendAfterKeepsOrder(t *testing.T) {
	m, rc := miniClient(t)
	q := newQueue(t, rc, time.Second, 8)
	const n = 200
	events := make(chanSink, n)
	var prev *Call
	for i := range n {
		c := &Call{Args: []any{"rpush", "l", fmt.Sprint(i)}, Kind: ReplyInt, Sink: events}
		q.SendAfter(prev, c)
		prev = c
	}
	for range n {
		if ev := <-events; ev.Err != nil {
			t.Fatal(ev.Err)
		}
	}
	l, err := m.List("l")
	if err != nil || len(l) != n {
		t.Fatalf("list %v, %v: want %d entries", l, err, n)
	}
	for i, v := range l {
		if v != fmt.Sprint(i) {
			t.Fatalf("entry %d is %s: the chain was overtaken", i, v)
		}
	}
}

// proxiedQueue returns a queue with one sender and a 50 ms timeout on a miniredis node
// reached through a fault proxy, after one fast round trip, so that the connection is up and
// the RTT sample is small before the test delays the proxy.
func proxiedQueue(t *testing.T) (*miniredis.Miniredis, *faultproxy.Proxy, *Queue) {
	t.Helper()
	m, rc0 := miniClient(t)
	rc0.Close()
	p, err := faultproxy.Start(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	q := newQueue(t, rc, 50*time.Millisecond, 1)
	if ev := Do(context.Background(), rc, &Call{Args: []any{"ping"}, Kind: ReplyString}); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	return m, p, q
}

// TestTimeoutThenLate: a node slower than the timeout gets its calls reported as timed out
// at the timeout, then as late with their real replies; a call chained behind a timed-out
// call is reported timed out too, and still goes out after it; a call that may be dropped,
// sent while every sender is past the timeout, is refused at once without being written.
func TestTimeoutThenLate(t *testing.T) {
	m, p, q := proxiedQueue(t)
	p.SetDelay(150*time.Millisecond, 0)
	events := make(chanSink, 8)
	first := &Call{Args: []any{"incr", "n"}, Kind: ReplyInt, Keep: true, Sink: events, Tag: 1}
	behind := &Call{Args: []any{"incr", "n"}, Kind: ReplyInt, Keep: true, Sink: events, Tag: 2}
	start := time.Now()
	q.Send(first)
	q.SendAfter(first, behind)
	seen := map[uint8][]Outcome{}
	for len(seen[1]) < 2 || len(seen[2]) < 1 {
		ev := <-events
		seen[ev.Tag] = append(seen[ev.Tag], ev.Out)
		if ev.Tag == 1 && ev.Out == TimedOut {
			if took := time.Since(start); took > 140*time.Millisecond {
				t.Fatalf("timeout reported after %v, want near the 50 ms timeout", took)
			}
			if !errors.Is(ev.Err, ErrTimeout) || ev.Final() {
				t.Fatalf("timeout event %+v: want ErrTimeout, not final", ev)
			}
			if !q.Stalled() {
				t.Fatal("the only sender is past the timeout, yet the queue is not stalled")
			}
			dropped := &Call{Args: []any{"incr", "dropped"}, Kind: ReplyInt, Sink: events, Tag: 3}
			q.Send(dropped)
		}
		if ev.Tag == 3 && (ev.Out != NotSent || !errors.Is(ev.Err, ErrStalled)) {
			t.Fatalf("call sent to a stalled queue: %+v, want NotSent with ErrStalled", ev)
		}
	}
	if fmt.Sprint(seen[1]) != fmt.Sprint([]Outcome{TimedOut, Late}) || seen[2][0] != TimedOut {
		t.Fatalf("outcomes %v, want the first timed out then late, the chained one timed out first", seen)
	}
	for seen[2][len(seen[2])-1] == TimedOut {
		ev := <-events
		seen[ev.Tag] = append(seen[ev.Tag], ev.Out)
	}
	testWaitFor(t, func() bool { v, _ := m.Get("n"); return v == "2" })
	if m.Exists("dropped") {
		t.Fatal("the refused call was written")
	}
}

// TestPipelineConnectErrorReachesEveryCall: when go-redis cannot connect for a pipeline (here its
// AUTH is refused), every call of the batch gets that error, not an empty reply.
func TestPipelineConnectErrorReachesEveryCall(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--user", "lock", "on", ">right", "~*", "&*", "+@all"}})
	rc := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0], Username: "lock", Password: "wrong", MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	q := &Queue{rc: rc}
	calls := []*Call{{Args: []any{"get", "k"}, Kind: ReplyString}, {Args: []any{"get", "k"}, Kind: ReplyString}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, cmd := range q.write(ctx, calls, nil) {
		ev := decode(ReplySlice, cmd)
		if ev.Err == nil || !strings.Contains(ev.Err.Error(), "WRONGPASS") {
			t.Fatalf("call %d of the batch: %v, want the WRONGPASS of the refused AUTH", i, ev.Err)
		}
	}
}

// TestNoscriptFallsBackToEval: a call with Src that the node answers NOSCRIPT is sent again
// as EVAL with the same keys and arguments.
func TestNoscriptFallsBackToEval(t *testing.T) {
	_, rc := miniClient(t)
	src := "return redis.call('incrby', KEYS[1], ARGV[1])"
	c := &Call{Args: []any{"evalsha", "0123456789012345678901234567890123456789", 1, "n", 5}, Src: src, Kind: ReplyInt}
	if ev := Do(context.Background(), rc, c); ev.Err != nil || ev.Val != 5 || ev.Out != Replied {
		t.Fatalf("event %+v, want 5 from the EVAL fallback", ev)
	}
	bare := &Call{Args: []any{"evalsha", "0123456789012345678901234567890123456789", 1, "n", 5}, Kind: ReplyInt}
	if ev := Do(context.Background(), rc, bare); ev.Err == nil || !strings.Contains(ev.Err.Error(), "NOSCRIPT") {
		t.Fatalf("a call without Src: %+v, want the node's NOSCRIPT", ev)
	}
}

// TestHealthyBatchAllocations: what the sender does for every healthy batch allocates
// nothing of its own: reading a batch's outcome (connRefused, nodeAnswered) on replies without
// errors, a batch context (and its Done) across generations that did not expire, and a
// drained queue's next Send. (Each of these was an allocation per batch; together a quarter of a
// TryAcquire+Release's, bench scenario g.)
func TestHealthyBatchAllocations(t *testing.T) {
	ok := redis.NewCmd(context.Background(), "evalsha")
	ok.SetVal(int64(1))
	nilReply := redis.NewCmd(context.Background(), "get")
	nilReply.SetErr(redis.Nil)
	cmds := []*redis.Cmd{ok, nilReply, ok}
	if n := testing.AllocsPerRun(100, func() {
		if refused, _ := connRefused(cmds); refused {
			t.Fatal("refused")
		}
		if !nodeAnswered(cmds) {
			t.Fatal("not answered")
		}
	}); n != 0 {
		t.Fatalf("connRefused and nodeAnswered on healthy replies: %v allocations", n)
	}

	var b batch
	first := b.context(time.Hour)
	firstDone := first.Done()
	first.stop()
	if n := testing.AllocsPerRun(100, func() {
		c := b.context(time.Hour)
		if c != first || c.Done() != firstDone {
			t.Fatal("a new context or Done channel after a generation that did not expire")
		}
		c.stop()
	}); n != 0 {
		t.Fatalf("batch context generations: %v allocations", n)
	}
	// A late fire for an ended generation, after the next one started, ends nothing.
	c := b.context(time.Hour)
	c.expire()
	if c.Err() != nil {
		t.Fatal("a late timer fire ended the next generation")
	}
	c.stop()
	b.ctx.timer.Stop()
	q := &Queue{}
	q.mu.Lock()
	defer q.mu.Unlock()
	var spare []*Call
	calls := make([]*Call, 8)
	for i := range calls {
		calls[i] = &Call{}
	}
	fill := func() {
		for _, call := range calls {
			call.state.Store(callQueued)
			q.queue = append(q.queue, call)
		}
		sent, dropped := q.take(spare[:0])
		if len(sent) != len(calls) || len(dropped) != 0 {
			t.Fatalf("took %d and dropped %d of %d", len(sent), len(dropped), len(calls))
		}
		spare = sent
	}
	fill()
	if n := testing.AllocsPerRun(100, fill); n != 0 {
		t.Fatalf("a drained queue's next calls: %v allocations", n)
	}
}

// TestExpiredBatchContextStaysExpired: once a batch's context has expired, whoever still holds
// it sees Done closed and Err DeadlineExceeded for good, and the sender's next batch gets a
// new context with an open Done. Before, the next batch un-expired the same context, and a
// child context made on it (as go-redis makes while it dials) could see Done closed, read a
// nil Err and panic ("context: internal error: missing cancel error"): the loop below
// panicked within 0.05 s then (found by a newcomer's probe).
func TestExpiredBatchContextStaysExpired(t *testing.T) {
	var b batch
	defer func() { b.ctx.timer.Stop() }()
	old := b.context(time.Millisecond)
	done := old.Done()
	<-done
	old.stop()
	next := b.context(time.Hour)
	if next == old {
		t.Fatal("an expired context reused for the next batch")
	}
	if !errors.Is(old.Err(), context.DeadlineExceeded) {
		t.Fatalf("the expired context's Err is %v once the next batch started", old.Err())
	}
	select {
	case <-old.Done():
	default:
		t.Fatal("the expired context's Done is open again")
	}
	select {
	case <-next.Done():
		t.Fatal("the next batch starts with a closed Done")
	default:
	}
	if next.Err() != nil {
		t.Fatal(next.Err())
	}
	next.stop()

	end := time.Now().Add(300 * time.Millisecond)
	n := 0
	for ; time.Now().Before(end); n++ {
		ctx := b.context(20 * time.Microsecond)
		_, cancel := context.WithCancel(ctx) // its watcher reads ctx.Err() once Done closes
		for ctx.Err() == nil {
		}
		cancel()
		ctx.stop()
	}
	t.Logf("%d expired batches, each with a child context", n)
}

// TestDrainedQueueLetsBurstGo: a drained queue keeps its array for the next calls only when
// it knows the array is small; after a burst taken batch by batch (the slice's start moved),
// the array is let go, not kept alive through its tail.
func TestDrainedQueueLetsBurstGo(t *testing.T) {
	q := &Queue{}
	q.mu.Lock()
	defer q.mu.Unlock()
	for range maxBatch + 1 {
		c := &Call{}
		q.queue = append(q.queue, c)
	}
	if sent, _ := q.take(nil); len(sent) != maxBatch || len(q.queue) != 1 {
		t.Fatalf("first take: %d sent, %d left", len(sent), len(q.queue))
	}
	if sent, _ := q.take(nil); len(sent) != 1 || q.queue != nil {
		t.Fatalf("second take: %d sent; the burst's array kept (cap %d)", len(sent), cap(q.queue))
	}
	q.queue = append(q.queue, &Call{})
	if q.take(nil); q.queue == nil || cap(q.queue) == 0 {
		t.Fatal("a small queue drained in one take lost its array")
	}
}

// TestStalledQueueReportsKeptCalls: with one sender stuck on a node that does not answer,
// the kept calls queued behind it (one queued before the stall, one sent during it) and a
// call waiting behind one of them hear their timeouts while the stuck batch is still out,
// as a written batch's calls do; every one of them is still written, in its order, once
// the node answers.
func TestStalledQueueReportsKeptCalls(t *testing.T) {
	m, p, q := proxiedQueue(t)
	p.SetDelay(300*time.Millisecond, 0)
	events := make(chanSink, 16)
	call := func(tag uint8) *Call {
		return &Call{Args: []any{"rpush", "order", tag}, Kind: ReplyInt, Keep: true, Sink: events, Tag: tag}
	}
	stuck, queued, behind, during := call(1), call(2), call(3), call(4)
	q.Send(stuck)
	testWaitFor(t, func() bool { return q.Queued() == 0 }) // the only sender has taken it
	q.Send(queued)                                         // so this one waits in the queue
	q.SendAfter(queued, behind)
	var order []string
	final := map[uint8]bool{}
	for len(final) < 4 {
		var ev Event
		select {
		case ev = <-events:
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v (tag:outcome): not every call is final", order)
		}
		if ev.Final() {
			final[ev.Tag] = true
		}
		order = append(order, fmt.Sprintf("%d:%d", ev.Tag, ev.Out))
		if ev.Tag == 1 && ev.Out == TimedOut {
			if !q.Stalled() {
				t.Fatal("the only sender is past the timeout, yet the queue is not stalled")
			}
			q.Send(during)
		}
	}
	// Every timeout came before the stuck batch's late answer.
	late := slices.Index(order, fmt.Sprintf("1:%d", Late))
	for _, tag := range []uint8{2, 3, 4} {
		if i := slices.Index(order, fmt.Sprintf("%d:%d", tag, TimedOut)); i < 0 || i > late {
			t.Fatalf("call %d: events %v (tag:outcome), want its timeout before the stuck batch's late answer", tag, order)
		}
	}
	testWaitFor(t, func() bool { l, _ := m.List("order"); return len(l) == 4 })
	// Per-node order: the stuck call first, the call sent after queued behind it (during
	// was sent on its own, so it may come before behind).
	if l, _ := m.List("order"); l[0] != "1" || slices.Index(l, "2") > slices.Index(l, "3") {
		t.Fatalf("written in the order %v, want 1 first and 2 before 3", l)
	}
}
