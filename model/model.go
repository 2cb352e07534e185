package model

import (
	"fmt"
	"strings"
)

// Layout is a client's counter layout.
type Layout uint8

const (
	SlotLayout Layout = iota // writes the slot counter C, mirrors into an existing L (the default)
	KeyLayout                // writes the per-key counter L
	OldClient                // a version before the layouts: INCR of L only, never reads C
)

func (l Layout) String() string {
	return [...]string{"slot", "key", "old"}[l]
}

// Seeds says what seed a script sees.
type Seeds uint8

const (
	// ConstantSeeds: every seed is 1, as if every client's clock stood still.
	ConstantSeeds Seeds = iota
	// FreshSeeds: the seed is read when the script runs, from a clock that is above every
	// counter value that ever existed (the clock condition of design.md §5.6 with a margin
	// that covers the delivery delay).
	FreshSeeds
)

// Mutation is a deliberate break of one rule, for the tests that expect a counterexample.
type Mutation uint8

const (
	Real             Mutation = iota
	RaiseNotOurs              // raise.lua without its "key still ours" check
	RaiseLowers               // raise.lua sets the own counter to the target even when it was above it
	ExtendRecreates           // extend.lua sets our key again when it is absent
	ExtendOverwrites          // extend.lua sets our key even over another holder's
	// SetBeforeMint is acquire.lua as it was before every script checked before writing:
	// the key is set, then the mint fails at the counter's maximum, and the script's reply
	// reads as "held" (it returned -2^63, a double's overflow), so the client undoes nothing.
	SetBeforeMint
	// CountOnMajority is the semaphore that counts holders per node instead of taking one
	// permit key on a quorum (design.md §3.11): a node asked for a permit that another holder
	// has gives the client any other permit that is free there, so the nodes of one
	// acquisition may each grant it a different permit.
	CountOnMajority
)

func (m Mutation) String() string {
	return [...]string{"real rules", "raise without the key-still-ours check",
		"raise lowers a counter above the target", "extend re-creates an expired key",
		"extend overwrites another holder's key", "acquire sets the key before its mint fails",
		"a semaphore that counts holders per node"}[m]
}

// ClientConfig is one client.
type ClientConfig struct {
	Layout       Layout
	Acquisitions int // acquisitions it starts, at most maxSeq
	Extends      int // extends per acquisition
	OnlyKey      int // 0: each acquisition takes any key; k + 1: only key k
}

// Config bounds one run of the checker.
type Config struct {
	Name    string
	N, Q    int // nodes and the quorum the clients use
	Keys    int // lock keys, all in one hash slot (they share the slot counter), at most maxKeys
	Clients []ClientConfig
	Amnesia int // restarts without persistence (a node restarts empty), in total
	Resends int // request messages delivered twice (a go-redis retry), in total
	// Lose lets clients time out on a node: its request may be lost, or applied with the reply
	// lost. (A request that is never delivered simply stays in flight.)
	Lose bool
	// Expiry lets a lock key expire on a node at any moment (a clock jump, a paused
	// holder). With Exclusion set it may expire only once its holder's validity for the TTL
	// that key was last given has ended (§5.5's assumptions).
	Expiry bool
	// Gate lets a node refuse an acquire of a free key, leaving every key and counter as it
	// was: the waiter queue of design.md §3.10 refusing a waiter that is not at the head of
	// the key's queue there. Any refusal is a branch of the search, so every gate that only
	// refuses (whatever its rules, whatever the queues hold) is covered.
	Gate bool
	// Refuse lets a node answer an acquire of a free key with an error reply, changing
	// nothing: the seed bound of design.md §5.6 refusing a seed too far ahead of the node's
	// clock, or any other refusal by error. The client counts the node as failed and its
	// undo releases it, as for every error.
	Refuse    bool
	Exclusion bool // check mutual exclusion (only meaningful with at most f amnesic nodes)
	// Permits, when not 0, checks the semaphore (design.md §3.11, §5.13): the Keys are its
	// permit keys (Keys = Permits), an acquisition of any key (OnlyKey 0) is one that may
	// choose any permit, and at no moment may more than Permits clients hold a key with
	// validity left. It needs Exclusion's expiry rule.
	Permits int
	// Continuity checks design.md §5.10's "a late extend is safe": when an extend wins, no
	// other acquisition of the key has been granted since this holder's grant. It needs
	// Exclusion's expiry rule and Timely.
	Continuity bool
	// Timely is what the design assumes of request timing: a request of an acquire, or of a
	// heal, runs on its node before the validity it serves ends, or never (the node timeout
	// and exec budget are far below a TTL). So when a holder's validity for epoch e ends, its
	// acquire requests still in flight (e = 0), resends included, and its heals for epochs up
	// to e are dropped.
	Timely   bool
	Seeds    Seeds
	Mutation Mutation
	// MaxCounter, when not 0, is the largest counter value (Rules.Max), so small that the
	// search reaches it: an acquire that would mint past it fails on that node (an error
	// reply, nothing changed). 0 is Redis's, MaxCounter, which no search reaches.
	MaxCounter int16
	// NoLeftover checks that an acquisition that is over (failed, or released) holds no key
	// on any node once none of its messages is in flight: a failed acquire leaves nothing
	// behind (design.md §5.12). Only for clients without extends: the model does not queue a
	// release behind a heal, as Lock.last does.
	NoLeftover bool
	MaxStates  int // stop (and report it) after this many states; 0 for no limit
}

const (
	maxN       = 5
	maxClients = 3
	maxKeys    = 2
	maxSeq     = 3
	maxWon     = maxClients * maxSeq
)

// hid is a holder id: 0 none, else 1 + client*maxSeq + acquisition number.
type hid uint8

func holderOf(c, seq int) hid { return hid(1 + c*maxSeq + seq) }
func (h hid) client() int     { return (int(h) - 1) / maxSeq }
func (h hid) seq() int        { return (int(h) - 1) % maxSeq }
func (h hid) String() string  { return fmt.Sprintf("c%d#%d", h.client(), h.seq()+1) }

type node struct {
	holder [maxKeys]hid
	epoch  [maxKeys]int8 // the holder's validity epoch that the key's TTL covers
	l      [maxKeys]int16
	c      int16 // the slot counter shared by all keys
}

// Per-node states of an acquire, as in quorum.go; and of an extend.
const (
	stPending uint8 = iota
	stAcquired
	stRaising
	stRaised
	stRefused
	stFailed
)

const (
	exNone uint8 = iota
	exPending
	exOne
	exZero
	exFailed
)

const (
	phIdle uint8 = iota
	phAcquiring
	phHolding
)

type client struct {
	phase   uint8
	seq     uint8 // acquisitions started
	key     uint8
	floor   int16 // claim O: the largest token of this key returned before this acquisition began
	st      [maxN]uint8
	cnt     [maxN]int16
	mayHold [maxN]bool
	target  int16
	token   int16
	// validity: epoch 0 is the acquire's, each extend starts a new one; the holder is valid
	// while valid > ended.
	epochs   int8
	valid    int8
	ended    int8
	extends  uint8 // extends started in this acquisition
	extEpoch int8  // 0 when no extend is in progress
	ext      [maxN]uint8
	wins     uint8 // with Continuity: the key's number of grants just after this one's
}

// Message kinds.
const (
	mAcquire uint8 = iota
	mAcquireReply
	mRaise
	mRaiseReply
	mExtend
	mExtendReply
	mRelease
	mHeal
)

type msg struct {
	kind   uint8
	client uint8
	seq    uint8
	node   uint8
	key    uint8
	arg    int16 // seed, target, epoch, token or reply value
	arg2   int16 // heal: epoch
}

func (m msg) id() hid { return holderOf(int(m.client), int(m.seq)) }

type state struct {
	nodes     [maxN]node
	cl        [maxClients]client
	msgs      []msg
	amnesia   uint8 // restarts left
	resends   uint8
	vmax      int16 // largest counter value that ever existed (FreshSeeds)
	won       [maxKeys][maxWon]int16
	nwon      [maxKeys]uint8
	violation string
}

func (s *state) clone() *state {
	t := *s
	t.msgs = append([]msg(nil), s.msgs...)
	return &t
}

func (s *state) removeMsg(i int) {
	s.msgs = append(s.msgs[:i:i], s.msgs[i+1:]...)
}

func (s *state) send(m msg) { s.msgs = append(s.msgs, m) }

// step is one transition: the successor state and a readable label.
type step struct {
	label string
	next  *state
}

type checker struct {
	cfg            Config
	perms          [][]int
	labels         bool // build step labels (for a trace)
	buf, best, col []byte
}

// rules are the scripts' limits in this run.
func (k *checker) rules() Rules {
	if k.cfg.MaxCounter != 0 {
		return Rules{Max: Counter(k.cfg.MaxCounter)}
	}
	return Redis
}

func (k *checker) seed(s *state) int16 {
	if k.cfg.Seeds == FreshSeeds {
		return s.vmax + 1
	}
	return 1
}

func (k *checker) bump(s *state, vs ...int16) {
	for _, v := range vs {
		if v > s.vmax {
			s.vmax = v
		}
	}
}

func initial(cfg Config) *state {
	s := &state{amnesia: uint8(cfg.Amnesia), resends: uint8(cfg.Resends)}
	return s
}

// successors lists every step from s.
func (k *checker) successors(s *state) []step {
	var out []step
	cfg := k.cfg
	add := func(label string, t *state) { out = append(out, step{label, t}) }

	for c := range cfg.Clients {
		cc := &s.cl[c]
		switch cc.phase {
		case phIdle:
			if int(cc.seq) < cfg.Clients[c].Acquisitions {
				for key := 0; key < cfg.Keys; key++ {
					if o := cfg.Clients[c].OnlyKey; o != 0 && key != o-1 {
						continue
					}
					t := s.clone()
					k.startAcquire(t, c, key)
					add(k.f("c%d: start acquire #%d of k%d (seed %s)", c, cc.seq+1, key, k.seedText(s)), t)
				}
			}
		case phAcquiring:
			if cfg.Lose {
				for i := 0; i < cfg.N; i++ {
					if cc.st[i] == stPending || cc.st[i] == stRaising {
						t := s.clone()
						t.cl[c].st[i] = stFailed
						t.dropReplies(c, i, mAcquireReply, mRaiseReply)
						lbl := k.f("c%d: timeout on n%d", c, i)
						lbl += k.decide(t, c)
						add(lbl, t)
					}
				}
			}
			if !cfg.Lose {
				// The validity time runs out (or the context ends) before a decision. (With
				// Lose, timing out every node that has not answered comes to the same.)
				t := s.clone()
				add(k.f("c%d: acquire #%d gives up (validity used up)", c, cc.seq)+k.fail(t, c), t)
			}
		case phHolding:
			id := holderOf(c, int(cc.seq)-1)
			if cc.ended+1 < cc.epochs {
				// Time passes: the validity that epoch ended+1 gave (the acquire's, or an
				// extend's from its start) is over.
				t := s.clone()
				t.cl[c].ended++
				if cfg.Timely {
					t.dropLate(c, t.cl[c].ended)
				}
				add(k.f("c%d: validity of %s for epoch %d ends", c, id, cc.ended+1), t)
			}
			if cc.extEpoch == 0 && int(cc.extends) < cfg.Clients[c].Extends {
				t := s.clone()
				tc := &t.cl[c]
				tc.extends++
				tc.extEpoch = tc.epochs
				tc.epochs++
				for i := 0; i < cfg.N; i++ {
					tc.ext[i] = exPending
					t.send(msg{kind: mExtend, client: uint8(c), seq: cc.seq - 1, node: uint8(i), key: cc.key, arg: int16(tc.extEpoch)})
				}
				add(k.f("c%d: start extend of %s (epoch %d)", c, id, tc.extEpoch), t)
			}
			if cc.extEpoch != 0 && cfg.Lose {
				for i := 0; i < cfg.N; i++ {
					if cc.ext[i] == exPending {
						t := s.clone()
						t.cl[c].ext[i] = exFailed
						t.dropReplies(c, i, mExtendReply)
						add(k.f("c%d: extend timeout on n%d", c, i)+k.decideExtend(t, c), t)
					}
				}
			}
			t := s.clone()
			k.releaseAll(t, c)
			add(k.f("c%d: release %s", c, id), t)
		}
	}

	for mi, m := range s.msgs {
		switch m.kind {
		case mAcquireReply, mRaiseReply, mExtendReply:
			t := s.clone()
			t.removeMsg(mi)
			add(k.receive(t, m), t)
			continue
		case mRelease:
			if s.acquireInFlight(m) {
				continue // queued behind the acquire call to that node (attempt.fail, sendAfter)
			}
		}
		t := s.clone()
		t.removeMsg(mi)
		add(k.execute(t, m), t)
		if cfg.Gate && m.kind == mAcquire && s.nodes[m.node].holder[m.key] == 0 {
			t := s.clone()
			t.removeMsg(mi)
			t.send(msg{kind: mAcquireReply, client: m.client, seq: m.seq, node: m.node, key: m.key, arg: 0})
			add(k.f("n%d: %s refused by the queue (not the head)", m.node, k.msgText(m)), t)
		}
		if cfg.Refuse && m.kind == mAcquire && s.nodes[m.node].holder[m.key] == 0 {
			t := s.clone()
			t.removeMsg(mi)
			t.send(msg{kind: mAcquireReply, client: m.client, seq: m.seq, node: m.node, key: m.key, arg: int16(Failed)})
			add(k.f("n%d: %s -> error: refused (a seed too far ahead of the node's clock)", m.node, k.msgText(m)), t)
		}
		if s.resends > 0 {
			t := s.clone()
			t.resends--
			add(k.execute(t, m)+" (a resend: the request stays in flight)", t)
		}
	}

	for i := 0; i < cfg.N; i++ {
		if cfg.Expiry {
			for key := 0; key < cfg.Keys; key++ {
				h := s.nodes[i].holder[key]
				if h == 0 || (cfg.Exclusion && !s.expirable(h, s.nodes[i].epoch[key])) {
					continue
				}
				t := s.clone()
				t.nodes[i].holder[key] = 0
				t.nodes[i].epoch[key] = 0
				add(k.f("n%d: k%d of %s expires", i, key, h), t)
			}
		}
		if s.amnesia > 0 {
			t := s.clone()
			t.amnesia--
			t.nodes[i] = node{}
			add(k.f("n%d: restarts empty (amnesia)", i), t)
		}
	}
	for i := range out {
		k.check(out[i].next)
	}
	return out
}

// expirable: a key of h whose TTL covers h's validity epoch e may expire once that validity
// has ended, or once h's acquisition is over (failed, released or superseded).
func (s *state) expirable(h hid, e int8) bool {
	c := &s.cl[h.client()]
	if int(c.seq)-1 != h.seq() || c.phase != phHolding {
		return c.phase != phAcquiring || int(c.seq)-1 != h.seq()
	}
	return e <= c.ended
}

// dropLate removes the requests of client c's current acquisition that may no longer run
// now that its validity for epoch e has ended: its acquire requests (e = 0) and its heals
// for epochs up to e (Config.Timely).
func (s *state) dropLate(c int, e int8) {
	seq := s.cl[c].seq - 1
	out := s.msgs[:0:0]
	for _, m := range s.msgs {
		if int(m.client) == c && m.seq == seq && ((m.kind == mAcquire && e == 0) || (m.kind == mHeal && int8(m.arg2) <= e)) {
			continue
		}
		out = append(out, m)
	}
	s.msgs = out
}

func (s *state) acquireInFlight(r msg) bool {
	for _, m := range s.msgs {
		if m.kind == mAcquire && m.client == r.client && m.seq == r.seq && m.node == r.node {
			return true
		}
	}
	return false
}

// dropReplies removes the replies that client c can no longer use from node i: a reply to
// a node given up on is ignored (the undo releases every node that may hold our key anyway).
func (s *state) dropReplies(c, i int, kinds ...uint8) {
	out := s.msgs[:0:0]
	for _, m := range s.msgs {
		drop := false
		if int(m.client) == c && int(m.node) == i {
			for _, kd := range kinds {
				drop = drop || m.kind == kd
			}
		}
		if !drop {
			out = append(out, m)
		}
	}
	s.msgs = out
}

func (k *checker) seedText(s *state) string {
	if k.cfg.Seeds == FreshSeeds {
		return "from the clock"
	}
	return "1"
}

func (k *checker) startAcquire(s *state, c, key int) {
	cc := &s.cl[c]
	seq := cc.seq
	*cc = client{phase: phAcquiring, seq: seq + 1, key: uint8(key), epochs: 1, valid: -1, ended: -1}
	for i := 0; i < s.nwonN(key); i++ {
		if s.won[key][i] > cc.floor {
			cc.floor = s.won[key][i]
		}
	}
	for i := 0; i < k.cfg.N; i++ {
		cc.mayHold[i] = true
		var seed int16 = 1
		if k.cfg.Seeds == FreshSeeds {
			seed = 0 // read when the script runs
		}
		s.send(msg{kind: mAcquire, client: uint8(c), seq: seq, node: uint8(i), key: uint8(key), arg: seed})
	}
}

func (s *state) nwonN(key int) int { return int(s.nwon[key]) }

// keyView gives the script's view of key on node n for a layout: own and other counters.
func (n *node) view(key int, l Layout) Key {
	k := Key{Holder: ID(n.holder[key])}
	switch l {
	case SlotLayout:
		k.Own, k.Other = Counter(n.c), Counter(n.l[key])
	case KeyLayout:
		k.Own, k.Other = Counter(n.l[key]), Counter(n.c)
	case OldClient:
		k.Own = Counter(n.l[key])
	}
	return k
}

func (n *node) store(key int, l Layout, k Key) {
	n.holder[key] = hid(k.Holder)
	switch l {
	case SlotLayout:
		n.c, n.l[key] = int16(k.Own), int16(k.Other)
	case KeyLayout:
		n.l[key], n.c = int16(k.Own), int16(k.Other)
	case OldClient:
		n.l[key] = int16(k.Own)
	}
}

// execute runs the script of request m on its node, atomically, and sends the reply.
func (k *checker) execute(s *state, m msg) string {
	n := &s.nodes[m.node]
	key := int(m.key)
	l := k.cfg.Clients[m.client].Layout
	slot := l == SlotLayout
	v := n.view(key, l)
	id := ID(m.id())
	seed := Counter(m.arg)
	if k.cfg.Seeds == FreshSeeds {
		seed = Counter(k.seed(s)) // read when the script runs
	}
	before := n.holder[key]
	var lbl string
	switch m.kind {
	case mAcquire:
		var r Counter
		switch {
		case l == OldClient:
			r = OldAcquire(&v, id, seed)
		case k.cfg.Mutation == CountOnMajority && v.Holder != 0 && v.Holder != id && k.freeKey(n) >= 0:
			// Held here by another: this node grants whichever other permit it has free.
			key = k.freeKey(n)
			v = n.view(key, l)
			before = 0
			r = k.rules().Acquire(&v, id, seed, slot)
		case k.cfg.Mutation == SetBeforeMint && v.Holder == 0:
			if r = k.rules().Acquire(&v, id, seed, slot); r == Failed {
				v.Holder, r = id, 0
			}
		default:
			r = k.rules().Acquire(&v, id, seed, slot)
		}
		n.store(key, l, v)
		if hid(v.Holder) == m.id() && before == 0 {
			n.epoch[key] = 0
		}
		s.send(msg{kind: mAcquireReply, client: m.client, seq: m.seq, node: m.node, key: m.key, arg: int16(r)})
		switch {
		case r > 0:
			lbl = k.f("-> token %d", r)
		case r == Failed:
			lbl = k.f("-> error: a counter is at its maximum %d", k.rules().Max)
		case before == 0:
			lbl = k.f("-> refused, though the key was free: left set") // SetBeforeMint
		default:
			lbl = k.f("-> held by %s", before)
		}
	case mRaise:
		var r int64
		switch {
		case l == OldClient:
			r = OldRaise(&v, id, Counter(m.arg))
		case k.cfg.Mutation == RaiseNotOurs:
			if v.Own < Counter(m.arg) {
				v.Own = Counter(m.arg)
			}
			mirror(&v.Other, Counter(m.arg), slot)
			r = 1
		case k.cfg.Mutation == RaiseLowers && v.Holder == id:
			v.Own = Counter(m.arg)
			mirror(&v.Other, v.Own, slot)
			r = 1
		default:
			r = k.rules().Raise(&v, id, Counter(m.arg), slot)
		}
		n.store(key, l, v)
		s.send(msg{kind: mRaiseReply, client: m.client, seq: m.seq, node: m.node, key: m.key, arg: int16(r)})
		lbl = k.f("-> %d", r)
	case mExtend:
		r := Extend(&v, id)
		switch {
		case k.cfg.Mutation == ExtendRecreates && v.Holder == 0,
			k.cfg.Mutation == ExtendOverwrites && v.Holder != id:
			v.Holder, r = id, 1
			n.epoch[key] = -1
		}
		n.store(key, l, v)
		if r == 1 && int8(m.arg) > n.epoch[key] {
			n.epoch[key] = int8(m.arg) // the new TTL runs from now, past the extend's validity
		}
		s.send(msg{kind: mExtendReply, client: m.client, seq: m.seq, node: m.node, key: m.key, arg: int16(r) + 2*m.arg})
		lbl = k.f("-> %d", r)
	case mRelease:
		lbl = k.f("-> %d", Release(&v, id))
		n.store(key, l, v)
	case mHeal:
		r := k.rules().Heal(&v, id, Counter(m.arg), seed, slot)
		n.store(key, l, v)
		if r == 1 && before == 0 {
			n.epoch[key] = int8(m.arg2)
		}
		lbl = k.f("-> %d", r)
	}
	k.bump(s, n.c, n.l[0], n.l[1])
	if !k.labels {
		return ""
	}
	return k.f("n%d: %s %s   [n%d %s]", m.node, k.msgText(m), lbl, m.node, nodeText(n, k.cfg.Keys))
}

// freeKey returns a key that no holder has on node n, -1 when every key is held there.
func (k *checker) freeKey(n *node) int {
	for key := 0; key < k.cfg.Keys; key++ {
		if n.holder[key] == 0 {
			return key
		}
	}
	return -1
}

// f formats a step's label; labels are only built when a trace is replayed.
func (k *checker) f(format string, args ...any) string {
	if !k.labels {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func nodeText(n *node, keys int) string {
	var b strings.Builder
	for key := 0; key < keys; key++ {
		h := "-"
		if n.holder[key] != 0 {
			h = n.holder[key].String()
		}
		fmt.Fprintf(&b, "k%d=%s L%d=%s ", key, h, key, ctr(n.l[key]))
	}
	fmt.Fprintf(&b, "C=%s", ctr(n.c))
	return b.String()
}

func ctr(v int16) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

func (k *checker) msgText(m msg) string {
	id := m.id()
	switch m.kind {
	case mAcquire:
		l := k.cfg.Clients[m.client].Layout
		seed := fmt.Sprint(m.arg)
		if k.cfg.Seeds == FreshSeeds {
			seed = "clock"
		}
		if l == OldClient {
			return k.f("old acquire(k%d, %s, seed %s)", m.key, id, seed)
		}
		return k.f("acquire.lua(k%d, %s, %s layout, seed %s)", m.key, id, l, seed)
	case mRaise:
		return k.f("raise.lua(k%d, %s, target %d)", m.key, id, m.arg)
	case mExtend:
		return k.f("extend.lua(k%d, %s, epoch %d)", m.key, id, m.arg)
	case mRelease:
		return k.f("release.lua(k%d, %s)", m.key, id)
	case mHeal:
		return k.f("heal.lua(k%d, %s, token %d)", m.key, id, m.arg)
	}
	return k.f("reply %d to %s from n%d", m.arg, id, m.node)
}

// checkLeftover: every acquisition that is over (a later one has started, or its client is
// idle) and has no message in flight holds no key on any node.
func (k *checker) checkLeftover(s *state) {
	for c := range k.cfg.Clients {
		cc := &s.cl[c]
		for seq := 0; seq < int(cc.seq); seq++ {
			if seq == int(cc.seq)-1 && cc.phase != phIdle {
				continue
			}
			if s.inFlight(c, seq) {
				continue
			}
			h := holderOf(c, seq)
			for i := 0; i < k.cfg.N; i++ {
				for key := 0; key < k.cfg.Keys; key++ {
					if s.nodes[i].holder[key] == h {
						s.violation = fmt.Sprintf("key left behind: k%d of %s stays on n%d after that acquisition ended", key, h, i)
						return
					}
				}
			}
		}
	}
}

// inFlight reports whether a message of client c's acquisition seq is still in flight.
func (s *state) inFlight(c, seq int) bool {
	for _, m := range s.msgs {
		if int(m.client) == c && int(m.seq) == seq {
			return true
		}
	}
	return false
}

// receive applies a reply to its client.
func (k *checker) receive(s *state, m msg) string {
	c := int(m.client)
	cc := &s.cl[c]
	i := int(m.node)
	current := int(cc.seq)-1 == int(m.seq)
	switch m.kind {
	case mAcquireReply:
		lbl := k.f("c%d: n%d answers acquire with %d", c, i, m.arg)
		if !current || cc.phase != phAcquiring || cc.st[i] != stPending {
			return lbl + " (late: ignored)"
		}
		switch {
		case m.arg < 0:
			// An error reply (Failed): counted as failed; the undo still releases the node,
			// as attempt.go does for every error (it may be a lost reply of a SET).
			cc.st[i] = stFailed
		case m.arg == 0:
			cc.st[i] = stRefused
			cc.mayHold[i] = false
		default:
			cc.cnt[i] = m.arg
			cc.st[i] = stAcquired
			if cc.target != 0 && m.arg < cc.target {
				cc.st[i] = stRaising
				k.sendRaise(s, c, i)
				lbl += k.f(", below the target %d: raise", cc.target)
			}
		}
		return lbl + k.decide(s, c)
	case mRaiseReply:
		lbl := k.f("c%d: n%d answers raise with %d", c, i, m.arg)
		if !current || cc.phase != phAcquiring || cc.st[i] != stRaising {
			return lbl + " (late: ignored)"
		}
		if m.arg == 1 {
			cc.st[i] = stRaised
			cc.cnt[i] = cc.target
		} else {
			cc.st[i] = stRefused
		}
		return lbl + k.decide(s, c)
	case mExtendReply:
		r, epoch := m.arg%2, int8(m.arg/2)
		lbl := k.f("c%d: n%d answers extend with %d", c, i, r)
		if !current || cc.phase != phHolding || cc.extEpoch != epoch || cc.ext[i] != exPending {
			return lbl + " (late: ignored)"
		}
		if r == 1 {
			cc.ext[i] = exOne
		} else {
			cc.ext[i] = exZero
		}
		return lbl + k.decideExtend(s, c)
	}
	return "?"
}

func (k *checker) sendRaise(s *state, c, i int) {
	cc := &s.cl[c]
	s.send(msg{kind: mRaise, client: uint8(c), seq: cc.seq - 1, node: uint8(i), key: cc.key, arg: cc.target})
}

// decide is acquireTally.decide (quorum.go) followed by what attempt.go does with the verdict.
func (k *checker) decide(s *state, c int) string {
	cc := &s.cl[c]
	q := k.cfg.Q
	n := k.cfg.N
	if cc.target == 0 {
		var max, best int16
		inS, pending, inM := 0, 0, 0
		for i := 0; i < n; i++ {
			switch cc.st[i] {
			case stAcquired:
				inS++
				v := cc.cnt[i]
				if v > max {
					max = v
				}
				cnt := 0
				for j := 0; j < n; j++ {
					if cc.st[j] == stAcquired && cc.cnt[j] == v {
						cnt++
					}
				}
				if cnt > inM {
					inM, best = cnt, v
				}
			case stPending:
				pending++
			}
		}
		switch {
		case inM >= q:
			cc.target = best
			return k.win(s, c, k.f("; decide: fast path, token %d", best))
		case inS+pending < q:
			return "; decide: lost" + k.fail(s, c)
		case inS < q:
			return ""
		}
		cc.target = max
		var raised []string
		for i := 0; i < n; i++ {
			if cc.st[i] == stAcquired && cc.cnt[i] < max {
				cc.st[i] = stRaising
				k.sendRaise(s, c, i)
				raised = append(raised, k.f("n%d", i))
			}
		}
		lbl := k.f("; decide: slow path, target %d, raise %s", max, strings.Join(raised, " "))
		return lbl + k.decideTarget(s, c)
	}
	return k.decideTarget(s, c)
}

func (k *checker) decideTarget(s *state, c int) string {
	cc := &s.cl[c]
	inM, possible := 0, 0
	for i := 0; i < k.cfg.N; i++ {
		st := cc.st[i]
		switch {
		case (st == stAcquired && cc.cnt[i] == cc.target) || st == stRaised:
			inM++
			possible++
		case st == stRaising || st == stPending:
			possible++
		}
	}
	switch {
	case inM >= k.cfg.Q:
		return k.win(s, c, k.f("; decide: won, token %d", cc.target))
	case possible < k.cfg.Q:
		return "; decide: lost" + k.fail(s, c)
	}
	return ""
}

// win records a successful acquisition and checks claims U and O for it.
func (k *checker) win(s *state, c int, lbl string) string {
	cc := &s.cl[c]
	t := cc.target
	key := int(cc.key)
	if k.cfg.Mutation == CountOnMajority {
		// Its nodes may each have given it another permit: the token names none of them.
		cc.phase, cc.token, cc.valid, cc.ended = phHolding, t, 0, -1
		cc.st, cc.cnt, cc.mayHold, cc.target = [maxN]uint8{}, [maxN]int16{}, [maxN]bool{}, 0
		s.dropRepliesOf(c, mAcquireReply)
		s.dropRepliesOf(c, mRaiseReply)
		return lbl
	}
	for i := 0; i < s.nwonN(key); i++ {
		if s.won[key][i] == t && s.violation == "" {
			s.violation = fmt.Sprintf("claim U broken: token %d of k%d handed out twice", t, key)
		}
	}
	if t <= cc.floor && s.violation == "" {
		s.violation = fmt.Sprintf("claim O broken: token %d of k%d is not above %d, returned before this acquisition began", t, key, cc.floor)
	}
	s.won[key][s.nwon[key]] = t
	s.nwon[key]++
	// keep the history sorted: it is a set
	w := s.won[key][:s.nwon[key]]
	for i := len(w) - 1; i > 0 && w[i] < w[i-1]; i-- {
		w[i], w[i-1] = w[i-1], w[i]
	}
	cc.phase = phHolding
	cc.token = t
	if k.cfg.Continuity {
		cc.wins = s.nwon[key]
	}
	cc.valid, cc.ended = 0, -1
	// The tally is done: replies still to come change nothing (a Lock releases every node).
	cc.st, cc.cnt, cc.mayHold, cc.target = [maxN]uint8{}, [maxN]int16{}, [maxN]bool{}, 0
	s.dropRepliesOf(c, mAcquireReply)
	s.dropRepliesOf(c, mRaiseReply)
	return lbl
}

// fail undoes the attempt: release.lua to every node that may hold our key, each queued
// behind the acquire call to that node.
func (k *checker) fail(s *state, c int) string {
	cc := &s.cl[c]
	var rel []string
	for i := 0; i < k.cfg.N; i++ {
		if cc.mayHold[i] {
			s.send(msg{kind: mRelease, client: uint8(c), seq: cc.seq - 1, node: uint8(i), key: cc.key})
			rel = append(rel, k.f("n%d", i))
		}
	}
	k.idle(s, c)
	return "; undo: release on " + strings.Join(rel, " ")
}

// idle ends client c's current acquisition; replies it could still get are dropped, since
// they can no longer change anything.
func (k *checker) idle(s *state, c int) {
	cc := &s.cl[c]
	*cc = client{seq: cc.seq}
	out := s.msgs[:0:0]
	for _, m := range s.msgs {
		if int(m.client) == c && (m.kind == mAcquireReply || m.kind == mRaiseReply || m.kind == mExtendReply) {
			continue
		}
		out = append(out, m)
	}
	s.msgs = out
}

func (k *checker) releaseAll(s *state, c int) {
	cc := &s.cl[c]
	for i := 0; i < k.cfg.N; i++ {
		s.send(msg{kind: mRelease, client: uint8(c), seq: cc.seq - 1, node: uint8(i), key: cc.key})
	}
	k.idle(s, c)
}

// decideExtend: won with Q nodes answering 1 while its validity has not ended (the holder
// is then valid for the extend's epoch, and heals the nodes that answered 0); lost when Q is
// out of reach.
func (k *checker) decideExtend(s *state, c int) string {
	cc := &s.cl[c]
	ones, possible := 0, 0
	for i := 0; i < k.cfg.N; i++ {
		switch cc.ext[i] {
		case exOne:
			ones++
			possible++
		case exPending:
			possible++
		}
	}
	switch {
	case ones >= k.cfg.Q && cc.extEpoch > cc.ended:
		if k.cfg.Continuity && s.nwon[cc.key] != cc.wins && s.violation == "" {
			late := ""
			if cc.valid <= cc.ended {
				late = " after its validity had ended"
			}
			s.violation = fmt.Sprintf("continuity broken: the extend of c%d (token %d) wins%s, but k%d was granted to another acquisition since c%d's grant",
				c, cc.token, late, cc.key, c)
		}
		var healed []string
		for i := 0; i < k.cfg.N; i++ {
			if cc.ext[i] == exZero && k.cfg.Clients[c].Layout != OldClient {
				s.send(msg{kind: mHeal, client: uint8(c), seq: cc.seq - 1, node: uint8(i), key: cc.key, arg: cc.token, arg2: int16(cc.extEpoch)})
				healed = append(healed, k.f("n%d", i))
			}
		}
		cc.valid = cc.extEpoch
		k.endExtend(s, c)
		lbl := k.f("; extend won: valid for epoch %d", cc.valid)
		if len(healed) > 0 {
			lbl += ", heal " + strings.Join(healed, " ")
		}
		return lbl
	case ones >= k.cfg.Q:
		k.endExtend(s, c)
		return "; extend failed: validity used up"
	case possible < k.cfg.Q:
		k.endExtend(s, c)
		return "; extend failed"
	}
	return ""
}

func (k *checker) endExtend(s *state, c int) {
	cc := &s.cl[c]
	cc.extEpoch = 0
	cc.ext = [maxN]uint8{}
	s.dropRepliesOf(c, mExtendReply)
}

func (s *state) dropRepliesOf(c int, kind uint8) {
	out := s.msgs[:0:0]
	for _, m := range s.msgs {
		if int(m.client) == c && m.kind == kind {
			continue
		}
		out = append(out, m)
	}
	s.msgs = out
}

// check tests mutual exclusion on s, and with NoLeftover that acquisitions that are over
// left no key (claims U and O are checked when an acquisition wins).
func (k *checker) check(s *state) {
	if s.violation != "" {
		return
	}
	if k.cfg.NoLeftover {
		k.checkLeftover(s)
	}
	if !k.cfg.Exclusion {
		return
	}
	if k.cfg.Permits > 0 {
		holders := 0
		for c := range k.cfg.Clients {
			if cc := &s.cl[c]; cc.phase == phHolding && cc.valid > cc.ended {
				holders++
			}
		}
		if holders > k.cfg.Permits {
			s.violation = fmt.Sprintf("semaphore broken: %d holders with validity left, %d permits", holders, k.cfg.Permits)
			return
		}
		if k.cfg.Mutation == CountOnMajority {
			return // a holder's key says nothing: its nodes may each have given it another
		}
	}
	for a := range k.cfg.Clients {
		for b := a + 1; b < len(k.cfg.Clients); b++ {
			ca, cb := &s.cl[a], &s.cl[b]
			if ca.phase == phHolding && cb.phase == phHolding && ca.key == cb.key &&
				ca.valid > ca.ended && cb.valid > cb.ended {
				s.violation = fmt.Sprintf("mutual exclusion broken: c%d (token %d) and c%d (token %d) both hold k%d and are valid",
					a, ca.token, b, cb.token, ca.key)
			}
		}
	}
}
