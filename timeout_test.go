package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestNodeTimeoutFollowsRTT: a node's timeout is the node timeout while the node answers
// faster, follows its smoothed round trip plus four deviations once it answers slower, comes
// back down when it is fast again, and never passes half the exec budget.
func TestNodeTimeoutFollowsRTT(t *testing.T) {
	c := &Client{cfg: defaultConfig()}
	q := &nodeQueue{cl: c}
	if got := q.timeout(); got != DefaultNodeTimeout {
		t.Fatalf("timeout before any sample %v, want the node timeout", got)
	}
	for range 50 {
		q.sampleRTT(time.Millisecond)
	}
	if got := q.timeout(); got != DefaultNodeTimeout {
		t.Fatalf("timeout of a fast node %v, want the node timeout", got)
	}
	for range 50 {
		q.sampleRTT(200 * time.Millisecond)
	}
	slow := q.timeout()
	if slow <= 200*time.Millisecond || slow > c.execBudget()/2 {
		t.Fatalf("timeout of a node answering in 200 ms: %v, want above 200 ms and at most %v", slow, c.execBudget()/2)
	}
	for range 100 {
		q.sampleRTT(2 * time.Second)
	}
	if got := q.timeout(); got != c.execBudget()/2 {
		t.Fatalf("timeout of a node answering in 2 s: %v, want the cap %v", got, c.execBudget()/2)
	}
	for range 200 {
		q.sampleRTT(time.Millisecond)
	}
	if got := q.timeout(); got != DefaultNodeTimeout {
		t.Fatalf("timeout once the node is fast again: %v, want the node timeout", got)
	}
}

// TestPatienceBoundsTimeout: a batch waits for the longest patience of its calls (a
// twentieth of an acquire's TTL), never less than the node's timeout, never more than half
// the exec budget.
func TestPatienceBoundsTimeout(t *testing.T) {
	c := &Client{cfg: defaultConfig()}
	q := &nodeQueue{cl: c}
	calls := func(ttls ...time.Duration) []*call {
		var out []*call
		for _, ttl := range ttls {
			out = append(out, &call{patience: patienceFor(ttl)})
		}
		return out
	}
	for _, tc := range []struct {
		ttls []time.Duration
		want time.Duration
	}{
		{nil, DefaultNodeTimeout},
		{[]time.Duration{time.Second}, DefaultNodeTimeout},         // 50 ms of patience: the node timeout is longer
		{[]time.Duration{8 * time.Second}, 400 * time.Millisecond}, // go-redsync's 5 % of its default expiry
		{[]time.Duration{time.Second, 6 * time.Second}, 300 * time.Millisecond},
		{[]time.Duration{time.Hour}, c.execBudget() / 2},
	} {
		if got := q.batchTimeout(calls(tc.ttls...)); got != tc.want {
			t.Fatalf("TTLs %v: batch timeout %v, want %v", tc.ttls, got, tc.want)
		}
	}
}

// TestRealSlowNodesDoNotTimeOut: three of five real nodes start answering 150 ms late each
// way, after two clients have seen them answer fast (a node timeout of 100 ms would give up
// on all three). An acquire with an 8 s TTL waits for them (its patience is 400 ms) and
// succeeds at once; one with a 1 s TTL (50 ms of patience) fails at first, and the round
// trips its late replies show raise the nodes' timeouts, so that a later attempt succeeds.
func TestRealSlowNodesDoNotTimeOut(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	var clients []redis.UniversalClient
	var proxies []*faultproxy.Proxy
	for i, a := range cluster.Addrs() {
		if i >= 3 {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
			continue
		}
		p, err := faultproxy.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		clients = append(clients, redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1}))
	}
	for _, rc := range clients {
		t.Cleanup(func() { rc.Close() })
	}
	ctx := ctxT(t, 60*time.Second)
	c8 := newTestClient(t, clients, WithNodeTimeout(100*time.Millisecond))
	c1 := newTestClient(t, clients, WithNodeTimeout(100*time.Millisecond))
	for _, c := range []*Client{c8, c1} { // fast round trips first
		for range 20 {
			l, err := c.TryAcquire(ctx, "slow:warm", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		settle(c)
	}
	for _, p := range proxies {
		p.SetDelay(150*time.Millisecond, 150*time.Millisecond)
	}
	l, err := c8.TryAcquire(ctx, "slow:8s", 8*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire with an 8 s TTL on three nodes 300 ms away: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c1.TryAcquire(ctx, "slow:1s", time.Second)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("first TryAcquire with a 1 s TTL: %v, want ErrNotAcquired (the nodes answer after its 100 ms)", err)
	}
	for range 20 {
		settle(c1) // the late replies come in: their round trips are sampled
		if l, err = c1.TryAcquire(ctx, "slow:1s", time.Second); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("TryAcquire with a 1 s TTL after the nodes' slow round trips were seen: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLateTimerGraces: a batch's timeout timer that runs more than a quarter of the timeout
// late means the process was starved, not that the node was slow: the first such expiry
// puts the timeout off instead of reporting the calls timed out; a second one reports them.
func TestLateTimerGraces(t *testing.T) {
	c := &Client{cfg: defaultConfig()}
	q := &nodeQueue{cl: c}
	events := make(chanSink, 4)
	cl := &call{sink: events}
	cl.state.Store(callSent)
	b := &batch{calls: []*call{cl}, timeout: 100 * time.Millisecond}
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
	if ev := <-events; ev.out != timedOut || !errors.Is(ev.err, errNodeTimeout) {
		t.Fatalf("event %+v, want a timeout", ev)
	}
	// A timer on time reports at once.
	cl2 := &call{sink: events}
	cl2.state.Store(callSent)
	b2 := &batch{calls: []*call{cl2}, timeout: 100 * time.Millisecond, timer: time.AfterFunc(time.Hour, func() {})}
	defer b2.timer.Stop()
	b2.written = time.Now().Add(-110 * time.Millisecond)
	q.expire(b2)
	if len(events) != 1 {
		t.Fatalf("a timer on time: %d events, want the timeout at once", len(events))
	}
}
