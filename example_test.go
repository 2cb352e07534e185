package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// exampleNodes starts three in-process Redis nodes so the examples run without a server.
func exampleNodes() ([]redis.UniversalClient, func()) {
	var clients []redis.UniversalClient
	var stops []func()
	for range 3 {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			panic(err)
		}
		rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
		clients = append(clients, rc)
		stops = append(stops, func() { rc.Close(); m.Close() })
	}
	return clients, func() {
		for _, stop := range stops {
			stop()
		}
	}
}

func Example() {
	nodes, stop := exampleNodes()
	defer stop()

	c, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	lock, err := c.Acquire(ctx, "settlement:2026-11-29", 10*time.Second)
	if err != nil {
		panic(err)
	}
	// Do the work before lock.Until(), and pass lock.Token() with every write so that the
	// store can reject writes from a holder whose lock has expired.
	fmt.Println("held:", time.Until(lock.Until()) > 9*time.Second, "token > 0:", lock.Token() > 0)

	if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
		panic(err)
	}
	fmt.Println("released")
	// Output:
	// held: true token > 0: true
	// released
}

func ExampleClient_TryAcquire() {
	nodes, stop := exampleNodes()
	defer stop()
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()

	first, _ := c.TryAcquire(ctx, "nightly-reconcile", time.Minute)
	_, err := c.TryAcquire(ctx, "nightly-reconcile", time.Minute)
	var qe *redlock.QuorumError
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired), errors.As(err, &qe))
	fmt.Printf("%d of %d nodes agreed, quorum %d\n", qe.Agreed, qe.Total, qe.Quorum)

	_ = first.Release(ctx)
	second, _ := c.TryAcquire(ctx, "nightly-reconcile", time.Minute)
	fmt.Println("next token is larger:", second.Token() > first.Token())
	_ = second.Release(ctx)
	// Output:
	// true true
	// 0 of 3 nodes agreed, quorum 2
	// next token is larger: true
}

func ExampleLock_Extend() {
	nodes, stop := exampleNodes()
	defer stop()
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()

	lock, _ := c.TryAcquire(ctx, "report", 5*time.Second)
	before := lock.Until()
	if err := lock.Extend(ctx, time.Minute); err != nil {
		// errors.Is(err, redlock.ErrNotHeld): stop working, the lock may be someone else's.
		panic(err)
	}
	fmt.Println("moved on:", lock.Until().Sub(before) > 50*time.Second)
	_ = lock.Release(ctx)
	// Output:
	// moved on: true
}

func ExampleWithAmnesiaTolerance() {
	nodes, stop := exampleNodes()
	defer stop()
	// With three nodes, tolerating one node that loses its state needs all three to agree
	// (2Q − N ≥ f + 1); with five nodes it needs four.
	c, _ := redlock.New(nodes, redlock.WithAmnesiaTolerance(1))
	defer c.Close()
	fmt.Println("quorum:", c.Quorum(), "of", c.Nodes())
	// Output:
	// quorum: 3 of 3
}

// bank stands for a payment provider that deduplicates requests on an idempotency key but
// knows nothing of fencing tokens.
type bank struct {
	paid map[string]int64 // idempotency key -> amount paid under it
}

func (b *bank) pay(idemKey string, amount int64) {
	if _, dup := b.paid[idemKey]; !dup {
		b.paid[idemKey] = amount
	}
}

// The default layout mints tokens from one counter per hash slot, so a node's fencing state
// stays small however many distinct keys are locked; a key's tokens grow, with gaps. With
// KeyCounters each key has a counter of its own and its tokens are consecutive.
func ExampleWithCounterLayout() {
	nodes, stop := exampleNodes()
	defer stop()
	ctx := context.Background()
	for _, layout := range []redlock.CounterLayout{redlock.SlotCounters, redlock.KeyCounters} {
		c, err := redlock.New(nodes, redlock.WithCounterLayout(layout))
		if err != nil {
			panic(err)
		}
		var tokens []redlock.Token
		for range 3 {
			l, err := c.TryAcquire(ctx, "order:"+layout.String(), time.Minute)
			if err != nil {
				panic(err)
			}
			tokens = append(tokens, l.Token())
			if err := l.Release(ctx); err != nil {
				panic(err)
			}
		}
		c.Close()
		fmt.Printf("%s: increasing %v", layout, tokens[0] < tokens[1] && tokens[1] < tokens[2])
		if layout == redlock.KeyCounters {
			fmt.Printf(", consecutive %v", tokens[1] == tokens[0]+1 && tokens[2] == tokens[1]+1)
		}
		fmt.Println()
	}
	// Output:
	// slot: increasing true
	// key: increasing true, consecutive true
}

// The settlement's payout survives a takeover with one key for the bank. Before the call,
// the holder records the step's intent in the fenced store: first a fenced write that bars
// every older holder from the record, then a read of the key an earlier holder may have
// recorded, which it reuses, or else a fenced write of its own key. Holder A sends the
// payout and dies before marking it done; B takes over with a new token, and so a new key
// of its own, but finds A's key recorded and sends that: the bank pays once.
func ExampleLock_IdempotencyKey() {
	nodes, stop := exampleNodes()
	defer stop()
	m := miniredis.NewMiniRedis() // the store that keeps the settlement's records
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	store := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer store.Close()
	fence := redlock.NewRedisFence(store)
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()
	b := &bank{paid: map[string]int64{}}

	const intent = "settlement:S-1:payout" // the step's record: key, done
	payout := func(l *redlock.Lock, dieBeforeDone bool) (string, error) {
		tok := l.Token()
		// 1. Bar older holders: after this write the store refuses their tokens.
		if err := fence.HSet(ctx, intent, map[string]string{"holder": tok.String()}, tok); err != nil {
			return "", err // errors.Is(err, redlock.ErrStaleToken): a newer holder has the job
		}
		// 2. Reuse the key of an earlier holder's intent, if there is one.
		rec, err := store.HGetAll(ctx, intent).Result()
		if err != nil {
			return "", err
		}
		if rec["done"] == "1" {
			return rec["key"], nil
		}
		key := rec["key"]
		if key == "" {
			key = l.IdempotencyKey("payout")
			if err := fence.HSet(ctx, intent, map[string]string{"key": key}, tok); err != nil {
				return "", err
			}
		}
		// 3. The external call, with the recorded key.
		b.pay(key, 125_00)
		if dieBeforeDone {
			return key, nil
		}
		// 4. Mark the step done.
		return key, fence.HSet(ctx, intent, map[string]string{"done": "1"}, tok)
	}

	a, _ := c.TryAcquire(ctx, "settlement:S-1", time.Minute)
	sentA, _ := payout(a, true)
	_ = a.Release(ctx) // A's process dies here; in production its lock would lapse instead

	bl, _ := c.TryAcquire(ctx, "settlement:S-1", time.Minute)
	sentB, err := payout(bl, false)
	if err != nil {
		panic(err)
	}
	_ = bl.Release(ctx)

	fmt.Println("B's own key differs from A's:", bl.IdempotencyKey("payout") != a.IdempotencyKey("payout"))
	fmt.Println("B sent A's key:", sentB == sentA)
	fmt.Println("payouts:", len(b.paid))
	// Output:
	// B's own key differs from A's: true
	// B sent A's key: true
	// payouts: 1
}

// A transfer locks both accounts with one multi-key lock and fences both legs, each with its
// own account's token, in one write that is applied whole or not at all (IncrByAll). Two
// opposing transfers cannot deadlock: on each node one of them gets both keys and the other
// neither.
func ExampleClient_DoMulti() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	store := nodes[0] // the examples keep the balances on a lock node; use a store of your own
	fence := redlock.NewRedisFence(store)

	ctx := context.Background()
	transfer := func(from, to string, amount int64) error {
		return c.DoMulti(ctx, []string{"acct:" + from, "acct:" + to}, 10*time.Second,
			func(ctx context.Context, m *redlock.MultiLock) error {
				_, err := fence.IncrByAll(ctx,
					redlock.FencedIncr{Key: "{bank}:balance:" + from, Delta: -amount, Token: m.Token("acct:" + from)},
					redlock.FencedIncr{Key: "{bank}:balance:" + to, Delta: amount, Token: m.Token("acct:" + to)})
				return err
			})
	}
	if err := errors.Join(transfer("alice", "bob", 30), transfer("bob", "alice", 10)); err != nil {
		panic(err)
	}
	alice, _, err := fence.Get(ctx, "{bank}:balance:alice")
	if err != nil {
		panic(err)
	}
	bob, _, err := fence.Get(ctx, "{bank}:balance:bob")
	if err != nil {
		panic(err)
	}
	fmt.Println("alice:", alice, "bob:", bob)
	// Output:
	// alice: -20 bob: 20
}

// Inside Do, a call that acquires the same key with the function's context joins the hold
// instead of waiting for it until the TTL runs out.
func ExampleLock_Context() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	settle := func(ctx context.Context) error {
		l, err := c.Acquire(ctx, "settlement", 10*time.Second) // joins when ctx carries the hold
		if err != nil {
			return err
		}
		defer l.Release(context.WithoutCancel(ctx)) // ends only this nested hold
		fmt.Println("nested hold, token", l.Token() > 0)
		return nil
	}
	err = c.Do(context.Background(), "settlement", 10*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		return settle(ctx)
	})
	fmt.Println("done:", err)
	// Output:
	// nested hold, token true
	// done: <nil>
}

// A node of the quorum may itself be a Redis Cluster: pass one *redis.ClusterClient per
// cluster, beside plain clients. Each fence counter lives in its lock key's hash slot, so
// every key works on such a node; a multi-key lock needs its keys in one slot, which a
// shared hash tag gives. (Here an in-process server that answers CLUSTER SLOTS as a
// one-shard cluster stands in for a real cluster; the tests run real 3-shard ones.)
func ExampleNew_cluster() {
	nodes, stop := exampleNodes()
	defer stop()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	defer cluster.Close()
	nodes[0] = cluster // one ClusterClient is one node of the quorum

	c, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Acquire(ctx, "payout:7", 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("held payout:7, token > 0:", lock.Token() > 0)
	_ = lock.Release(ctx)

	both, err := c.TryAcquireMulti(ctx, []string{"{acct:9}:debit", "{acct:9}:credit"}, 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("held", both.Keys())
	_ = both.Release(ctx)

	_, err = c.TryAcquireMulti(ctx, []string{"acct:9:debit", "acct:9:credit"}, 10*time.Second)
	fmt.Println("keys in two slots:", errors.Is(err, redlock.ErrInvalidArgument))
	// Output:
	// held payout:7, token > 0: true
	// held [{acct:9}:debit {acct:9}:credit]
	// keys in two slots: true
}

// Do holds the lock while the function runs, renews it, and cancels the function's context
// before the lock could lapse when renewals fail; the function sends the token with every
// write.
func ExampleClient_Do() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	err = c.Do(context.Background(), "nightly-report", 10*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		// Work until done or until ctx ends (the lock could not be kept: context.Cause(ctx)
		// matches redlock.ErrLockLost), passing l.Token() to every write.
		fmt.Println("running with a token:", l.Token() > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// running with a token: true
	// done: <nil>
}

// A fenced write to a Redis store: the store keeps the highest token per key and refuses a
// write with a lower one, in one atomic script.
func ExampleRedisFence() {
	nodes, stop := exampleNodes()
	defer stop()
	store := nodes[0] // a separate Redis in production
	fence := redlock.NewRedisFence(store)
	ctx := context.Background()

	if err := fence.Set(ctx, "payout:S-1", "paid", 7); err != nil { // the holder of token 7
		panic(err)
	}
	err := fence.Set(ctx, "payout:S-1", "paid twice", 5) // a paused holder with an older token
	fmt.Println("stale write refused:", errors.Is(err, redlock.ErrStaleToken))
	v, tok, _ := fence.Get(ctx, "payout:S-1")
	fmt.Println(v, tok)
	// Output:
	// stale write refused: true
	// paid 7
}

// A semaphore of 2 permits: two holders at once, a third is refused until one releases.
// Each permit is a lock key of its own, so each holder's token fences what its permit
// guards; the tokens of one permit increase from holder to holder.
func ExampleSemaphore() {
	nodes, stop := exampleNodes()
	defer stop()
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()

	bank := c.Semaphore("bank-api", 2)
	a, _ := bank.TryAcquire(ctx, time.Minute)
	b, _ := bank.TryAcquire(ctx, time.Minute)
	fmt.Println("two permits:", a.Key() != b.Key())

	_, err := bank.TryAcquire(ctx, time.Minute)
	fmt.Println("third refused:", errors.Is(err, redlock.ErrNotAcquired))

	_ = a.Release(ctx)
	c2, _ := bank.TryAcquire(ctx, time.Minute)
	fmt.Println("same permit again:", c2.Key() == a.Key(), "token larger:", c2.Token() > a.Token())

	// Do holds a permit while the function runs, renewing it, as Client.Do does for a lock.
	_ = b.Release(ctx)
	err = bank.Do(ctx, 10*time.Second, func(ctx context.Context, p *redlock.Lock) error {
		fmt.Println("in Do on a permit:", p.Key() == bank.PermitKey(0) || p.Key() == bank.PermitKey(1))
		return nil
	})
	fmt.Println(err)
	_ = c2.Release(ctx)
	// Output:
	// two permits: true
	// third refused: true
	// same permit again: true token larger: true
	// in Do on a permit: true
	// <nil>
}

// A leader election: the leader's term is a fencing token, larger for every new leader, and
// observers read the leader's value and term from a quorum of nodes.
func ExampleElection_Campaign() {
	nodes, stop := exampleNodes()
	defer stop()
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()

	e := c.Election("settlement-scheduler")
	l, err := e.Campaign(ctx, "host-a", 10*time.Second)
	if err != nil {
		panic(err)
	}
	info, _ := e.Leader(ctx)
	fmt.Println("leader:", info.Value, "term is the token:", info.Term == l.Term())

	// Before each action that needs the leadership, call Done (or Err): it is closed before
	// the leadership can lapse, and after a pause past that point.
	select {
	case <-l.Done():
		fmt.Println("lost")
	default:
		_ = l.Proclaim(ctx, "host-a:v2")
	}
	info, _ = e.Leader(ctx)
	fmt.Println("leader:", info.Value)

	_ = l.Resign(ctx)
	_, err = e.Leader(ctx)
	fmt.Println("after Resign:", errors.Is(err, redlock.ErrNoLeader))
	// Output:
	// leader: host-a term is the token: true
	// leader: host-a:v2
	// after Resign: true
}

// A read/write lock: readers share it; a writer waits for them, keeps new readers out while it
// waits, and writes alone with a fencing token.
func ExampleRWLock() {
	nodes, stop := exampleNodes()
	defer stop()
	c, _ := redlock.New(nodes)
	defer c.Close()
	ctx := context.Background()

	rw := c.RWLock("ledger:snapshot")
	r1, _ := rw.TryAcquireRead(ctx, time.Minute)
	r2, err := rw.TryAcquireRead(ctx, time.Minute)
	fmt.Println("two readers:", err == nil, "reader token:", r1.Token())

	_, err = rw.TryAcquireWrite(ctx, time.Minute)
	fmt.Println("writer refused while readers hold:", errors.Is(err, redlock.ErrNotAcquired))

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	err = rw.DoWrite(ctx, 10*time.Second, func(ctx context.Context, w *redlock.Lock) error {
		fmt.Println("writing with a token:", w.Token() > 0)
		return nil
	})
	fmt.Println(err)
	// Output:
	// two readers: true reader token: 0
	// writer refused while readers hold: true
	// writing with a token: true
	// <nil>
}
