package redlock

import (
	"context"
	_ "embed"
	"errors"
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

// simConfig says which faults a world has, how its tokens are seeded, and which clients
// take part: one Client per entry of layouts (SlotCounters when empty), plus, with legacy, a
// client that runs the scripts of the version before counter layouts existed (per-key
// counters only, read and INCRed; testdata/legacy).
type simConfig struct {
	nodes       int
	amnesia     int  // WithAmnesiaTolerance
	lossNodes   int  // nodes 0..lossNodes-1 may lose all their state (FLUSHALL); -1: any node
	frozenClock bool // every counter seed is the same value, as if counters restarted from a constant
	layouts     []CounterLayout
	legacy      bool
	keys        int // how many keys (1 when 0); keys 0 and 1 share a hash slot, so its slot counter
}

type simLock struct {
	key    string
	lock   *Lock // nil for the legacy client's locks
	id     string
	token  Token
	client int
}

type simWorld struct {
	cfg     simConfig
	servers []*miniredis.Miniredis
	nodes   []*redis.Client
	clients []*Client
	clock   *stepClock
	locks   []simLock
	tokens  map[string]map[Token]int // key → token → index in locks
}

// The scripts of the version before counter layouts (commit 97135bc), for the legacy client.
var (
	//go:embed testdata/legacy/acquire.lua
	legacyAcquireSrc string
	//go:embed testdata/legacy/raise.lua
	legacyRaiseSrc string
)

// simKeys are the keys of the worlds: the first two share a hash tag, hence a slot counter.
var simKeys = []string{"{sim}:a", "{sim}:b", "sim:c"}

// newSimWorld starts the nodes; the caller must call close. (rapid.T is not a testing.TB,
// so the world cleans up after itself.)
func newSimWorld(fatal func(...any), cfg simConfig) *simWorld {
	w := &simWorld{cfg: cfg, tokens: map[string]map[Token]int{},
		clock: &stepClock{now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}}
	if cfg.keys == 0 {
		w.cfg.keys = 1
	}
	if len(cfg.layouts) == 0 && !cfg.legacy {
		w.cfg.layouts = []CounterLayout{SlotCounters}
	}
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
	for _, l := range w.cfg.layouts {
		c, err := New(clients, WithNodeTimeout(5*time.Second), WithClock(w.clock),
			WithAmnesiaTolerance(cfg.amnesia), WithCounterIdleTTL(0), WithCounterLayout(l))
		if err != nil {
			w.close()
			fatal(err)
		}
		w.clients = append(w.clients, c)
	}
	return w
}

func (w *simWorld) close() {
	for _, c := range w.clients {
		c.Close()
	}
	for _, n := range w.nodes {
		n.Close()
	}
	for _, s := range w.servers {
		s.Close()
	}
}

// participants is the number of clients that acquire: the Clients, and the legacy one last.
func (w *simWorld) participants() int {
	if w.cfg.legacy {
		return len(w.clients) + 1
	}
	return len(w.clients)
}

// tick moves the client's clock (unless frozen). Real acquisitions are at least about a
// microsecond apart; the simulation spaces its steps by at least a millisecond.
func (w *simWorld) tick(d time.Duration) {
	if !w.cfg.frozenClock {
		w.clock.now = w.clock.now.Add(d)
	}
}

// heldSomewhere reports which earlier locks of key still have their key on at least one node.
func (w *simWorld) heldSomewhere(key string) map[string]bool {
	held := map[string]bool{}
	for _, s := range w.servers {
		if v, err := s.Get(key); err == nil {
			held[v] = true
		}
	}
	return held
}

// acquire tries once with client c on key k and returns a violation of the claims, or "".
func (w *simWorld) acquire(c, k int, ttl time.Duration) string {
	key := simKeys[k]
	before := w.heldSomewhere(key)
	var got simLock
	if c == len(w.clients) {
		var ok bool
		if got, ok = w.legacyAcquire(key, ttl); !ok {
			return ""
		}
	} else {
		l, err := w.clients[c].TryAcquire(context.Background(), key, ttl)
		settle(w.clients[c])
		if err != nil {
			return ""
		}
		got = simLock{key: key, lock: l, id: l.id, token: l.Token(), client: c}
	}
	seen := w.tokens[key]
	if seen == nil {
		seen = map[Token]int{}
		w.tokens[key] = seen
	}
	if j, dup := seen[got.token]; dup {
		return fmt.Sprintf("uniqueness: acquisition %d (client %d) of %s got token %d, already given to acquisition %d (client %d)",
			len(w.locks), c, key, got.token, j, w.locks[j].client)
	}
	for j, a := range w.locks {
		if a.key == key && !before[a.id] && got.token <= a.token {
			return fmt.Sprintf("order: acquisition %d (client %d) of %s got token %d after acquisition %d (client %d, token %d) had left every node",
				len(w.locks), c, key, got.token, j, a.client, a.token)
		}
	}
	seen[got.token] = len(w.locks)
	w.locks = append(w.locks, got)
	return ""
}

// legacyAcquire is one acquire of a client of the version before counter layouts: its
// acquire.lua on every node (per-key counter only), the fast path when a quorum agrees, else
// its raise.lua on the nodes below the largest value, and an undo when that fails.
func (w *simWorld) legacyAcquire(key string, ttl time.Duration) (simLock, bool) {
	ctx := context.Background()
	fence, _ := fenceKey(key)
	id := newHolderID()
	q, _ := quorumSize(w.cfg.nodes, w.cfg.amnesia)
	seed := counterSeed(w.clock.now)
	vals := make([]int64, len(w.nodes))
	count := map[int64]int{}
	var best int64
	for i, n := range w.nodes {
		v, err := n.Eval(ctx, legacyAcquireSrc, []string{key, fence}, id, ttl.Milliseconds(), seed, 0).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			panic(fmt.Sprintf("legacy acquire.lua: %v", err))
		}
		if v <= 0 {
			continue
		}
		vals[i] = v
		count[v]++
		best = max(best, v)
	}
	token, ok := int64(0), false
	for v, n := range count {
		if n >= q {
			token, ok = v, true
		}
	}
	if !ok && best > 0 {
		agreed := 0
		for i, n := range w.nodes {
			if vals[i] == 0 {
				continue
			}
			if vals[i] == best {
				agreed++
			} else if vals[i] > 0 {
				if r, err := n.Eval(ctx, legacyRaiseSrc, []string{key, fence}, id, best, 0).Int64(); err == nil && r == 1 {
					agreed++
				}
			}
		}
		token, ok = best, agreed >= q
	}
	if !ok {
		for _, n := range w.nodes {
			n.Eval(ctx, releaseScript.src, []string{key}, id)
		}
		return simLock{}, false
	}
	return simLock{key: key, id: id, token: Token(token), client: len(w.clients)}, true
}

func (w *simWorld) release(i int) {
	l := w.locks[i]
	if l.lock == nil {
		for _, n := range w.nodes {
			n.Eval(context.Background(), releaseScript.src, []string{l.key}, l.id)
		}
		return
	}
	_ = l.lock.Release(context.Background())
	settle(w.clients[l.client])
}

func (w *simWorld) extend(i int, ttl time.Duration) {
	l := w.locks[i]
	if l.lock == nil {
		return // the legacy client only acquires and releases
	}
	_ = l.lock.Extend(context.Background(), ttl)
	settle(w.clients[l.client])
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
	// Three keys, two of them sharing one slot counter, for each layout.
	"slot-shared-keys": {nodes: 5, keys: 3},
	"key-counters":     {nodes: 5, keys: 3, layouts: []CounterLayout{KeyCounters}},
	// Both layouts on the same keys and nodes, with state loss and clock seeds.
	"both-layouts+loss+clock-seed": {nodes: 5, lossNodes: -1, keys: 3, layouts: []CounterLayout{SlotCounters, KeyCounters}},
	// The two steps of the rolling upgrade (docs/design.md §5.11), with one frozen clock, so
	// that nothing rests on seeds: the old version beside the new one with per-key counters,
	// then the per-key layout beside the slot layout.
	"upgrade-step1-legacy+key": {nodes: 5, keys: 3, frozenClock: true, legacy: true, layouts: []CounterLayout{KeyCounters}},
	"upgrade-step2-key+slot":   {nodes: 5, keys: 3, frozenClock: true, layouts: []CounterLayout{KeyCounters, SlotCounters}},
	// The old version beside the slot layout, with one running clock: keys get per-key
	// counters from the old client's first acquisitions (the slot layout then keeps them up),
	// and a key the slot layout took first is safe because the old client's seed, from the
	// same running clock, is above the slot layout's tokens (§5.11's clock condition).
	"legacy+slot+clock": {nodes: 5, keys: 3, legacy: true, layouts: []CounterLayout{SlotCounters}},
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
					c := rapid.IntRange(0, w.participants()-1).Draw(rt, "client")
					k := rapid.IntRange(0, w.cfg.keys-1).Draw(rt, "key")
					check(w.acquire(c, k, ttl.Draw(rt, "ttl")))
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
				found = w.acquire(0, 0, time.Second)
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

// TestPropertyCheckerFindsLegacyBesideSlotCaveat is the control of the rolling-upgrade
// caveat (docs/design.md §5.11): a client of the old version beside the slot layout, on keys
// it has never locked (no per-key counter), with one frozen clock. The slot layout mints
// from the slot counter and leaves no per-key counter; the old client then seeds one from
// its clock and must, with the clock frozen, repeat or undercut a token. The same checker
// finds nothing in "upgrade-step1-legacy+key" and "upgrade-step2-key+slot", which is why the
// upgrade goes through the per-key layout when clocks cannot be trusted.
func TestPropertyCheckerFindsLegacyBesideSlotCaveat(t *testing.T) {
	cfg := simConfig{nodes: 5, keys: 2, frozenClock: true, legacy: true, layouts: []CounterLayout{SlotCounters}}
	found := ""
	for seed := uint64(1); seed <= 20 && found == ""; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		w := newSimWorld(t.Fatal, cfg)
		for step := 0; step < 100 && found == ""; step++ {
			switch r.IntN(3) {
			case 0, 1:
				found = w.acquire(r.IntN(w.participants()), r.IntN(w.cfg.keys), time.Second)
			case 2:
				if len(w.locks) > 0 {
					w.release(r.IntN(len(w.locks)))
				}
			}
		}
		w.close()
		if found != "" {
			t.Logf("seed %d: %s", seed, found)
		}
	}
	if found == "" {
		t.Fatal("no violation found with the old version beside the slot layout and a frozen clock")
	}
}
