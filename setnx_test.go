package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWithoutFencing: a Client made WithoutFencing sets the key on every node with a plain
// SET NX PX, mints token 0, leaves fence counters alone (also those of fenced clients on
// the same key), and still excludes a second holder.
func TestWithoutFencing(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	plain := newTestClient(t, clients, WithoutFencing(), WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 10*time.Second)

	l, err := plain.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 0 {
		t.Fatalf("token %d without fencing, want 0", l.Token())
	}
	settle(plain)
	for i, s := range servers {
		if got, _ := s.Get(testKey); got != l.ID() {
			t.Fatalf("node %d holds %q, want our id", i, got)
		}
		if ttl := s.TTL(testKey); ttl <= 9*time.Second || ttl > 10*time.Second {
			t.Fatalf("node %d: TTL %v, want the lock's 10s", i, ttl)
		}
		if s.Exists(testFence) {
			t.Fatalf("node %d: a fence counter was created without fencing", i)
		}
	}

	// A second holder is refused, fenced or not, and the error says why per node.
	fenced := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	for name, c := range map[string]*Client{"plain": plain, "fenced": fenced} {
		_, err := c.TryAcquire(ctx, testKey, 10*time.Second)
		if !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("%s: second acquire: %v, want ErrNotAcquired", name, err)
		}
		var qe *QuorumError
		if !errors.As(err, &qe) || qe.Agreed != 0 || !strings.Contains(err.Error(), "key") {
			t.Fatalf("%s: second acquire: %v, want a QuorumError with 0 agreed", name, err)
		}
	}

	// A fenced store rejects token 0 before writing anything.
	fence := NewRedisFence(clients[0])
	if err := fence.Set(ctx, "store:x", "v", l.Token()); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("RedisFence.Set with token 0: %v, want ErrInvalidArgument", err)
	}
	if servers[0].Exists("store:x") {
		t.Fatal("RedisFence.Set with token 0 wrote")
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Also wait for the refused attempts' late replies and undos: a script that reaches a
	// node after the release there sets a key, which its undo then removes.
	settle(plain)
	settle(fenced)
	for i, s := range servers {
		if s.Exists(testKey) {
			t.Fatalf("node %d still has the key after release", i)
		}
	}

	// Mixed use of one key: the unfenced acquisition between two fenced ones leaves the
	// counters where the first fenced one put them, and the next fenced token is higher.
	f1, err := fenced.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	settle(fenced)
	// Compare with the counters as they are now rather than with f1's token: a late script
	// of the refused attempts above may have left one node's counter behind (a lagging
	// counter is allowed; docs/design.md §3.2).
	before := make([]string, len(servers))
	for i, s := range servers {
		before[i], _ = s.Get(testFence)
	}
	p2, err := plain.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(plain)
	for i, s := range servers {
		if got, _ := s.Get(testFence); got != before[i] {
			t.Fatalf("node %d: counter %q after an unfenced acquire, want %q untouched", i, got, before[i])
		}
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	f3, err := fenced.TryAcquire(ctx, testKey, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if f3.Token() <= f1.Token() {
		t.Fatalf("fenced token %d after %d, want higher", f3.Token(), f1.Token())
	}
	if err := f3.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWithoutFencingForeignHolder: TestForeignHolder without fencing. The acquire also
// never creates a fence counter, and when it succeeds every free node holds our id.
func TestWithoutFencingForeignHolder(t *testing.T) { foreignHolder(t, false, WithoutFencing()) }

// resendHook makes a go-redis client send every SET twice and return the second reply, as
// go-redis does when it retries a command whose reply was lost on the way back. firstSet
// records whether a first send set the key. With landed set, it receives the first send's
// error once that send is done; with gate set, the second reply is held until gate closes.
type resendHook struct {
	firstSet atomic.Bool
	landed   chan error
	gate     chan struct{}
	sent     chan struct{} // closed once the first SET has been applied, when not nil
}

func (*resendHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*resendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *resendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "set" {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if err == nil && cmd.(*redis.Cmd).Val() == "OK" {
			h.firstSet.Store(true)
		}
		if h.landed != nil {
			h.landed <- err
		}
		if h.sent != nil {
			close(h.sent)
		}
		if err != nil {
			return err
		}
		err = next(ctx, cmd)
		if h.gate != nil {
			<-h.gate
		}
		return err
	}
}

// holdSets holds every SET (alone or in a pipeline) until the channel until is closed.
type holdSets struct{ until <-chan struct{} }

func (*holdSets) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdSets) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			<-h.until
		}
		return next(ctx, cmd)
	}
}
func (h *holdSets) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "set" {
				<-h.until
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestWithoutFencingUndoesAResentSet: a plain SET NX that go-redis resent after losing the
// reply finds our own key and answers "present". When the acquire then fails, the undo must
// still remove that key, since it may be ours (it can only remove a key holding our id).
func TestWithoutFencingUndoesAResentSet(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	// Nodes 0 and 1 are held by someone else; node 2 resends every SET.
	for i := range 2 {
		servers[i].Set(testKey, "someone-else")
		servers[i].SetTTL(testKey, 5*time.Second)
	}
	hook := &resendHook{}
	clients[2].(*redis.Client).AddHook(hook)

	c := newTestClient(t, clients, WithoutFencing(), WithNodeTimeout(2*time.Second))
	_, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, 10*time.Second)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire: %v, want ErrNotAcquired (3 nodes answer \"present\")", err)
	}
	settle(c)
	if !hook.firstSet.Load() {
		t.Fatal("the first SET to node 2 did not set our key: the test did not set up a resend")
	}
	for i, s := range servers {
		got, _ := s.Get(testKey)
		if i < 2 && got != "someone-else" {
			t.Fatalf("node %d: foreign key became %q", i, got)
		}
		if i >= 2 && got != "" {
			t.Fatalf("node %d: our key %q left after the failed acquire", i, got)
		}
	}
}

// TestWithoutFencingUndoesALateResentSet: the same, when the resent SET's "present" arrives
// after the acquire was decided. The undo's wait for late replies must release it too.
func TestWithoutFencingUndoesALateResentSet(t *testing.T) {
	servers, clients := miniNodes(t, 5)
	for i := range 3 {
		servers[i].Set(testKey, "someone-else")
		servers[i].SetTTL(testKey, 5*time.Second)
	}
	hook := &resendHook{gate: make(chan struct{}), landed: make(chan error, 1), sent: make(chan struct{})}
	clients[4].(*redis.Client).AddHook(hook)
	// The refusals of nodes 0-2 come only after node 4's first SET is applied: otherwise the
	// attempt can fail while that SET is still queued, and the transport drops it unsent.
	for _, rc := range clients[:3] {
		rc.(*redis.Client).AddHook(&holdSets{until: hook.sent})
	}

	c := newTestClient(t, clients, WithoutFencing(), WithNodeTimeout(2*time.Second))
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(hook.gate) }) }) // before c.Close, on any path
	_, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, 10*time.Second)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire: %v, want ErrNotAcquired (3 foreign holders)", err)
	}
	if err := <-hook.landed; err != nil {
		t.Fatalf("first SET to node 4: %v", err)
	}
	if got, _ := servers[4].Get(testKey); got == "" {
		t.Fatal("node 4 has no key after the first SET: the test set up nothing")
	}
	open.Do(func() { close(hook.gate) }) // node 4's "present" reaches the undo only now
	settle(c)
	for i, s := range servers {
		got, _ := s.Get(testKey)
		if i < 3 && got != "someone-else" {
			t.Fatalf("node %d: foreign key became %q", i, got)
		}
		if i >= 3 && got != "" {
			t.Fatalf("node %d: our key %q left after the failed acquire", i, got)
		}
	}
}
