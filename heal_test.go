package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRealHealingRollingRestarts: a Do holds its lock for 8 TTLs on 5 real nodes while the
// nodes restart empty one at a time, the first once our key is on every node, each next one
// after the previous one came back and was healed. With healing the hold is never lost, every
// restarted node holds our key again (after one of the next renewals: the first one after the
// restart may be decided by a quorum without it on a loaded machine) with its counter at least
// our token, and a second client trying every 10 ms while we hold (not before the acquire nor
// after the release) never gets the key. Without healing the same run loses the hold (once a
// majority has restarted, or earlier when a renewal misses a slow node; and the rival may then
// get the key while the holder still counts on its last renewal).
func TestRealHealingRollingRestarts(t *testing.T) {
	t.Run("healing", func(t *testing.T) { rollingRestarts(t, true) })
	t.Run("without-healing", func(t *testing.T) { rollingRestarts(t, false) })
}

func rollingRestarts(t *testing.T, healing bool) {
	const ttl = 800 * time.Millisecond
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	opts := []Option{WithNodeTimeout(300 * time.Millisecond)}
	if !healing {
		opts = append(opts, WithoutHealing())
	}
	holder := newTestClient(t, clients, opts...)
	rival := newTestClient(t, cluster.ClientsT(t), WithNodeTimeout(300*time.Millisecond))
	ctx := ctxT(t, 2*time.Minute)
	const key = "heal:long"

	// renewals waits until Until has moved n times (each move is a confirmed renewal), or
	// fn's context ends.
	renewals := func(ctx context.Context, l *Lock, n int) error {
		for u := l.Until(); n > 0; n-- {
			for l.Until() == u {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(5 * time.Millisecond):
				}
			}
			u = l.Until()
		}
		return nil
	}
	// onEvery waits for renewals until every node holds our key: an acquire, or a renewal
	// decided before a slow node answered, may leave it on a bare quorum.
	onEvery := func(ctx context.Context, l *Lock) error {
		for tries := 0; ; tries++ {
			missing := -1
			for i := range clients {
				if clients[i].Get(ctx, key).Val() != l.ID() {
					missing = i
					break
				}
			}
			if missing < 0 {
				return nil
			}
			if tries == 5 {
				return fmt.Errorf("node %d still without our key after 5 renewals", missing)
			}
			if err := renewals(ctx, l, 1); err != nil {
				return err
			}
		}
	}
	// The rival tries every 10 ms while we hold the key, from the moment our key is on every
	// node until just before fn returns (and Do releases); it must never get the key. (Started
	// before Do, it could take the key first, and Do would then acquire while the rival's
	// release was still on its way, on a bare quorum that the first restart breaks: the case
	// design.md §5.9 says healing does not cover.)
	var rivalWon atomic.Int32
	rivalTries := func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if l, err := rival.TryAcquire(ctx, key, ttl); err == nil {
				rivalWon.Add(1)
				_ = l.Release(ctx)
			}
		}
	}
	restarted := 0
	err := holder.Do(ctx, key, ttl, func(ctx context.Context, l *Lock) error {
		if err := onEvery(ctx, l); err != nil {
			return err
		}
		stopRival := make(chan struct{})
		var rivalDone sync.WaitGroup
		rivalDone.Go(func() { rivalTries(stopRival) })
		defer func() { close(stopRival); rivalDone.Wait() }()
		end := time.Now().Add(8 * ttl)
		for i := 0; time.Now().Before(end); i = (i + 1) % 5 {
			if err := cluster.Nodes()[i].RestartEmpty(ctx); err != nil {
				return err
			}
			restarted++
			if err := renewals(ctx, l, 2); err != nil {
				return err
			}
			if !healing {
				continue
			}
			// A renewal after the restart healed node i (the next one is ordered after that
			// heal on node i): our key and counter are back. Usually the first; on a loaded
			// machine one may be decided without node i, so up to five are allowed.
			for tries := 0; clients[i].Get(ctx, key).Val() != l.ID(); tries++ {
				if tries == 5 {
					return fmt.Errorf("node %d not healed after 7 renewals: key is %q", i, clients[i].Get(ctx, key).Val())
				}
				if err := renewals(ctx, l, 1); err != nil {
					return err
				}
			}
			c, err := clients[i].Get(ctx, slotCounter(key)).Result()
			if n, _ := strconv.ParseUint(c, 10, 64); err != nil || Token(n) < l.Token() {
				return fmt.Errorf("node %d: counter %q (%v) below the token %d", i, c, err, l.Token())
			}
		}
		return nil
	})
	if healing {
		if err != nil {
			t.Fatalf("the hold was lost after %d restarts: %v (the rival got the key %d times)", restarted, err, rivalWon.Load())
		}
		if rivalWon.Load() != 0 {
			t.Fatalf("the rival got the key %d times", rivalWon.Load())
		}
		if restarted < 5 {
			t.Fatalf("only %d restarts in 8 TTLs", restarted)
		}
		return
	}
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("without healing, %d restarts and the hold was not lost: %v", restarted, err)
	}
	if restarted < 1 {
		t.Fatalf("without healing the hold was lost before any restart")
	}
	// Once a majority has restarted empty, the rival finds a free majority while the holder
	// may still count on its last renewal: the delayed-restart failure of docs/failure-modes.md.
	t.Logf("without healing: lost after %d restarts; the rival got the key %d times", restarted, rivalWon.Load())
}

// TestRealHealNeverTakesAnotherHoldersKey: a node where our key was replaced by another
// holder's is not healed; a node that lost it is, and its counter is lifted to our token.
func TestRealHealNeverTakesAnotherHoldersKey(t *testing.T) {
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	clients := cluster.ClientsT(t)
	c := newTestClient(t, clients)
	ctx := ctxT(t, time.Minute)
	const key = "heal:foreign"
	fence := slotCounter(key)
	l, err := c.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	clients[0].Set(ctx, key, "someone-else", time.Minute)
	clients[1].Del(ctx, key, fence)
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	settle(c)
	if got := clients[0].Get(ctx, key).Val(); got != "someone-else" {
		t.Fatalf("node 0: another holder's key became %q", got)
	}
	if got := clients[1].Get(ctx, key).Val(); got != l.ID() {
		t.Fatalf("node 1 not healed: %q", got)
	}
	// The counter was missing: it is seeded from the healer's clock, which is past the token
	// (minted from the clock a moment ago).
	if got, _ := clients[1].Get(ctx, fence).Uint64(); Token(got) <= l.Token() {
		t.Fatalf("node 1: counter %d, token %d", got, l.Token())
	}
	if ttl := clients[1].PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("node 1: healed key TTL %v", ttl)
	}
	// A release deletes the healed key too, and leaves the other holder's alone.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	settle(c)
	if n := clients[1].Exists(ctx, key).Val(); n != 0 {
		t.Fatal("healed key left after release")
	}
	if got := clients[0].Get(ctx, key).Val(); got != "someone-else" {
		t.Fatalf("release touched another holder's key: %q", got)
	}
	var _ redis.UniversalClient = clients[0]
}
