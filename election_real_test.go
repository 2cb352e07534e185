package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

// TestRealElectionFailover: on 5 real nodes, a candidate waiting behind a leader is elected
// within 50 ms of the leader's Resign (the release wakes it), and, when a leader dies (its
// renewals stop and it never releases: a killed process, as the nodes see it), within TTL +
// one retry delay of its last renewal.
func TestRealElectionFailover(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	ctx := ctxT(t, 60*time.Second)
	const ttl, retry = time.Second, 50 * time.Millisecond
	a := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(retry))
	b := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(retry))
	ea, eb := a.Election("real:elect"), b.Election("real:elect")

	campaign := func() chan *Leadership {
		ch := make(chan *Leadership, 1)
		go func() {
			ld, err := eb.Campaign(ctx, "host-b", ttl)
			if err != nil {
				t.Error(err)
			}
			ch <- ld
		}()
		return ch
	}
	admin := cluster.ClientsT(t)
	waitQueued := func() { // b's Acquire has made its attempt and waits in the key's queue
		testutil.WaitFor(t, 10*time.Second, "the candidate queued on a quorum", func() bool {
			return queuedOnQuorum(ctx, admin, ea.Key(), b.id)
		})
	}

	// 1. Resign.
	la, err := ea.Campaign(ctx, "host-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	elected := campaign()
	waitQueued()
	start := time.Now()
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-elected
	if lb == nil {
		return
	}
	afterResign := time.Since(start)
	if afterResign > 50*time.Millisecond {
		t.Errorf("elected %v after the Resign, want within 50 ms", afterResign)
	}
	if lb.Term() <= la.Term() {
		t.Errorf("term %d after %d", lb.Term(), la.Term())
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// 2. The leader dies: its renewals stop, nothing is released.
	la, err = ea.Campaign(ctx, "host-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	elected = campaign()
	waitQueued()
	died := time.Now()
	la.stop(context.Canceled) // what a SIGKILL leaves: the key on the nodes until its TTL
	lb = <-elected
	if lb == nil {
		return
	}
	afterDeath := time.Since(died)
	// The key was set (or last renewed) before died, so it expires by died + ttl; the
	// waiter's next attempt comes within a retry pause (at most 1.5 × the retry delay,
	// jittered) after that, plus its round trip.
	if limit := ttl + 3*retry/2 + 100*time.Millisecond; afterDeath > limit {
		t.Errorf("elected %v after the leader died, want within TTL + one retry delay (%v)", afterDeath, limit)
	}
	if lb.Term() <= la.Term() {
		t.Errorf("term %d after %d", lb.Term(), la.Term())
	}
	info, err := ea.Leader(ctx)
	if err != nil || info.ID != lb.ID() || info.Value != "host-b" {
		t.Errorf("Leader after the failover: %+v, %v", info, err)
	}
	t.Logf("elected %v after Resign, %v after the leader died (TTL %v, retry delay %v)", afterResign, afterDeath, ttl, retry)
	_ = lb.Resign(ctx)
}

// TestRealObserveHearsChanges: Observe reads again when a quorum of nodes announces a change
// of the election (a new leader's first value, a Proclaim, a Resign), so an observer whose
// retry delay is a minute (its reads when nothing is announced: twenty minutes apart) still
// reports each within seconds; and a leadership that lapses unannounced (the leader's
// renewals stop, nothing is released) is reported by those reads, for an observer with the
// default retry delay within observePoll of the key's expiry.
func TestRealObserveHearsChanges(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	ctx := ctxT(t, 60*time.Second)
	slow := newTestClient(t, cluster.ClientsT(t), WithRetryDelay(time.Minute))
	leader := newTestClient(t, cluster.ClientsT(t))
	el := leader.Election("observed")
	obs := slow.Election("observed").Observe(ctx)
	next := func(what string, within time.Duration) LeaderInfo {
		t.Helper()
		select {
		case info, open := <-obs:
			if !open {
				t.Fatalf("Observe closed before %s", what)
			}
			return info
		case <-time.After(within):
			t.Fatalf("Observe did not report %s within %v", what, within)
		}
		return LeaderInfo{}
	}
	if info := next("the empty election", 10*time.Second); info != (LeaderInfo{}) {
		t.Fatalf("first report %+v, want no leader", info)
	}
	ld, err := el.Campaign(ctx, "v1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if info := next("the new leader", 10*time.Second); info.Value != "v1" || info.Term != ld.Term() || info.ID != ld.ID() {
		t.Fatalf("report %+v, want v1 with term %v", info, ld.Term())
	}
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if info := next("the proclaimed value", 10*time.Second); info.Value != "v2" || info.Term != ld.Term() {
		t.Fatalf("report %+v, want v2 with term %v", info, ld.Term())
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if info := next("the resignation", 10*time.Second); info != (LeaderInfo{}) {
		t.Fatalf("report %+v after Resign, want no leader", info)
	}

	// A lapse nobody announces, seen by the default observer's reads.
	const ttl = time.Second
	fast := newTestClient(t, cluster.ClientsT(t))
	obs = fast.Election("observed").Observe(ctx)
	if info := next("the empty election", 10*time.Second); info != (LeaderInfo{}) {
		t.Fatalf("first report %+v, want no leader", info)
	}
	ld, err = el.Campaign(ctx, "v3", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if info := next("the new leader", 10*time.Second); info.Value != "v3" {
		t.Fatalf("report %+v, want v3", info)
	}
	died := time.Now()
	ld.stop(context.Canceled) // what a SIGKILL leaves: the key on the nodes until its TTL
	limit := ttl + observePoll(DefaultRetryDelay) + 2*time.Second
	if info := next("the lapsed leadership", limit); info != (LeaderInfo{}) {
		t.Fatalf("report %+v after the leader died, want no leader", info)
	}
	took := time.Since(died)
	t.Logf("the lapse was reported %v after the leader died (TTL %v, reads every %v)", took, ttl, observePoll(DefaultRetryDelay))
	if took < ttl {
		t.Fatalf("no leader reported %v after the leader died, before its key could expire (%v)", took, ttl)
	}
}

// TestRealObserveWithoutSubscribe: an observer whose node user may not SUBSCRIBE (an ACL
// without it) hears nothing announced, so it reads every retry delay, not every
// observePoll: a new leader and a new value are reported within a few retry delays.
func TestRealObserveWithoutSubscribe(t *testing.T) {
	const pw = "o1Secret"
	acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "&*", "-@all"}, strings.Fields(aclCommands)...)
	cluster := redisproc.StartT(t, 3, redisproc.Config{ExtraArgs: acl})
	ctx := ctxT(t, 30*time.Second)
	const retry = 200 * time.Millisecond
	observer := newTestClient(t, aclUserClients(t, cluster.Addrs(), pw), WithRetryDelay(retry))
	leader := newTestClient(t, cluster.ClientsT(t))
	if _, err := observer.Election("deaf").Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader as the ACL user: %v", err)
	}
	obs := observer.Election("deaf").Observe(ctx)
	within := observePoll(retry) / 2
	next := func(what string) LeaderInfo {
		t.Helper()
		select {
		case info := <-obs:
			return info
		case <-time.After(within):
			t.Fatalf("Observe did not report %s within %v (retry delay %v, observePoll %v)", what, within, retry, observePoll(retry))
		}
		return LeaderInfo{}
	}
	if info := next("the empty election"); info != (LeaderInfo{}) {
		t.Fatalf("first report %+v", info)
	}
	ld, err := leader.Election("deaf").Campaign(ctx, "v1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	if info := next("the new leader"); info.Value != "v1" {
		t.Fatalf("report %+v, want v1", info)
	}
	if observer.wake.listening(observer.Election("deaf").Key()) {
		t.Fatalf("the hub says a quorum listens, though the user may not SUBSCRIBE")
	}
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if info := next("the new value"); info.Value != "v2" {
		t.Fatalf("report %+v, want v2", info)
	}
}

// TestRealObserveReportsUnknown: when fewer than a quorum of nodes answer, Observe reports
// LeaderInfo{Unknown: true} once, rather than leaving its last report standing; once they
// answer again it reports what it reads, even the leader it reported before.
func TestRealObserveReportsUnknown(t *testing.T) {
	cluster := redisproc.StartT(t, 3, redisproc.Config{})
	ctx := ctxT(t, 60*time.Second)
	observer := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(200*time.Millisecond))
	leader := newTestClient(t, cluster.ClientsT(t))
	ld, err := leader.Election("dim").Campaign(ctx, "v1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	obs := observer.Election("dim").Observe(ctx)
	next := func(what string) LeaderInfo {
		t.Helper()
		select {
		case info := <-obs:
			return info
		case <-time.After(15 * time.Second):
			t.Fatalf("Observe did not report %s", what)
		}
		return LeaderInfo{}
	}
	if info := next("the leader"); info.Value != "v1" || info.Unknown {
		t.Fatalf("first report %+v", info)
	}
	nodes := cluster.Nodes()
	for _, n := range nodes[1:] {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	if info := next("the unknown leader"); info != (LeaderInfo{Unknown: true}) {
		t.Fatalf("report %+v with 2 of 3 nodes paused, want Unknown", info)
	}
	for _, n := range nodes[1:] {
		if err := n.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if info := next("the leader again"); info.Unknown || info.Value != "v1" || info.Term != ld.Term() {
		t.Fatalf("report %+v after the nodes came back, want v1 again", info)
	}
	select {
	case info := <-obs:
		t.Fatalf("a second report %+v with nothing changed", info)
	case <-time.After(3 * time.Second):
	}
}
