package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

// The property tests drive a small world of miniredis nodes, each with its own clock
// (FastForward on one node is an exact clock jump there), through random interleavings of
// acquire, release, extend, expiry and node state loss. After every successful acquire they
// check the two claims of docs/design.md:
//
//	uniqueness: no two acquisitions of a key ever get the same token;
//	order: if no node held A's key any more when B's acquire began, B's token is above A's.
//
// Every operation is made to finish (settle) before the next one starts, so the world moves
// one step at a time and a failing case replays exactly from its seed.

// simConfig says which faults a world has and how its tokens are seeded.
type simConfig struct {
	nodes       int
	amnesia     int  // WithAmnesiaTolerance
	lossNodes   int  // nodes 0..lossNodes-1 may lose all their state (FLUSHALL); -1: any node
	frozenClock bool // every counter seed is the same value, as if counters restarted from a constant
}

type simLock struct {
	lock  *Lock
	token Token
}

type simWorld struct {
	cfg     simConfig
	servers []*miniredis.Miniredis
	nodes   []*redis.Client
	client  *Client
	clock   *stepClock
	locks   []simLock
	tokens  map[Token]int // token → index in locks
}

const simKey = "sim:key"

// newSimWorld starts the nodes; the caller must call close. (rapid.T is not a testing.TB,
// so the world cleans up after itself.)
func newSimWorld(fatal func(...any), cfg simConfig) *simWorld {
	w := &simWorld{cfg: cfg, tokens: map[Token]int{},
		clock: &stepClock{now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}}
	clients := make([]redis.UniversalClient, cfg.nodes)
	for i := range cfg.nodes {
		s, err := miniredis.Run()
		if err != nil {
			w.close()
			fatal(err)
		}
		w.servers = append(w.servers, s)
		w.nodes = append(w.nodes, redis.NewClient(&redis.Options{Addr: s.Addr()}))
		clients[i] = w.nodes[i]
	}
	c, err := New(clients, WithNodeTimeout(5*time.Second), WithClock(w.clock),
		WithAmnesiaTolerance(cfg.amnesia), WithCounterIdleTTL(0))
	if err != nil {
		w.close()
		fatal(err)
	}
	w.client = c
	return w
}

func (w *simWorld) close() {
	if w.client != nil {
		w.client.Close()
	}
	for _, n := range w.nodes {
		n.Close()
	}
	for _, s := range w.servers {
		s.Close()
	}
}

// tick moves the client's clock (unless frozen). Real acquisitions are at least about a
// microsecond apart; the simulation spaces its steps by at least a millisecond.
func (w *simWorld) tick(d time.Duration) {
	if !w.cfg.frozenClock {
		w.clock.now = w.clock.now.Add(d)
	}
}

// heldSomewhere reports which earlier locks still have their key on at least one node.
func (w *simWorld) heldSomewhere() map[string]bool {
	held := map[string]bool{}
	for _, s := range w.servers {
		if v, err := s.Get(simKey); err == nil {
			held[v] = true
		}
	}
	return held
}

// acquire tries once and returns a violation of the claims, or "".
func (w *simWorld) acquire(ttl time.Duration) string {
	before := w.heldSomewhere()
	l, err := w.client.TryAcquire(context.Background(), simKey, ttl)
	settle(w.client)
	if err != nil {
		return ""
	}
	if j, dup := w.tokens[l.Token()]; dup {
		return fmt.Sprintf("uniqueness: acquisition %d got token %d, already given to acquisition %d", len(w.locks), l.Token(), j)
	}
	for j, a := range w.locks {
		if !before[a.lock.id] && l.Token() <= a.token {
			return fmt.Sprintf("order: acquisition %d got token %d after acquisition %d (token %d) had left every node",
				len(w.locks), l.Token(), j, a.token)
		}
	}
	w.tokens[l.Token()] = len(w.locks)
	w.locks = append(w.locks, simLock{lock: l, token: l.Token()})
	return ""
}

func (w *simWorld) release(i int) {
	_ = w.locks[i].lock.Release(context.Background())
	settle(w.client)
}

func (w *simWorld) extend(i int, ttl time.Duration) {
	_ = w.locks[i].lock.Extend(context.Background(), ttl)
	settle(w.client)
}

// expire moves one node's clock forward: keys there expire early, as after a clock jump.
func (w *simWorld) expire(node int, d time.Duration) { w.servers[node].FastForward(d) }

// lose wipes one node, as a restart without persistence does.
func (w *simWorld) lose(node int) { w.servers[node].FlushAll() }

func (w *simWorld) canLose(node int) bool {
	return w.cfg.lossNodes < 0 || node < w.cfg.lossNodes
}

var simConfigs = map[string]simConfig{
	// Classic Redlock with no state loss.
	"majority": {nodes: 5, lossNodes: 0},
	// Any node may lose its state; clock-seeded counters keep tokens unique and ordered.
	"majority+loss+clock-seed": {nodes: 5, lossNodes: -1},
	// Node 0 may lose its state and counters restart from one constant; Q = 4 tolerates it.
	"amnesia1+loss+frozen-seed": {nodes: 5, amnesia: 1, lossNodes: 1, frozenClock: true},
	// Three nodes, no state loss.
	"three-nodes": {nodes: 3, lossNodes: 0},
}

func TestPropertyTokensUniqueAndOrdered(t *testing.T) {
	for name, cfg := range simConfigs {
		t.Run(name, rapid.MakeCheck(func(rt *rapid.T) {
			w := newSimWorld(rt.Fatal, cfg)
			defer w.close()
			node := rapid.IntRange(0, cfg.nodes-1)
			ttl := rapid.SampledFrom([]time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second})
			check := func(v string) {
				if v != "" {
					rt.Fatal(v)
				}
			}
			rt.Repeat(map[string]func(*rapid.T){
				"acquire": func(rt *rapid.T) {
					w.tick(time.Millisecond)
					check(w.acquire(ttl.Draw(rt, "ttl")))
				},
				"release": func(rt *rapid.T) {
					if len(w.locks) == 0 {
						rt.Skip("no lock yet")
					}
					w.release(rapid.IntRange(0, len(w.locks)-1).Draw(rt, "lock"))
				},
				"extend": func(rt *rapid.T) {
					if len(w.locks) == 0 {
						rt.Skip("no lock yet")
					}
					w.extend(rapid.IntRange(0, len(w.locks)-1).Draw(rt, "lock"), ttl.Draw(rt, "ttl"))
				},
				"expire one node": func(rt *rapid.T) {
					w.expire(node.Draw(rt, "node"), ttl.Draw(rt, "by"))
				},
				"expire every node": func(rt *rapid.T) {
					d := ttl.Draw(rt, "by")
					for i := range cfg.nodes {
						w.expire(i, d)
					}
					w.tick(d)
				},
				"lose state": func(rt *rapid.T) {
					n := node.Draw(rt, "node")
					if !w.canLose(n) {
						rt.Skip("this node keeps its state")
					}
					w.lose(n)
				},
			})
		}))
	}
}

// TestPropertyCheckerFindsAmnesiaViolations is the control experiment: with state loss on
// any node, a majority quorum and counters that restart from one constant, the same checker
// must find duplicate or backward tokens, as docs/design.md predicts. A checker that cannot
// fail here would prove nothing above.
func TestPropertyCheckerFindsAmnesiaViolations(t *testing.T) {
	cfg := simConfig{nodes: 5, lossNodes: -1, frozenClock: true}
	found := ""
	for seed := uint64(1); seed <= 20 && found == ""; seed++ {
		r := rand.New(rand.NewPCG(seed, 42))
		w := newSimWorld(t.Fatal, cfg)
		for step := 0; step < 200 && found == ""; step++ {
			switch r.IntN(5) {
			case 0, 1:
				found = w.acquire(time.Second)
			case 2:
				if len(w.locks) > 0 {
					w.release(r.IntN(len(w.locks)))
				}
			case 3:
				w.expire(r.IntN(cfg.nodes), 2*time.Second)
			case 4:
				w.lose(r.IntN(cfg.nodes))
			}
		}
		w.close()
		if found != "" {
			t.Logf("seed %d: %s", seed, found)
		}
	}
	if found == "" {
		t.Fatal("no violation found with state loss, a majority quorum and constant counter seeds")
	}
}
