package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeLinger is how long a key's subscription outlives its last waiter. A key that is
// contended again within it needs no new SUBSCRIBE (and no catch-up attempt, see
// wakeHub.subscribed); a key wanted once costs one SUBSCRIBE and one UNSUBSCRIBE per node.
const wakeLinger = 2 * time.Second

// turnLinger is how long the turn channel (one per Client, queue.go) stays subscribed after
// the last queued waiter's subscription went: longer than a key's, since it serves every
// key, so that a Client that waits now and then does not subscribe again each time (and
// miss the turns told while the SUBSCRIBE is on its way).
const turnLinger = time.Minute

// Bounds of the pause between two failed reads of a node's subscription connection (node
// down, connection refused, AUTH refused): doubled from the first to the last.
const (
	wakeBackoffMin = 50 * time.Millisecond
	wakeBackoffMax = 5 * time.Second
)

// pubsubLinger is how long the subscription connections (one per node) outlive the last
// subscription: a Client that waited once does not keep a connection per node open for the
// rest of its life (fleets of hundreds of instances count them against maxclients).
const pubsubLinger = time.Minute

// wakeHub delivers the releases that other processes announce to this Client's waiters: at
// most one go-redis PubSub per node, made on the first subscription. A queued waiter (one
// key, queue.go) hears through this Client's turn channel, on which a node tells the head of
// a key's queue that the key was released (release.lua, leave.lua); every other waiter
// (multi-key locks) through the channel of each of its keys (wakeChannel(key), on which
// release.lua announces every release). Subscriptions are kept per key (reference counted,
// so that one waiter may watch several keys), each for wakeLinger after its last waiter
// left; the turn channel is subscribed while any key has queued waiters. Once a quorum of
// nodes has announced a release, the key's head waiter is kicked (waitQueues.released) and
// makes an attempt at once.
//
// A wake-up only makes a waiter try now instead of after its pause; it never decides
// anything, so a lost, late, duplicated or forged message costs at most one retry pause or
// one extra attempt, never mutual exclusion (docs/design.md, "Wake-ups"). Every failure
// here (a node down, SUBSCRIBE refused by an ACL) is logged at Debug and means polling.
type wakeHub struct {
	// Set by New, before the first subscription.
	off     bool                    // WithoutWakeups: no subscription at all
	nodes   []redis.UniversalClient // per node, the client the subscriptions are made with
	quorum  int                     // the announcements of a release that make it heard
	id      string                  // the Client's id, which names its turn channel
	logger  *slog.Logger
	waiters wakeTarget // this Client's waiters, woken when a release is heard

	soonAfter    time.Duration // how long after a runner-up notice its waiter tries at the latest (soonFrom)
	linger       time.Duration // wakeLinger; tests shorten it before the first subscription
	turnLinger   time.Duration // turnLinger; likewise
	pubsubLinger time.Duration // pubsubLinger; likewise

	mu         sync.Mutex
	subs       map[string]*wakeSub // per key with waiters or lingering
	stamp      uint64              // wake events so far, all keys: orders them for since
	turnCh     string              // turnChannel(), named once
	turnSubs   int                 // subs with turn set
	turnWanted bool                // the turn channel is to be subscribed: turnSubs > 0, or lingering
	turnIdle   time.Time           // when turnSubs last fell to 0
	turnActive bool                // a quorum of nodes has confirmed the turn channel's SUBSCRIBE since it was wanted
	turnListen []bool              // per node, whether it has confirmed that SUBSCRIBE since it was wanted
	gen        *wakeGen            // the subscription connections and their goroutines; nil while none is needed
	idleSince  time.Time           // when the last channel went (zero while one is wanted)
	closed     bool
	wg         sync.WaitGroup // every goroutine of every generation
}

// wakeTarget is what the hub wakes when a release is heard: this Client's queues of waiters
// (waitQueues, wake.go). It is the hub's only way back into its Client.
type wakeTarget interface {
	// kick wakes, for an attempt now, the head waiter of key (single) and the heads of the
	// multi-key sets that contain key (sets); catchUp says it was not a release.
	kick(key string, catchUp, single, sets bool)
	// catchUp wakes the heads for a subscription that has just become active.
	catchUp(key string)
	// soon asks key's queued head to try again by at at the latest (waiter.soon).
	soon(key string, at time.Time)
}

var _ wakeTarget = (*waitQueues)(nil)

// wakeGen is one set of subscription connections, one per node, with their goroutines and
// the sweeper: made at the first subscription, ended by Close or after pubsubLinger
// without any subscription; a later subscription makes a new one.
type wakeGen struct {
	ctx    context.Context // ends with the generation: stops dials and the goroutines
	cancel context.CancelFunc
	nodes  []*wakeNode
}

// wakeSub is one key's subscription.
type wakeSub struct {
	refs    int       // waiters (subscribe calls) not yet unsubscribed
	idle    time.Time // when refs fell to 0
	keyChan bool      // a waiter that is not queued wants the key's own channel
	turn    bool      // queued waiters hear through the turn channel
	stamp   uint64    // hub stamp of the key's last wake event on its channel, 0 for none
	heard   []heard   // the latest releases heard on the key's channel, newest last, at most wakeHeard
	// The turns of a queued waiter: the nodes that have told it, since its last attempt
	// began, that it is the head of the key's queue there and the key is free (turnFrom),
	// and the releases (holder ids) they came from; turnStamp is the hub stamp of the last
	// time they made a quorum. turnUsed holds the last releases whose turns made a quorum:
	// their later turns (the slower nodes') are no news to the attempt they started, nor,
	// once that attempt has won, where it took the key. turnAttempt holds those of the
	// attempt in flight (from turnReset to turnDone), and turnLate the nodes whose turns of
	// them came meanwhile: if that attempt fails, the release reached those nodes after it
	// did, and they count after all; if it wins, those of the nodes where it did not take
	// the key count.
	turnSeen    []bool
	turnCount   int
	turnIDs     []string
	turnKicked  bool
	turnStamp   uint64
	turnUsed    []usedTurn // at most wakeHeard, newest last
	turnAttempt []string
	turnLate    []bool
	turnBefore  []bool // the nodes counted when the attempt in flight began (turnReset)
	// crowded: a woken attempt on the key lost to another contender lately, so several
	// waiters answer each release (see seniorityDelay).
	crowded bool
	caught  bool // the catch-up kick of subscribed was given
	// watchers are the observers of the key (watch): each is signalled (buffered 1, so
	// signals coalesce) at every wake event on the key's channel and at every node's
	// confirmation of its subscription.
	watchers []chan struct{}
	// listening has, per node, whether the node has confirmed the key's channel subscription
	// since its connection last failed: observers poll faster while fewer than a quorum listen.
	listening []bool
}

// heard is one release of a key (one holder id) as the nodes announce it.
type heard struct {
	id     string
	nodes  []bool // the nodes whose announcement arrived
	count  int
	kicked bool // counted as a wake event already
}

// wakeHeard is how many releases of one key a wakeSub remembers, so that a late
// announcement of an older release does not restart the count of the newest one.
const wakeHeard = 4

// wakeNode is the subscription connection to one node, with its two goroutines: sync
// brings the node's subscriptions in line with the hub's keys, read takes the messages.
type wakeNode struct {
	h     *wakeHub
	g     *wakeGen
	i     int
	ps    *redis.PubSub
	dirty chan struct{} // buffered 1: the hub's key set changed
	// failing is set by whichever of the subscriber and the reader sees a failure first and
	// cleared by the reader's next message, so that one failure is logged once, not once by
	// each of them.
	failing atomic.Bool
}

// wakeChannel is the pub/sub channel on which a release of key is announced.
func wakeChannel(key string) string { return WakeChannelPrefix + key }

// turnChannel is the channel on which this Client hears that it is the head of a key's
// queue (queue.go).
func turnChannel(clientID string) string { return turnChannelPrefix + clientID }

// subscribe registers a waiter for key: the key's channel, or for a queued waiter (turn)
// this Client's turn channel, is subscribed on every node (asynchronously: nothing here
// waits for a node). No-op when wake-ups are off or the client is closed. Every subscribe
// needs one unsubscribe.
func (h *wakeHub) subscribe(key string, turn bool) {
	if h.off {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.subscribeLocked(key, turn)
}

// subscribeLocked is subscribe with h.mu held, the hub neither off nor closed; it returns
// the key's subscription.
func (h *wakeHub) subscribeLocked(key string, turn bool) *wakeSub {
	if h.gen == nil {
		h.startLocked()
	}
	if h.subs == nil {
		h.subs = map[string]*wakeSub{}
	}
	s := h.subs[key]
	if s == nil {
		s = &wakeSub{}
		h.subs[key] = s
	}
	switch {
	case turn && !s.turn:
		s.turn = true
		s.caught = s.caught || h.turnActive // no release can slip in before the subscription
		h.turnSubs++
		if !h.turnWanted {
			h.turnWanted = true
			h.dirtyLocked()
		}
	case !turn && !s.keyChan:
		s.keyChan = true
		h.dirtyLocked()
	}
	s.refs++
	return s
}

// watch subscribes an observer to key's channel (Election.Observe): ch is signalled once a
// quorum of nodes has announced a release or a proclamation of key (heardFrom), and each
// time a node confirms the subscription, for what was announced before it listened. A
// signal says only "read again": it carries nothing, and signals coalesce. ok is false when
// wake-ups are off or the Client is closing (the observer polls instead); otherwise stop,
// called once, ends the watch.
func (h *wakeHub) watch(key string) (ch <-chan struct{}, stop func(), ok bool) {
	if h.off {
		return nil, nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false
	}
	s := h.subscribeLocked(key, false)
	c := make(chan struct{}, 1)
	s.watchers = append(s.watchers, c)
	return c, func() {
		h.mu.Lock()
		if s := h.subs[key]; s != nil {
			s.watchers = slices.DeleteFunc(s.watchers, func(w chan struct{}) bool { return w == c })
		}
		h.mu.Unlock()
		h.unsubscribe(key)
	}, true
}

// listening reports whether a quorum of nodes has confirmed key's channel subscription and
// not failed since: announcements of key can be heard.
func (h *wakeHub) listening(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	if s == nil {
		return false
	}
	n := 0
	for _, l := range s.listening {
		if l {
			n++
		}
	}
	return n >= h.quorum
}

// deaf records that node's subscription connection failed: none of its channels is heard
// until it confirms them again (go-redis subscribes again when it reconnects).
func (h *wakeHub) deaf(node int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if s.listening != nil {
			s.listening[node] = false
		}
	}
}

// signalLocked signals the watchers of s, with h.mu held.
func signalLocked(s *wakeSub) {
	for _, w := range s.watchers {
		select {
		case w <- struct{}{}:
		default: // a signal is pending already
		}
	}
}

// unsubscribe ends a subscribe; the key's channel stays subscribed for the linger time
// after its last waiter left.
func (h *wakeHub) unsubscribe(key string) {
	if h.off {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[key]; s != nil && s.refs > 0 {
		s.refs--
		if s.refs == 0 {
			s.idle = time.Now()
		}
	}
}

// mark returns the current stamp: a later since(key, mark) reports the wake events of key
// after this call.
func (h *wakeHub) mark() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stamp
}

// since reports whether key had a wake event after mark was taken: for a queued waiter
// (turn) one that made it the head, else a release announced on the key's channel.
func (h *wakeHub) since(key string, mark uint64, turn bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	if s == nil {
		return false
	}
	if turn {
		return s.turnStamp > mark
	}
	return s.stamp > mark
}

// heardFrom records node's announcement of a release of key by holder id on the key's
// channel. The head is kicked once a quorum of nodes has announced it: only then has the
// key gone from a quorum, so that an attempt can succeed; one woken by the first node alone
// could reach the others before the release does, fail, and then wait its whole pause. It
// wakes the waiters of multi-key sets that contain key, and the key's own head unless that
// one is queued (it waits to be told its turn: turnFrom).
func (h *wakeHub) heardFrom(key, id string, node int) {
	h.mu.Lock()
	s := h.subs[key]
	if s == nil {
		h.mu.Unlock()
		return
	}
	r := heardOf(&s.heard, id, len(h.nodes))
	if !r.nodes[node] {
		r.nodes[node] = true
		r.count++
	}
	if r.kicked || r.count < h.quorum {
		h.mu.Unlock()
		return
	}
	r.kicked = true
	h.stamp++
	s.stamp = h.stamp
	single := !s.turn
	signalLocked(s)
	h.mu.Unlock()
	h.waiters.kick(key, false, single, true)
}

// usedTurn is a release whose turns made a quorum and kicked an attempt (wakeSub.turnUsed).
// took is nil until that attempt has won, and then has the nodes where it took the key: the
// release's turns from the other nodes are news to the next waiter here, since the attempt
// changed nothing there (its call was refused before the release came, or never written, or
// not answered yet when it won). They are fewer than a quorum, since the attempt won on a
// quorum, so they cannot kick a waiter alone while the lock is held.
type usedTurn struct {
	id   string
	took []bool
}

// usedTurnOf returns s's record of the release id among the used ones, or nil.
func (s *wakeSub) usedTurnOf(id string) *usedTurn {
	for i := range s.turnUsed {
		if s.turnUsed[i].id == id {
			return &s.turnUsed[i]
		}
	}
	return nil
}

// countTurnLocked counts node's turn towards the next kick. Called with the hub's mu held.
func (s *wakeSub) countTurnLocked(node, nodes int) {
	if s.turnSeen == nil {
		s.turnSeen = make([]bool, nodes)
	}
	if !s.turnSeen[node] {
		s.turnSeen[node] = true
		s.turnCount++
	}
}

// turnFrom records that node has told this Client's queued waiter for key that it is the
// head of the key's queue there, with the key free, after the release (or undo, or leave)
// id: a message on the turn channel, or the reply of our own release or undo. Once a
// quorum of nodes has, since the waiter's last attempt began (turnReset), it is kicked: an
// attempt can succeed now. Nodes are counted, not releases, so that the nodes freed by two
// contenders' undos after a split vote add up; but the releases whose turns made a quorum
// are remembered, and their late turns (from the nodes that answered after the attempt
// began) ignored, else they would count towards the next turn and kick a head that has just
// attempted, or leave the key's turn marked as given when the next head is waiting. If that
// attempt fails, the late turns count after all (turnDone).
func (h *wakeHub) turnFrom(key, id string, node int) {
	h.mu.Lock()
	s := h.subs[key]
	if s == nil || !s.turn {
		h.mu.Unlock()
		return
	}
	if u := s.usedTurnOf(id); u != nil {
		switch {
		case slices.Contains(s.turnAttempt, id):
			if s.turnLate == nil {
				s.turnLate = make([]bool, len(h.nodes))
			}
			s.turnLate[node] = true
			h.mu.Unlock()
			return
		case u.took == nil || u.took[node]:
			h.mu.Unlock()
			return
		}
		// The attempt it kicked won without taking the key here: news to the next waiter.
	}
	s.countTurnLocked(node, len(h.nodes))
	if !slices.Contains(s.turnIDs, id) {
		s.turnIDs = append(s.turnIDs, id)
	}
	h.turnKickLocked(key, s)
}

// soonFrom hears a node tell this Client that its place is the runner-up of key's queue: the
// head was just told its turn there and nobody heard it (lua/queue.lua, qtell), most likely
// because the head's process died. The nodes pass the turn on only at an attempt made once
// the key has been free for the grace, and ours, drawn when our place was further back, may
// be up to queuePollMax away; so the queued waiter tries again by soonAfter (the grace and
// half of it again) at the latest. If the head is alive after all (only its connection to
// that node was down), it takes the key within the grace and that attempt is refused. Like a
// turn, a notice never decides anything: a lost one costs what it cost before, a forged one
// an attempt.
func (h *wakeHub) soonFrom(key string) {
	h.mu.Lock()
	s := h.subs[key]
	queued := s != nil && s.turn
	h.mu.Unlock()
	if queued {
		h.waiters.soon(key, time.Now().Add(h.soonAfter))
	}
}

// turnKickLocked kicks key's queued waiter when the turns counted make a quorum and have not
// kicked it yet, marking their releases used. It is called with h.mu held and unlocks it.
func (h *wakeHub) turnKickLocked(key string, s *wakeSub) {
	if s.turnKicked || s.turnCount < h.quorum {
		h.mu.Unlock()
		return
	}
	s.turnKicked = true
	for _, used := range s.turnIDs {
		if u := s.usedTurnOf(used); u != nil {
			u.took = nil // the attempt it kicks now answers for it everywhere
			continue
		}
		if len(s.turnUsed) == wakeHeard {
			s.turnUsed = append(s.turnUsed[:0], s.turnUsed[1:]...)
		}
		s.turnUsed = append(s.turnUsed, usedTurn{id: used})
	}
	h.stamp++
	s.turnStamp = h.stamp
	h.mu.Unlock()
	h.waiters.kick(key, false, true, false)
}

// turnReset forgets the turns of key's queued waiter: it is about to make an attempt, which
// answers for every node that told it its turn before. The releases that kicked it are the
// attempt's (turnAttempt) until turnDone.
func (h *wakeHub) turnReset(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	if s == nil {
		return
	}
	s.turnAttempt = s.turnAttempt[:0]
	if s.turnKicked {
		s.turnAttempt = append(s.turnAttempt, s.turnIDs...)
	}
	clear(s.turnLate)
	s.turnBefore = append(s.turnBefore[:0], s.turnSeen...)
	if s.turnCount > 0 || s.turnKicked {
		s.clearTurns()
	}
}

// clearTurns forgets the turns counted towards the next kick. Called with the hub's mu held.
func (s *wakeSub) clearTurns() {
	clear(s.turnSeen)
	s.turnIDs = s.turnIDs[:0]
	s.turnCount, s.turnKicked = 0, false
}

// turnDone settles the turns of key's queued waiter once its attempt is decided. An attempt
// that won took the key: what was counted while it ran is spent, and the count starts afresh
// for the next waiter here; a kick left standing would swallow the turns of this lock's own
// release until that waiter's next attempt, a retry pause away. But the releases that kicked
// it remember where it took the key (took, per node; nil for every node): their turns from
// the other nodes, those that came while it ran (turnLate) and those still to come, are the
// next waiter's (usedTurn). An attempt that failed frees the releases that kicked it: their
// turns that came from the slower nodes while it ran count now, and so do their later ones,
// since the release reached those nodes after the attempt did; with the undos' turns they
// may make a quorum at once.
//
// An attempt that the caller's context ended before any node answered it (cancelled)
// answered for nothing: the turns counted when it began count again, so that the next waiter here is
// kicked at once (waitQueues.leave hands it the kick); before, it slept its retry pause with
// the key free and its Client the head on every node.
func (h *wakeHub) turnDone(key string, won bool, took []bool, cancelled bool) {
	h.mu.Lock()
	s := h.subs[key]
	if s == nil || !s.turn {
		h.mu.Unlock()
		return
	}
	ids := s.turnAttempt
	s.turnAttempt = s.turnAttempt[:0]
	if won {
		s.clearTurns()
		for _, id := range ids {
			if u := s.usedTurnOf(id); u != nil {
				u.took = append(u.took[:0], took...)
				if took == nil {
					u.took = nil
				}
			}
		}
	} else {
		s.turnUsed = slices.DeleteFunc(s.turnUsed, func(u usedTurn) bool { return slices.Contains(ids, u.id) })
	}
	late := false
	for node, l := range s.turnLate {
		if l && (!won || took != nil && !took[node]) {
			late = true
			s.countTurnLocked(node, len(h.nodes))
		}
	}
	clear(s.turnLate)
	if !won && cancelled {
		for node, b := range s.turnBefore {
			if b {
				late = true
				s.countTurnLocked(node, len(h.nodes))
			}
		}
	}
	if late {
		for _, id := range ids {
			if !slices.Contains(s.turnIDs, id) {
				s.turnIDs = append(s.turnIDs, id)
			}
		}
	}
	h.turnKickLocked(key, s)
}

// ownRelease records a release of key by this Client (holder id), confirmed by a quorum:
// the waiters here are kicked at once, and the nodes' announcements of it on the key's
// channel are dropped. A queued head (one key) is not kicked here: the nodes' replies say
// whether it is the head now (turnFrom), and if it is not, another process's waiter is,
// and has been told; a multi-key lock's release (queued false) does kick it, since the nodes
// tell the releasing Client's own waiter no turn. When a quorum of the announcements came
// first, heardFrom has kicked everyone but a queued head already, so only that head is
// kicked here, if this release must: a second kick would send waiters to the nodes for a
// release already answered (TestOwnReleaseAfterItsEcho).
func (h *wakeHub) ownRelease(key, id string, queued bool) {
	single, sets := !queued, true
	h.mu.Lock()
	if s := h.subs[key]; s != nil { // else nobody waits for key itself; sets may
		r := heardOf(&s.heard, id, len(h.nodes))
		if r.kicked { // heardFrom kicked the sets, and the key's head unless s.turn
			single, sets = single && s.turn, false
		} else {
			r.kicked = true
			h.stamp++
			s.stamp = h.stamp
		}
	}
	h.mu.Unlock()
	if single || sets {
		h.waiters.kick(key, false, single, sets)
	}
}

// heardOf returns list's record of the release by holder id, adding one (and dropping the
// oldest beyond wakeHeard) when there is none.
func heardOf(list *[]heard, id string, nodes int) *heard {
	l := *list
	for i := range l {
		if l[i].id == id {
			return &l[i]
		}
	}
	if len(l) == wakeHeard {
		l = append(l[:0], l[1:]...)
	}
	l = append(l, heard{id: id, nodes: make([]bool, nodes)})
	*list = l
	return &l[len(l)-1]
}

// subscribed records that key's channel became active on a node, and kicks the head: a
// release between its last attempt and the subscription would otherwise be missed, so it
// tries once more.
func (h *wakeHub) subscribed(key string, node int) {
	h.mu.Lock()
	s := h.subs[key]
	if s != nil {
		if s.listening == nil {
			s.listening = make([]bool, len(h.nodes))
		}
		s.listening[node] = true
	}
	first := s != nil && !s.caught && !s.turn
	if first {
		s.caught = true
	}
	if s != nil {
		signalLocked(s) // an observer reads again: a change may have come before this node listened
	}
	h.mu.Unlock()
	if first {
		// Once per subscription, when its first node is listening: the head tries once more,
		// for a release announced before that. It is not a wake-up by a release.
		h.waiters.catchUp(key)
	}
}

// turnSubscribed records that the turn channel became active on node: once a quorum of nodes
// listens, the heads of the queued keys that were waiting before try once more, as
// subscribed does for a key. Not at the first node: a turn told by the others before they
// listened was lost, and a head that had its catch-up attempt by then waited its retry
// pause, with the key free and itself the head on every node (a newcomer's stress run, at
// its start).
func (h *wakeHub) turnSubscribed(node int) {
	h.mu.Lock()
	if h.turnListen == nil {
		h.turnListen = make([]bool, len(h.nodes))
	}
	h.turnListen[node] = true
	n := 0
	for _, l := range h.turnListen {
		if l {
			n++
		}
	}
	if n < h.quorum || !h.turnWanted {
		h.mu.Unlock()
		return
	}
	h.turnActive = true
	var keys []string
	for k, s := range h.subs {
		if s.turn && !s.caught {
			s.caught = true
			keys = append(keys, k)
		}
	}
	h.mu.Unlock()
	for _, k := range keys {
		h.waiters.catchUp(k)
	}
}

// crowded reports whether attempts made on a wake-up lately lost to other contenders:
// several waiters answer each release of key (see seniorityDelay).
func (h *wakeHub) crowded(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[key]
	return s != nil && s.crowded
}

// wokenAttempt records the outcome of an attempt made on a wake-up by a waiter that had
// lost losses such attempts before: a loss (to another contender) marks the key crowded, a
// win by a waiter that never lost shows that nobody older was waiting and clears the mark.
func (h *wakeHub) wokenAttempt(key string, won bool, losses int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[key]; s != nil && (!won || losses == 0) {
		s.crowded = !won
	}
}

// startLocked makes a generation: the per-node PubSubs (no I/O until the first
// SUBSCRIBE), their goroutines and the sweeper.
func (h *wakeHub) startLocked() {
	g := &wakeGen{nodes: make([]*wakeNode, len(h.nodes))}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	h.turnCh = turnChannel(h.id)
	h.gen, h.idleSince = g, time.Time{}
	for i := range h.nodes {
		n := &wakeNode{h: h, g: g, i: i, ps: h.nodes[i].Subscribe(g.ctx), dirty: make(chan struct{}, 1)}
		g.nodes[i] = n
		h.wg.Add(2)
		go n.sync()
		go n.read()
	}
	h.wg.Add(1)
	go h.sweep(g)
}

func (h *wakeHub) dirtyLocked() {
	if h.gen == nil {
		return
	}
	for _, n := range h.gen.nodes {
		select {
		case n.dirty <- struct{}{}:
		default:
		}
	}
}

// sweep drops the subscriptions whose last waiter left more than the linger time ago, and
// ends generation g once no channel has been wanted for pubsubLinger.
func (h *wakeHub) sweep(g *wakeGen) {
	defer h.wg.Done()
	h.mu.Lock()
	every := max(min(h.linger, h.pubsubLinger)/2, time.Millisecond)
	h.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-g.ctx.Done():
			return
		}
		if h.sweepOnce(g) {
			g.end()
			return
		}
	}
}

// sweepOnce is one round of sweep; it reports whether g is to end (it is then no longer the
// hub's generation).
func (h *wakeHub) sweepOnce(g *wakeGen) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != g {
		return true
	}
	now := time.Now()
	dropped := false
	for k, s := range h.subs {
		if s.refs == 0 && now.Sub(s.idle) >= h.linger {
			delete(h.subs, k)
			if s.turn {
				if h.turnSubs--; h.turnSubs == 0 {
					h.turnIdle = now
				}
			}
			dropped = dropped || s.keyChan
		}
	}
	if h.turnWanted && h.turnSubs == 0 && now.Sub(h.turnIdle) >= h.turnLinger {
		h.turnWanted, h.turnActive = false, false
		clear(h.turnListen)
		dropped = true
	}
	if dropped {
		h.dirtyLocked()
	}
	if len(h.subs) > 0 || h.turnWanted {
		h.idleSince = time.Time{}
		return false
	}
	if h.idleSince.IsZero() {
		h.idleSince = now
		return false
	}
	if now.Sub(h.idleSince) < h.pubsubLinger {
		return false
	}
	h.gen = nil // the next subscription makes a new generation
	return true
}

// end stops the generation's goroutines and closes its connections; the hub's wg waits
// for them.
func (g *wakeGen) end() {
	g.cancel() // a dial under way gives up, so the PubSubs' locks come free
	for _, n := range g.nodes {
		_ = n.ps.Close() // a blocked read fails, so read returns
	}
}

// channels returns the channels the nodes should be subscribed to now.
func (h *wakeHub) channels() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for k, s := range h.subs {
		if s.keyChan {
			out[wakeChannel(k)] = true
		}
	}
	if h.turnWanted {
		out[h.turnCh] = true
	}
	return out
}

// close stops every subscription and waits for the goroutines. Idempotent; later
// subscribes are no-ops.
func (h *wakeHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	g := h.gen
	h.gen = nil
	h.mu.Unlock()
	if g != nil {
		g.end()
	}
	h.wg.Wait()
}

// sync keeps the node's subscriptions equal to the hub's channel set. go-redis remembers
// what was asked even when the node cannot be reached, and subscribes again on every
// reconnection, so what was asked is what the node will have. A failure is logged when the
// node starts failing, not at every change of the set.
func (n *wakeNode) sync() {
	defer n.h.wg.Done()
	ctx := n.g.ctx
	have := map[string]bool{}
	for {
		select {
		case <-n.dirty:
		case <-ctx.Done():
			return
		}
		want := n.h.channels()
		var add, drop []string
		for ch := range want {
			if !have[ch] {
				add = append(add, ch)
				have[ch] = true
			}
		}
		for ch := range have {
			if !want[ch] {
				drop = append(drop, ch)
				delete(have, ch)
			}
		}
		var err error
		if len(add) > 0 {
			err = n.ps.Subscribe(ctx, add...)
		}
		if len(drop) > 0 {
			err = errors.Join(err, n.ps.Unsubscribe(ctx, drop...))
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && n.failing.CompareAndSwap(false, true) {
			n.h.logger.Debug("redlock: wake-up subscription failed; waiters poll this node until it is back", "node", n.i, "err", err)
		}
	}
}

// read takes the node's pub/sub traffic: a message is a release (wakeHub.heardFrom) or a
// turn (wakeHub.turnFrom), a subscribe confirmation an active subscription. After any
// failure (the node down, a connection or its AUTH refused, an error reply) it pauses before
// the next read, and go-redis dials again then: the pause doubles from wakeBackoffMin to
// wakeBackoffMax while failures go on, so a node that refuses every connection costs a
// dial every few seconds, not a loop. The failure is logged once when it starts (by this
// reader or by the subscriber, whichever sees it first) and once when the node answers again.
func (n *wakeNode) read() {
	defer n.h.wg.Done()
	ctx := n.g.ctx
	var backoff time.Duration
	for {
		msg, err := n.ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if n.failing.CompareAndSwap(false, true) {
				n.h.logger.Debug("redlock: wake-up subscription failed; waiters poll this node until it is back", "node", n.i, "err", err)
			}
			n.h.deaf(n.i)
			backoff = min(max(2*backoff, wakeBackoffMin), wakeBackoffMax)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if n.failing.CompareAndSwap(true, false) {
			n.h.logger.Debug("redlock: wake-up subscription is back", "node", n.i)
		}
		backoff = 0
		n.h.dispatch(msg, n.i)
	}
}

// dispatch hands one message of node i's subscription to the hub.
func (h *wakeHub) dispatch(msg any, i int) {
	switch m := msg.(type) {
	case *redis.Message:
		if m.Channel == h.turnCh {
			if p, notice := strings.CutPrefix(m.Payload, runnerUpMark); notice {
				if _, key, ok := turnPayload(p); ok {
					h.soonFrom(key)
				}
			} else if id, key, ok := turnPayload(m.Payload); ok {
				h.turnFrom(key, id, i)
			}
		} else if key, ok := strings.CutPrefix(m.Channel, WakeChannelPrefix); ok {
			h.heardFrom(key, m.Payload, i)
		}
	case *redis.Subscription:
		switch {
		case m.Kind != "subscribe":
		case m.Channel == h.turnCh:
			h.turnSubscribed(i)
		default:
			if key, ok := strings.CutPrefix(m.Channel, WakeChannelPrefix); ok {
				h.subscribed(key, i)
			}
		}
	}
}
