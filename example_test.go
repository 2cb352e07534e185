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
