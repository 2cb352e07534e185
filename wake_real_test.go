package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// numSub returns, per node, how many connections are subscribed to key's wake-up channel.
func numSub(tb testing.TB, admin []redis.UniversalClient, key string) []int64 {
	tb.Helper()
	return numSubChannel(tb, admin, wakeChannel(key))
}

// numSubTurn returns, per node, how many connections are subscribed to c's turn channel.
func numSubTurn(tb testing.TB, admin []redis.UniversalClient, c *Client) []int64 {
	tb.Helper()
	return numSubChannel(tb, admin, turnChannel(c.id))
}

func numSubChannel(tb testing.TB, admin []redis.UniversalClient, channel string) []int64 {
	tb.Helper()
	out := make([]int64, len(admin))
	for i, rc := range admin {
		m, err := rc.PubSubNumSub(context.Background(), channel).Result()
		if err != nil {
			out[i] = -1 // node down
			continue
		}
		out[i] = m[channel]
	}
	return out
}

// isWaiting reports whether an Acquire of c waits for key (it made its first attempt and
// joined the queue).
func isWaiting(c *Client, key string) bool {
	c.wait.mu.Lock()
	defer c.wait.mu.Unlock()
	return len(c.wait.m[key]) > 0
}

// handoff runs one round: holder holds key, waiter's Acquire is started and waits, holder
// releases once ready(), and handoff returns the time from the release to the waiter
// having the lock, with the waiter's lock.
func handoff(t *testing.T, holder, waiter *Client, key string, ready func() bool) (time.Duration, *Lock) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	held, err := holder.TryAcquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		l   *Lock
		err error
		at  time.Time
	}
	got := make(chan res, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 20*time.Second)
		got <- res{l, err, time.Now()}
	}()
	testutil.WaitFor(t, 10*time.Second, "the waiter to wait on the key", func() bool { return isWaiting(waiter, key) && ready() })
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if r.l.Token() <= held.Token() {
		t.Fatalf("token %d after %d", r.l.Token(), held.Token())
	}
	return r.at.Sub(released), r.l
}

// TestRealWakeAcrossClients: two Clients over the same 5 real nodes, each with go-redis
// clients of its own (two processes, as far as the nodes can tell). A holds the key; B's
// Acquire waits with a retry pause of at least 1.5 s (retry delay 3 s), queued on the nodes
// and subscribed to its turn channel; A releases, and B must have the lock within 1 s.
// Rounds 2 and 3 reuse B's lingering subscription, so only the turn message can wake B;
// round 4 runs with one node killed. The control subtest is the same round with wake-ups
// off, which must take the pause: it shows that the bound can fail.
func TestRealWakeAcrossClients(t *testing.T) {
	const bound = time.Second
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	t.Run("wake-ups", func(t *testing.T) {
		a := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(time.Second))
		b := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(time.Second), WithRetryDelay(3*time.Second))
		const key = "wake:across"
		subscribed := func() bool {
			for _, n := range numSubTurn(t, admin, b) {
				if n != 1 && n != -1 {
					return false
				}
			}
			return true
		}
		for round := 1; round <= 4; round++ {
			if round == 4 {
				if err := cluster.Nodes()[4].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			d, l := handoff(t, a, b, key, subscribed)
			t.Logf("round %d: B had the lock %v after A's release", round, d)
			if d >= bound {
				t.Fatalf("round %d: B acquired %v after the release, want < %v (its retry pause is at least 1.5 s)", round, d, bound)
			}
			if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		// A never waited, so it never subscribed: only B's connection is on B's turn channel,
		// and a queued waiter needs no subscription to the key's own channel.
		if n := numSubTurn(t, admin, b); !slices.Equal(n[:4], []int64{1, 1, 1, 1}) {
			t.Fatalf("subscribers of B's turn channel per node %v, want B's alone", n)
		}
		if n := numSubTurn(t, admin, a); !slices.Equal(n[:4], []int64{0, 0, 0, 0}) {
			t.Fatalf("subscribers of A's turn channel per node %v, want none", n)
		}
		if n := numSub(t, admin, key); !slices.Equal(n[:4], []int64{0, 0, 0, 0}) {
			t.Fatalf("subscribers of the key's channel per node %v, want none", n)
		}
		if err := cluster.Nodes()[4].Restart(ctxT(t, 20*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("control-without-wake-ups", func(t *testing.T) {
		a := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(time.Second), WithoutWakeups())
		b := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(time.Second), WithRetryDelay(3*time.Second), WithoutWakeups())
		const key = "wake:control"
		// A subscriber of our own on node 0 hears whatever A's release would announce.
		ps := admin[0].Subscribe(ctxT(t, 10*time.Second), wakeChannel(key))
		defer ps.Close()
		if _, err := ps.Receive(ctxT(t, 10*time.Second)); err != nil { // the confirmation
			t.Fatal(err)
		}
		d, l := handoff(t, a, b, key, func() bool { return true })
		t.Logf("without wake-ups B had the lock %v after A's release", d)
		if d < bound {
			t.Fatalf("B acquired %v after the release without wake-ups, want ≥ %v: the bound above proves nothing", d, bound)
		}
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if n := numSub(t, admin, key); !slices.Equal(n, []int64{1, 0, 0, 0, 0}) {
			t.Fatalf("subscribers per node %v without wake-ups, want only the test's own on node 0", n)
		}
		// Messages arrive in order on the connection: a PONG with no message before it means
		// that neither release published (both were applied on node 0 before the PING).
		settle(a)
		settle(b)
		if err := ps.Ping(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.Receive(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*redis.Pong); !ok {
			t.Fatalf("without wake-ups a release announced itself: %#v", msg)
		}
	})
}

// TestRealWakeWithoutChannelPermission: the node user may run PUBLISH, SUBSCRIBE and
// UNSUBSCRIBE but has no channel at all (resetchannels). A release still counts as
// confirmed (the PUBLISH inside release.lua is refused and dropped, which the ACL log shows),
// the key is gone from every node, and a waiter of another Client, whose SUBSCRIBE is
// refused too, still acquires by polling.
func TestRealWakeWithoutChannelPermission(t *testing.T) {
	const pw = "wakeSecret"
	acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "resetchannels", "-@all"}, strings.Fields(aclCommands)...)
	acl = append(acl, "+publish", "+subscribe", "+unsubscribe")
	cluster := redisproc.StartT(t, 5, redisproc.Config{ExtraArgs: acl})
	admin := cluster.ClientsT(t)
	userClients := func() []redis.UniversalClient { return aclUserClients(t, cluster.Addrs(), pw) }
	ctx := ctxT(t, 30*time.Second)
	a := newTestClient(t, userClients(), WithNodeTimeout(time.Second))
	b := newTestClient(t, userClients(), WithNodeTimeout(time.Second), WithRetryDelay(100*time.Millisecond))
	const key = "wake:noperm"
	held, err := a.TryAcquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, key, 20*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the second client to wait on the key", func() bool { return isWaiting(b, key) })
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release by a user that may not publish: %v, want nil", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter did not acquire by polling: %v", err)
	}
	settle(a)
	settle(b) // the waiter's release reaches the nodes beyond its quorum in the background
	for i, rc := range admin {
		if n, err := rc.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("node %d: key still there (exists %d, err %v)", i, n, err)
		}
		// The PUBLISH was tried and refused for its channel, not skipped.
		entries, err := rc.ACLLog(ctx, 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		refused := slices.ContainsFunc(entries, func(e *redis.ACLLogEntry) bool {
			return e.Reason == "channel" && e.Object == wakeChannel(key) && e.Username == "lock"
		})
		if !refused {
			t.Fatalf("node %d: no refused channel access to %q in the ACL log: %+v", i, wakeChannel(key), entries)
		}
	}
}

// TestRealWakeSubscriptionsComeAndGo: a Client's turn channel is subscribed while it has
// queued waiters (single keys), and the keys of a multi-key lock's waiter get their own
// channels, on every node, each dropped a linger time after the last waiter left; Close with
// live subscriptions ends every goroutine of the client and every subscription.
func TestRealWakeSubscriptionsComeAndGo(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 60*time.Second)
	holder := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(time.Second))
	channels := func() []string {
		var all []string
		for _, rc := range admin {
			chs, err := rc.PubSubChannels(ctx, WakeChannelPrefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, chs...)
		}
		slices.Sort(all)
		return all
	}

	ignore := goleak.IgnoreCurrent()
	waiterClients := cluster.ClientsT(t)
	c := newTestClient(t, waiterClients, WithNodeTimeout(time.Second), WithRetryDelay(time.Minute))
	c.wake.linger, c.wake.turnLinger = 50*time.Millisecond, 50*time.Millisecond
	keys := []string{"wake:k1", "wake:k2", "wake:k3"}
	nodes := len(cluster.Nodes())
	for round := range 3 {
		var locks []*Lock
		for _, k := range keys {
			l, err := holder.TryAcquire(ctx, k, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			locks = append(locks, l)
		}
		done := make(chan error, 2*len(keys)+1)
		for _, k := range keys {
			for range 2 { // two queued waiters per key: one turn channel for all, per node
				go func() {
					l, err := c.Acquire(ctx, k, 20*time.Second)
					if err == nil {
						err = l.Release(ctx)
					}
					done <- err
				}()
			}
		}
		multi := keys[:2] // a multi-key lock waits on each key's own channel
		go func() {
			l, err := c.AcquireMulti(ctx, multi, 20*time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		ones := []int64{1, 1, 1, 1, 1}
		testutil.WaitFor(t, 10*time.Second, "two waiters on each key, the turn channel and the multi-key lock's channels subscribed once on every node", func() bool {
			for _, k := range keys {
				c.wait.mu.Lock()
				n := len(c.wait.m[k])
				c.wait.mu.Unlock()
				if n != 2 {
					return false
				}
			}
			return slices.Equal(numSubTurn(t, admin, c), ones) && slices.Equal(numSub(t, admin, multi[0]), ones) &&
				slices.Equal(numSub(t, admin, multi[1]), ones) && len(channels()) == 3*nodes
		})
		for _, l := range locks {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 2*len(keys) + 1 {
			if err := <-done; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		testutil.WaitFor(t, 10*time.Second, "no wake-up channel left subscribed", func() bool { return len(channels()) == 0 })
		c.wake.mu.Lock()
		left := len(c.wake.subs)
		c.wake.mu.Unlock()
		if left != 0 {
			t.Fatalf("round %d: %d keys still registered after every waiter left", round, left)
		}
	}

	// Close with waiters on two keys and their subscriptions live.
	for _, k := range keys[:2] {
		if _, err := holder.TryAcquire(ctx, k, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 2)
	for _, k := range keys[:2] {
		go func() {
			_, err := c.Acquire(ctx, k, 20*time.Second)
			done <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "the turn channel subscribed on every node", func() bool {
		return len(channels()) == nodes && slices.Equal(numSubTurn(t, admin, c), []int64{1, 1, 1, 1, 1})
	})
	c.Close()
	for range 2 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter after Close: %v, want ErrClosed", err)
		}
	}
	for _, rc := range waiterClients {
		rc.Close()
	}
	testutil.WaitFor(t, 10*time.Second, "no wake-up channel left subscribed", func() bool { return len(channels()) == 0 })
	holder.Close() // its senders, started after the snapshot, wait for work until Close
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// TestRealWakeKeepsRetrySpacing: with wake-ups on, a waiter whose key is held by another
// Client (nobody releases) still spaces its attempts by the retry pause: a new subscription
// gives at most one early catch-up attempt, not one per node, and it is not counted as a
// wake-up. Before, each of the 5 nodes' subscriptions kicked the head, and WithRetryLimit(3)
// gave up within milliseconds.
func TestRealWakeKeepsRetrySpacing(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	holder := newTestClient(t, cluster.ClientsT(t))
	var wakeups int
	obs := &countingObserver{onEvent: func(e Event) {
		if e.Kind == EventWakeUp {
			wakeups++
		}
	}}
	const delay = 200 * time.Millisecond
	waiter := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(delay), WithRetryLimit(3), WithObserver(obs))
	ctx := ctxT(t, 30*time.Second)
	if _, err := holder.TryAcquire(ctx, "spacing", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := waiter.Acquire(ctx, "spacing", 20*time.Second)
	took := time.Since(start)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Acquire of a held key: %v", err)
	}
	// Three attempts: the first, at most one catch-up, and one after a pause of at least
	// delay/2 (pauses are drawn from [delay/2, 3·delay/2)).
	if took < delay/2 {
		t.Fatalf("3 attempts took %v: no retry pause between them (retry delay %v)", took, delay)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if wakeups != 0 {
		t.Fatalf("%d wake-ups counted without any release", wakeups)
	}
}

// countingObserver hands events to a function, under a mutex.
type countingObserver struct {
	BaseObserver
	mu      sync.Mutex
	onEvent func(Event)
}

func (o *countingObserver) Event(_ context.Context, e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.onEvent(e)
}

// countingHandler is a slog.Handler that counts the records whose message contains match.
type countingHandler struct {
	match string
	mu    sync.Mutex
	n     int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// connectionsReceived is a node's total_connections_received (INFO stats).
func connectionsReceived(tb testing.TB, rc redis.UniversalClient) int {
	tb.Helper()
	info, err := rc.Info(context.Background(), "stats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	tb.Fatal("no total_connections_received in INFO stats")
	return 0
}

// TestRealWakeWrongPasswordBacksOff: a waiter's client has a wrong password for node 0 (the
// lock still works on the other four). While it waits, its subscription to node 0 fails at
// every dial (AUTH refused); it must back off, not dial again at once: over 1.5 s node 0 sees
// a handful of connections, not thousands, and the failure is logged once, not per dial.
// Before, an error reply counted as "the connection is fine" and the read was retried at
// once: about 2 300 connections a second.
func TestRealWakeWrongPasswordBacksOff(t *testing.T) {
	const pw = "rightSecret"
	cluster := redisproc.StartT(t, 5, redisproc.Config{ExtraArgs: []string{"--user", "lock", "on", ">" + pw, "~*", "&*", "+@all"}})
	admin := cluster.ClientsT(t)
	clients := func(wrong bool) []redis.UniversalClient {
		var cs []redis.UniversalClient
		for i, a := range cluster.Addrs() {
			p := pw
			if wrong && i == 0 {
				p = "wrongSecret"
			}
			rc := redis.NewClient(&redis.Options{Addr: a, Username: "lock", Password: p, MaxRetries: -1})
			t.Cleanup(func() { rc.Close() })
			cs = append(cs, rc)
		}
		return cs
	}
	ctx := ctxT(t, 30*time.Second)
	holder := newTestClient(t, clients(false))
	const key = "wake:wrongpass"
	held, err := holder.TryAcquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	logs := &countingHandler{match: "wake-up subscri"}
	waiter := newTestClient(t, clients(true), WithRetryDelay(time.Minute), WithLogger(slog.New(logs)))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(wctx, key, 20*time.Second)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the waiter to wait on the key", func() bool { return isWaiting(waiter, key) })
	before := connectionsReceived(t, admin[0])
	time.Sleep(1500 * time.Millisecond) // the window in which the dials are counted
	dials := connectionsReceived(t, admin[0]) - before
	cancel()
	<-done
	t.Logf("node 0 received %d connections in 1.5 s; %d log lines about the subscription", dials, logs.count())
	if dials > 30 {
		t.Fatalf("node 0 received %d connections in 1.5 s while its AUTH fails: a reconnect storm", dials)
	}
	if n := logs.count(); n != 1 {
		// One failure, seen by both the subscriber and the reader, is one record.
		t.Fatalf("%d log lines about the failing subscription, want one: it failed once and never came back", n)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealWakeConnectionsClosedWhenIdle: the subscription connections go once no waiter has
// needed them for the linger time (a minute by default, 100 ms here), and come back for the
// next waiter, which is still woken by the release.
func TestRealWakeConnectionsClosedWhenIdle(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	admin := cluster.ClientsT(t)
	ctx := ctxT(t, 30*time.Second)
	holder := newTestClient(t, cluster.ClientsT(t))
	waiter := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	waiter.wake.mu.Lock()
	waiter.wake.linger, waiter.wake.turnLinger, waiter.wake.pubsubLinger = 50*time.Millisecond, 50*time.Millisecond, 100*time.Millisecond
	waiter.wake.mu.Unlock()
	pubsubClients := func() int {
		n := 0
		for _, rc := range admin {
			list, err := rc.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(list) {
				if strings.Contains(line, "cmd=subscribe") || strings.Contains(line, "cmd=unsubscribe") || !strings.Contains(line, " sub=0 ") {
					n++
				}
			}
		}
		return n
	}
	for round := range 2 {
		d, l := handoff(t, holder, waiter, "wake:idle", func() bool { return slices.Equal(numSubTurn(t, admin, waiter), []int64{1, 1, 1, 1, 1}) })
		if d >= time.Second {
			t.Fatalf("round %d: the waiter had the lock %v after the release: not woken", round, d)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "the subscription connections to close", func() bool {
			waiter.wake.mu.Lock()
			gone := waiter.wake.gen == nil
			waiter.wake.mu.Unlock()
			return gone && pubsubClients() == 0
		})
	}
}
