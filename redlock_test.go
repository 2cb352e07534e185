package redlock

// The tests of redlock.go: New's checks of its arguments and a closed Client.

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const testKey = "settlement:2026-11-29"

var testFence = slotCounter(testKey) // the default layout's counter of testKey

func TestNewRejectsBadInput(t *testing.T) {
	_, clients := miniNodes(t, 3)
	rc := clients[0].(*redis.Client)
	sameAddr := redis.NewClient(&redis.Options{Addr: rc.Options().Addr, DB: 1})
	defer sameAddr.Close()
	var typedNil *redis.Client
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []Option
	}{
		{"no nodes", nil, nil},
		{"nil node", []redis.UniversalClient{clients[0], nil, clients[2]}, nil},
		{"typed nil node", []redis.UniversalClient{clients[0], typedNil, clients[2]}, nil},
		{"same client twice", []redis.UniversalClient{clients[0], clients[1], clients[0]}, nil},
		{"same address twice", []redis.UniversalClient{clients[0], clients[1], sameAddr}, nil},
		{"nil option", clients, []Option{nil}},
		{"negative drift", clients, []Option{WithDriftFactor(-0.1)}},
		{"drift too large", clients, []Option{WithDriftFactor(0.5)}},
		{"NaN drift", clients, []Option{WithDriftFactor(nanFloat())}},
		{"zero node timeout", clients, []Option{WithNodeTimeout(0)}},
		{"negative retry limit", clients, []Option{WithRetryLimit(-1)}},
		{"unknown counter layout", clients, []Option{WithCounterLayout(CounterLayout(7))}},
		{"zero retry delay", clients, []Option{WithRetryDelay(0)}},
		{"negative amnesia tolerance", clients, []Option{WithAmnesiaTolerance(-1)}},
		{"amnesia tolerance beyond the nodes", clients, []Option{WithAmnesiaTolerance(3)}},
		{"counter TTL too short", clients, []Option{WithCounterIdleTTL(time.Millisecond)}},
		{"counter TTL not whole ms", clients, []Option{WithCounterIdleTTL(time.Hour + time.Microsecond)}},
		{"negative lock delay", clients, []Option{WithLockDelay(-time.Millisecond)}},
		{"lock delay not whole ms", clients, []Option{WithLockDelay(time.Second + time.Microsecond)}},
		{"lock delay of MaxTTL", clients, []Option{WithLockDelay(MaxTTL)}},
		{"nil clock", clients, []Option{WithClock(nil)}},
		{"nil logger", clients, []Option{WithLogger(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.nodes, tc.opts...)
			if !errors.Is(err, ErrInvalidArgument) || c != nil {
				t.Fatalf("New = %v, %v; want nil, ErrInvalidArgument", c, err)
			}
		})
	}
	c, err := New(clients, WithAmnesiaTolerance(1), WithCounterIdleTTL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Quorum() != 3 || c.Nodes() != 3 {
		t.Fatalf("quorum %d of %d, want 3 of 3", c.Quorum(), c.Nodes())
	}
}

// TestNewWarnsOfEvenNodes: New accepts an even number of nodes and, without amnesia
// tolerance, logs one warning saying so; an odd number logs nothing, and neither does an
// even number with amnesia tolerance 1 (4 nodes then tolerate one failed node, 3 none).
func TestNewWarnsOfEvenNodes(t *testing.T) {
	for n := 1; n <= 6; n++ {
		for _, f := range []int{0, 1} {
			if f >= n {
				continue
			}
			t.Run(fmt.Sprintf("n=%d,f=%d", n, f), func(t *testing.T) {
				_, clients := miniNodes(t, n)
				logs := &countingHandler{match: "even number of nodes"}
				c := newTestClient(t, clients, WithLogger(slog.New(logs)), WithAmnesiaTolerance(f))
				want := 0
				if n%2 == 0 && f == 0 {
					want = 1
				}
				if got := logs.count(); got != want {
					t.Fatalf("%d nodes (quorum %d): %d warnings, want %d", n, c.Quorum(), got, want)
				}
			})
		}
	}
}

func TestClosedClient(t *testing.T) {
	_, clients := miniNodes(t, 3)
	c := newTestClient(t, clients)
	l, err := c.TryAcquire(ctxT(t, 5*time.Second), testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	if _, err := c.TryAcquire(ctxT(t, time.Second), testKey, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	// Close released the lock it still held.
	if err := l.Release(ctxT(t, time.Second)); !errors.Is(err, ErrReleased) {
		t.Fatalf("release after close: %v, want ErrReleased", err)
	}
}
