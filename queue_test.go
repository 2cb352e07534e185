package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// queueScript drives the queue's scripts (acquire.lua queued, release.lua, leave.lua) on one
// node by hand, as the Clients A, B, C, D would.
type queueScript struct {
	t     *testing.T
	ctx   context.Context
	rc    redis.UniversalClient
	key   string
	set   lockKeys
	q     queueKeys
	grace int64 // ms
	live  int64 // ms
	// notices are the runner-up notices that turns has read past, oldest first.
	notices []string
	ps      *redis.PubSub // turns' subscription
}

func newQueueScript(t *testing.T, rc redis.UniversalClient, key string) *queueScript {
	set, err := newLockKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	return &queueScript{t: t, ctx: ctxT(t, 30*time.Second), rc: rc, key: key, set: set, q: newQueueKeys(key), grace: 60000, live: 60000}
}

// acquire runs a queued acquire of member with ticket and holder id: the token, or 0 and the
// refusal's remaining milliseconds and rank.
func (s *queueScript) acquire(member, id string, ticket int64) (token, left int64, rank int) {
	s.t.Helper()
	qa := &queueArgs{keys: s.q, member: member, ticket: ticket, live: s.live, grace: s.grace}
	v, err := newAcquireCommand(s.set, acquireArgs{id: id, px: 10000, seed: 5, idleMillis: 60000, fenced: true,
		layout: SlotCounters, queue: qa}).run(s.ctx, s.rc)
	if err != nil {
		s.t.Fatal(err)
	}
	if v > 0 {
		return v, 0, 0
	}
	return 0, -v >> 16, int(-v & 0xffff)
}

// release runs the release of id by member, with the ticket of member's next waiter (0 for
// none); turn says whether the head is told.
func (s *queueScript) release(member, id string, ticket int64, turn bool) int64 {
	s.t.Helper()
	v, err := newReleaseCommand(s.set, id, releaseArgs{announce: true, turn: turn, member: member, ticket: ticket, live: s.live}).run(s.ctx, s.rc)
	if err != nil {
		s.t.Fatal(err)
	}
	return v
}

// members returns the queue's members in order.
func (s *queueScript) members() []string {
	s.t.Helper()
	m, err := s.rc.ZRange(s.ctx, s.q.queue, 0, -1).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

func (s *queueScript) wantMembers(what string, want ...string) {
	s.t.Helper()
	got := s.members()
	if len(got) != len(want) {
		s.t.Fatalf("%s: queue %q, want %q", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			s.t.Fatalf("%s: queue %q, want %q", what, got, want)
		}
	}
}

// turns subscribes to the turn channels of members and returns a function that waits for the
// next turn message, or fails after a while. The runner-up notices that come before it
// (runnerUpMark, lua/queue.lua's qtell) are kept in s.notices, each as the channel's member
// and the payload after the mark.
func (s *queueScript) turns(members ...string) func() *redis.Message {
	s.t.Helper()
	chans := make([]string, len(members))
	for i, m := range members {
		chans[i] = turnChannel(m)
	}
	ps := s.rc.Subscribe(s.ctx, chans...)
	s.ps = ps
	s.t.Cleanup(func() { ps.Close() })
	for range chans {
		if _, err := ps.Receive(s.ctx); err != nil { // the confirmations
			s.t.Fatal(err)
		}
	}
	return func() *redis.Message {
		s.t.Helper()
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		for {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				s.t.Fatalf("no turn message: %v", err)
			}
			if p, ok := strings.CutPrefix(msg.Payload, runnerUpMark); ok {
				s.notices = append(s.notices, strings.TrimPrefix(msg.Channel, turnChannelPrefix)+" "+p)
				continue
			}
			return msg
		}
	}
}

// nextNotice reads the next message of the channels of turns and wants it to be the runner-up
// notice of member, with payload after the mark.
func (s *queueScript) nextNotice(member, payload string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	msg, err := s.ps.ReceiveMessage(ctx)
	if err != nil {
		s.t.Fatalf("no runner-up notice: %v", err)
	}
	if msg.Channel != turnChannel(member) || msg.Payload != runnerUpMark+payload {
		s.t.Fatalf("message %q on %q, want the runner-up notice %q on %s's channel", msg.Payload, msg.Channel,
			runnerUpMark+payload, member)
	}
}

// wantNotices checks the runner-up notices received since the last call ("member payload").
func (s *queueScript) wantNotices(what string, want ...string) {
	s.t.Helper()
	if fmt.Sprint(s.notices) != fmt.Sprint(want) {
		s.t.Fatalf("%s: runner-up notices %q, want %q", what, s.notices, want)
	}
	s.notices = nil
}

// scriptID names the n-th holder id of Client c in the queue's cases: 32 characters, as holder
// ids are.
func scriptID(c string, n int) string { return fmt.Sprintf("%s%031d", c, n) }

// queueCases runs the queue's rules on one node; the timing cases need real time on the
// node (TIME), which miniredis has too.
func queueCases(t *testing.T, rc redis.UniversalClient) {
	rc.FlushAll(context.Background())
	s := newQueueScript(t, rc, "queue:k")
	next := s.turns("B", "C", "D")
	id := scriptID

	// One Client handing the key to its own next waiter, with nobody else queued: the
	// release says the waiter may go (2), and no queue is made on the node for it.
	if tok, _, _ := s.acquire("Z", id("Z", 1), 50); tok <= 0 {
		t.Fatal("uncontended queued acquire refused")
	}
	if v := s.release("Z", id("Z", 1), 60, true); v != 2 {
		t.Fatalf("release with a waiter of our own and nobody queued: %d, want 2", v)
	}
	if n := rc.Exists(s.ctx, s.q.queue, s.q.waiters).Val(); n != 0 {
		t.Fatalf("a handoff inside one Client made %d queue keys", n)
	}
	// A free key with nobody queued: the queue is not even created.
	if tok, _, _ := s.acquire("A", id("A", 1), 100); tok <= 0 {
		t.Fatalf("uncontended queued acquire refused")
	}
	if n := rc.Exists(s.ctx, s.q.queue, s.q.waiters).Val(); n != 0 {
		t.Fatalf("an uncontended acquire left %d queue keys", n)
	}
	// A resend of A's acquire still finds its own key.
	if tok, _, _ := s.acquire("A", id("A", 1), 100); tok <= 0 {
		t.Fatalf("resend of the holder's acquire refused")
	}
	// B and C wait: queued by ticket, each told its rank and the time left.
	if tok, left, rank := s.acquire("B", id("B", 1), 200); tok != 0 || left < 9000 || left > 10000 || rank != 0 {
		t.Fatalf("B: token %d, left %d, rank %d; want refused, about 10000 ms left, rank 0", tok, left, rank)
	}
	if _, _, rank := s.acquire("C", id("C", 1), 300); rank != 1 {
		t.Fatalf("C: rank %d, want 1", rank)
	}
	s.wantMembers("B and C queued", "B", "C")
	// A refresh of B's place keeps its ticket's order.
	if _, _, rank := s.acquire("B", id("B", 2), 200); rank != 0 {
		t.Fatalf("B again: rank %d, want 0", rank)
	}
	// A's release names B, the head.
	if v := s.release("A", id("A", 1), 0, true); v != 1 {
		t.Fatalf("release: %d, want 1", v)
	}
	if m := next(); m.Channel != turnChannel("B") || m.Payload != id("A", 1)+s.key {
		t.Fatalf("turn message %q on %q, want A's holder id and the key on B's channel", m.Payload, m.Channel)
	}
	// The key is free, but it is B's turn: C is refused with nothing left, rank 1; a
	// TryAcquire (no queue) is not held back.
	if tok, left, rank := s.acquire("C", id("C", 2), 300); tok != 0 || left != 0 || rank != 1 {
		t.Fatalf("C on a free key in B's turn: token %d, left %d, rank %d", tok, left, rank)
	}
	if tok, _ := newAcquireCommand(s.set, acquireArgs{id: id("T", 1), px: 10000, seed: 5, idleMillis: 60000,
		layout: SlotCounters}).run(s.ctx, rc); tok <= 0 {
		t.Fatal("a TryAcquire was held back by the queue")
	}
	if v := s.release("T", id("T", 1), 0, true); v != 1 {
		t.Fatalf("release by the TryAcquire holder: %d", v)
	}
	if m := next(); m.Channel != turnChannel("B") {
		t.Fatalf("turn message on %q, want B's channel", m.Channel)
	}
	// B's turn: it takes the key and leaves the queue.
	if tok, _, _ := s.acquire("B", id("B", 3), 200); tok <= 0 {
		t.Fatal("B refused in its turn")
	}
	s.wantMembers("B took the key", "C")
	if rc.HExists(s.ctx, s.q.waiters, "B").Val() || rc.HExists(s.ctx, s.q.waiters, "").Val() {
		t.Fatal("B's liveness or the free stamp left in the waiters hash")
	}
	// B releases with another waiter of its own (ticket 250, ahead of C's 300): that waiter
	// is first, the reply says so, and nobody is told.
	if v := s.release("B", id("B", 3), 250, true); v != 2 {
		t.Fatalf("release with our own waiter first: %d, want 2", v)
	}
	s.wantMembers("B's next waiter queued", "B", "C")

	// Grace: B does not come. Within the grace C is refused; once it has passed, B loses its
	// turn and C, now the head, takes the key.
	if tok, _, rank := s.acquire("C", id("C", 3), 300); tok != 0 || rank != 1 {
		t.Fatalf("C within the grace: token %d, rank %d", tok, rank)
	}
	s.grace = 1
	time.Sleep(5 * time.Millisecond)
	if tok, _, _ := s.acquire("C", id("C", 4), 300); tok <= 0 {
		t.Fatal("C refused after the head's grace ran out")
	}
	s.wantMembers("B lost its turn, C took the key")
	// The head lost its turn to a later waiter's attempt: that waiter is told.
	s.grace = 60000
	s.acquire("B", id("B", 4), 200)
	s.acquire("D", id("D", 1), 400)
	s.wantMembers("B and D queued", "B", "D")
	if v := s.release("C", id("C", 4), 0, true); v != 1 {
		t.Fatalf("release by C: %d", v)
	}
	if m := next(); m.Channel != turnChannel("B") {
		t.Fatalf("turn message on %q, want B's channel", m.Channel)
	}

	s.grace = 1
	time.Sleep(5 * time.Millisecond)
	s.acquire("E", id("E", 1), 500) // not the head: B is dropped, D is now the head and told
	if m := next(); m.Channel != turnChannel("D") || m.Payload != id("E", 1)+s.key {
		t.Fatalf("turn message %q on %q after B lost its turn, want D's", m.Payload, m.Channel)
	}
	s.wantMembers("B dropped", "D", "E")

	// D's turn: it takes the key.
	s.grace = 60000
	if tok, _, _ := s.acquire("D", id("D", 2), 400); tok <= 0 {
		t.Fatal("D refused in its turn")
	}
	// Liveness: a place that is not refreshed in time is dropped when it reaches the head.
	s.live = 1
	s.acquire("E", id("E", 2), 500) // E's place now lasts 1 ms
	s.live = 60000
	time.Sleep(5 * time.Millisecond)
	if v := s.release("D", id("D", 2), 0, true); v != 1 {
		t.Fatalf("release by D: %d", v)
	}
	s.wantMembers("E's place expired at the head")
	if tok, _, _ := s.acquire("F", id("F", 1), 600); tok <= 0 {
		t.Fatal("F refused on a free key whose only waiter's place had expired")
	}

	// An undo puts the place back with the same ticket and tells the head.
	s.acquire("D", id("D", 3), 400)
	if v, err := newReleaseCommand(s.set, id("F", 1), releaseArgs{turn: true, member: "F", ticket: 600, live: s.live}).run(s.ctx, rc); err != nil || v != 1 {
		t.Fatalf("undo: %d, %v", v, err)
	}
	s.wantMembers("F's place back after its undo", "D", "F")
	if m := next(); m.Channel != turnChannel("D") {
		t.Fatalf("turn message on %q after the undo, want D's", m.Channel)
	}

	// leave.lua: the head gives up on a free key; the next waiter is told.
	if v, err := newLeaveCommand(s.key, s.q, "D", id("L", 1)).run(s.ctx, rc); err != nil || v != 1 {
		t.Fatalf("leave: %d, %v", v, err)
	}
	s.wantMembers("D left", "F")
	// F is not subscribed here; C is, so queue C behind F and let F leave.
	s.acquire("C", id("C", 5), 700)
	if v, err := newLeaveCommand(s.key, s.q, "F", id("L", 2)).run(s.ctx, rc); err != nil || v != 1 {
		t.Fatalf("leave: %d, %v", v, err)
	}
	if m := next(); m.Channel != turnChannel("C") || m.Payload != id("L", 2)+s.key {
		t.Fatalf("turn message %q on %q after the head left, want C's", m.Payload, m.Channel)
	}
	// The last one leaves: nothing of the queue is left on the node.
	if _, err := newLeaveCommand(s.key, s.q, "C", id("L", 3)).run(s.ctx, rc); err != nil {
		t.Fatal(err)
	}
	if n := rc.Exists(s.ctx, s.q.queue, s.q.waiters).Val(); n != 0 {
		t.Fatalf("an empty queue left %d keys", n)
	}
	// The queue keys expire with the places: nothing outlives its waiters.
	s.acquire("T", id("T", 2), 10) // the key is free, nobody queued: taken
	s.acquire("B", id("B", 5), 200)
	if ttl := rc.PTTL(s.ctx, s.q.queue).Val(); ttl <= 0 || ttl > time.Duration(s.live)*time.Millisecond {
		t.Fatalf("queue TTL %v, want at most the liveness %d ms", ttl, s.live)
	}
	s.wantNotices("runner-up notices with every head listening")
}

// queueElsewhereCases: a release on a node where the releasing Client's key is not (its
// acquire was refused there while it won elsewhere, or the key went) still brings the
// Client's place there in line with the other nodes' (qelsewhere in lua/queue.lua): gone,
// or moved to the ticket of the Client's next waiter, and when that place was the head of a
// free key, the next waiter is told its turn with the release's holder id. An undo (the
// place's own ticket), a Client without a place, or a key that someone holds tells nobody.
// The reply is 0 (the key was not ours here), or 3 when the Client, still queued, is the
// head of the free key: its own next waiter's turn, which nobody else is told (an undo's or
// a release's that landed where the acquire never did).
func queueElsewhereCases(t *testing.T, rc redis.UniversalClient) {
	rc.FlushAll(context.Background())
	s := newQueueScript(t, rc, "queue:elsewhere")
	next := s.turns("B", "C")
	id := scriptID
	release := func(what, member, holder string, ticket int64, announce bool, want int64) {
		t.Helper()
		ra := releaseArgs{announce: announce, turn: true, member: member, ticket: ticket, live: s.live}
		if v, err := newReleaseCommand(s.set, holder, ra).run(s.ctx, rc); err != nil || v != want {
			t.Fatalf("%s: %d, %v; want %d (not our key here)", what, v, err, want)
		}
	}
	// A holds the key elsewhere; here its acquire was refused behind the holder before it, so
	// A is queued here ahead of B and C, and the key here is free now.
	s.acquire("H", id("H", 1), 10)
	s.acquire("A", id("A", 1), 100)
	s.acquire("B", id("B", 1), 200)
	s.acquire("C", id("C", 1), 300)
	s.release("H", id("H", 1), 0, false)
	s.wantMembers("A, B and C queued behind H", "A", "B", "C")

	// A's release with no other waiter: its place goes, and B, the head now, is told.
	release("A's release", "A", id("A", 1), 0, true, 0)
	s.wantMembers("A's place gone", "B", "C")
	if m := next(); m.Channel != turnChannel("B") || m.Payload != id("A", 1)+s.key {
		t.Fatalf("turn message %q on %q, want A's holder id and the key on B's channel", m.Payload, m.Channel)
	}
	if rc.HExists(s.ctx, s.q.waiters, "A").Val() {
		t.Fatal("A's liveness left in the waiters hash")
	}
	// An undo here (the place's own ticket) and a release by a Client with no place change
	// nothing and tell nobody: the next message is the one after them. B is the head of the
	// free key, so B's undo says so (3); a release of B's whose next waiter keeps B ahead of C
	// moves B's place and says so too.
	release("B's undo", "B", id("B", 2), 200, false, 3)
	release("D's release", "D", id("D", 1), 0, true, 0)
	release("E's release with another waiter", "E", id("E", 1), 500, true, 0)
	s.wantMembers("after an undo and releases without a place", "B", "C")
	release("B's release with a waiter still ahead of C", "B", id("B", 5), 250, true, 3)
	s.wantMembers("B's place moved, still ahead of C", "B", "C")
	if score := rc.ZScore(s.ctx, s.q.queue, "B").Val(); score != 250 {
		t.Fatalf("B's ticket here %v, want its next waiter's, 250", score)
	}
	// B releases with another waiter of its own behind C: its place moves there, and C, the
	// head now, is told.
	release("B's release with another waiter", "B", id("B", 3), 400, true, 0)
	s.wantMembers("B's place moved behind C", "C", "B")
	if m := next(); m.Channel != turnChannel("C") || m.Payload != id("B", 3)+s.key {
		t.Fatalf("turn message %q on %q, want B's holder id on C's channel (nothing for the undo)", m.Payload, m.Channel)
	}

	// With the key held by another holder, C's place goes but nobody is told: that holder's
	// release will tell B.
	if tok, _ := newAcquireCommand(s.set, acquireArgs{id: id("T", 1), px: 10000, seed: 5, idleMillis: 60000,
		layout: SlotCounters}).run(s.ctx, rc); tok <= 0 {
		t.Fatal("TryAcquire of a free key refused")
	}
	release("C's release while T holds", "C", id("C", 2), 0, true, 0)
	s.wantMembers("C's place gone", "B")
	if v := s.release("T", id("T", 1), 0, true); v != 1 {
		t.Fatalf("T's release: %d, want 1", v)
	}
	if m := next(); m.Channel != turnChannel("B") || m.Payload != id("T", 1)+s.key {
		t.Fatalf("turn message %q on %q, want T's release on B's channel (nothing for C's)", m.Payload, m.Channel)
	}
	// The last place goes with the queue.
	release("B's release", "B", id("B", 4), 0, true, 0)
	if n := rc.Exists(s.ctx, s.q.queue, s.q.waiters).Val(); n != 0 {
		t.Fatalf("the last place gone, %d queue keys left", n)
	}
	s.wantNotices("runner-up notices with every head listening")
}

// queueRunnerUpCases: a turn told to a head that nobody hears (no connection listens on its
// channel: its Client died) is followed by a runner-up notice to the next waiter that hears
// it, passing over the others that nobody hears either; a head that hears its turn costs
// no notice (queueCases checks that none came there). Then the runner-up's attempt after the
// grace passes the dead head over and takes the key; a release tells a dead head's successor
// the same way from a leave.
func queueRunnerUpCases(t *testing.T, rc redis.UniversalClient) {
	rc.FlushAll(context.Background())
	s := newQueueScript(t, rc, "queue:runner-up")
	next := s.turns("B", "C")
	id := scriptID
	s.acquire("H", id("H", 1), 10)
	// X, Y, V and W: Clients that died, nobody listens on their channels; four in a row, as
	// when one host's processes go at once.
	dead := []string{"X", "Y", "V", "W"}
	for i, d := range dead {
		s.acquire(d, id(d, 1), int64(100+10*i))
	}
	s.acquire("C", id("C", 1), 200)
	s.acquire("B", id("B", 1), 300)
	s.wantMembers("queued behind H", "X", "Y", "V", "W", "C", "B")
	if v := s.release("H", id("H", 1), 0, true); v != 1 {
		t.Fatalf("H's release: %d, want 1", v)
	}
	s.nextNotice("C", id("H", 1)+s.key) // not Y, V or W (nobody hears them), not B (C heard it)
	// Within the grace C is refused; after it, X is passed over and Y, the head now, is told,
	// which nobody hears: C is told again. So each dead waiter costs one grace, and C's
	// attempt after the last one takes the key.
	if tok, _, rank := s.acquire("C", id("C", 2), 200); tok != 0 || rank != 4 {
		t.Fatalf("C within the grace: token %d, rank %d; want refused, rank 4", tok, rank)
	}
	s.grace = 1
	for i := range dead[:len(dead)-1] {
		time.Sleep(5 * time.Millisecond)
		if tok, _, rank := s.acquire("C", id("C", 3+i), 200); tok != 0 || rank != len(dead)-1-i {
			t.Fatalf("C after %d graces: token %d, rank %d; want refused, rank %d", i+1, tok, rank, len(dead)-1-i)
		}
		s.wantMembers(dead[i]+" passed over", append(append([]string{}, dead[i+1:]...), "C", "B")...)
		s.nextNotice("C", id("C", 3+i)+s.key)
	}
	time.Sleep(5 * time.Millisecond)
	if tok, _, _ := s.acquire("C", id("C", 9), 200); tok <= 0 {
		t.Fatal("C refused once the grace had passed every dead waiter over")
	}
	s.wantMembers("C took the key", "B")
	// A live head hears its turn: no notice for the waiter behind it.
	s.grace = 60000
	s.acquire("Z", id("Z", 1), 400)
	if v := s.release("C", id("C", 9), 0, true); v != 1 {
		t.Fatalf("C's release: %d, want 1", v)
	}
	if m := next(); m.Channel != turnChannel("B") || m.Payload != id("C", 9)+s.key {
		t.Fatalf("turn message %q on %q, want C's release on B's channel", m.Payload, m.Channel)
	}
	// leave.lua tells the next head the same way: B gives up as the head of the free key, Z
	// (dead) is told, nobody hears it, and C behind it is told it is the runner-up.
	s.acquire("C", id("C", 10), 500)
	s.wantMembers("B told, Z and C behind it", "B", "Z", "C")
	if v, err := newLeaveCommand(s.key, s.q, "B", id("L", 1)).run(s.ctx, rc); err != nil || v != 1 {
		t.Fatalf("leave: %d, %v", v, err)
	}
	s.wantMembers("B left", "Z", "C")
	s.nextNotice("C", id("L", 1)+s.key)
	s.wantNotices("runner-up notices read past")
}

func TestQueueScripts(t *testing.T) {
	srv := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	queueCases(t, rc)
	queueElsewhereCases(t, rc)
	queueRunnerUpCases(t, rc)
}

func TestQueueNames(t *testing.T) {
	for _, key := range []string{"a", "{t}x", "a}b", "{x}"} {
		q := newQueueKeys(key)
		if keySlot(q.queue) != keySlot(key) || keySlot(q.waiters) != keySlot(key) {
			t.Fatalf("%q: queue %q or waiters %q not in the key's slot", key, q.queue, q.waiters)
		}
		if q.queue == q.waiters {
			t.Fatalf("%q: one name for both", key)
		}
	}
	for _, p := range []string{QueuePrefix, WaitersPrefix} {
		if _, err := newLockKeys(p + "x"); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("lock key with the reserved prefix %q: %v", p, err)
		}
	}
	// The turn channel is a wake-up channel (one ACL pattern) that no key's channel can be.
	ch := turnChannel("0123")
	if key, ok := cutPrefix(ch, WakeChannelPrefix); !ok || key[:len(QueuePrefix)] != QueuePrefix {
		t.Fatalf("turn channel %q", ch)
	}
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) < len(p) || s[:len(p)] != p {
		return s, false
	}
	return s[len(p):], true
}

func TestQueuePause(t *testing.T) {
	d := 50 * time.Millisecond
	for _, c := range []struct {
		ahead int
		want  time.Duration
	}{{-1, d}, {0, d}, {1, d}, {2, 2 * d}, {10, 10 * d}, {100, time.Second}} {
		if got := queuePause(d, c.ahead); got != c.want {
			t.Fatalf("queuePause(%v, %d) = %v, want %v", d, c.ahead, got, c.want)
		}
	}
	// The longest jittered pause leaves room for two refreshes within a place's liveness.
	for _, d := range []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute} {
		if long := 3 * queuePollMax(d) / 2; 2*long > queueLive(d) {
			t.Fatalf("retry delay %v: longest pause %v, liveness %v", d, long, queueLive(d))
		}
		if g := queueGrace(d); g < time.Millisecond || g > d {
			t.Fatalf("retry delay %v: grace %v", d, g)
		}
	}
}

// TestQueuedPauseOnFreeKey: a queued waiter refused from a free key (no milliseconds left on
// any refusing node, waiters ahead) tries again by runnerUpWait at the latest, whatever its
// place, so that a head that heard its turn and never came is passed over by the grace
// (design.md §3.10, rule 4); refused from a held key it keeps its place's pause.
func TestQueuedPauseOnFreeKey(t *testing.T) {
	_, clients := miniNodes(t, 5)
	const d = 100 * time.Millisecond
	c := newTestClient(t, clients, WithRetryDelay(d))
	for _, tc := range []struct {
		name     string
		r        attemptResult
		min, max time.Duration
	}{
		{"free, 10 ahead", attemptResult{kind: attemptContended, ahead: 10, left: 0}, 0, runnerUpWait(d)},
		{"free, runner-up", attemptResult{kind: attemptContended, ahead: 1, left: 0}, d / 2, runnerUpWait(d)},
		{"held, 10 ahead", attemptResult{kind: attemptContended, ahead: 10, left: 5000}, queuePause(d, 10) / 2, 3 * queuePause(d, 10) / 2},
		{"held, runner-up", attemptResult{kind: attemptContended, ahead: 1, left: 20}, d / 2, 3 * d / 2},
		{"not queued", attemptResult{kind: attemptContended}, d / 2, 3 * d / 2},
	} {
		for range 50 {
			tr := &turn{c: c}
			if p := tr.pause(tc.r); p < tc.min || p > tc.max {
				t.Fatalf("%s: pause %v, want %v to %v", tc.name, p, tc.min, tc.max)
			}
		}
	}
	if runnerUpWait(d) <= queueGrace(d) || runnerUpWait(d) >= d {
		t.Fatalf("runnerUpWait %v: want it after the grace (%v) and under a retry delay", runnerUpWait(d), queueGrace(d))
	}
}
