package redlock

import (
	"strconv"
	"sync"
	"time"
)

// Token is a fencing token: a number minted on every successful acquire of a key, unique
// among all acquisitions of that key and larger than the token of any acquisition whose keys
// were gone before it began (docs/design.md gives the proof and its assumptions). A store
// that receives writes made under the lock must keep the highest token it has seen per
// resource and reject a write whose token is lower, checking and writing atomically
// (docs/design.md, "What the store must do").
//
// Tokens are seeded from the clock in microseconds, so they are about 1.8e15 today: they fit
// in an int64 and a PostgreSQL BIGINT and are exact in a JSON number.
type Token uint64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// FencePrefix starts the name of every per-key fence counter (the [KeyCounters] layout, and
// every counter written before the slot layout existed). Lock keys may not start with it.
const FencePrefix = "redlock:fence:"

// SlotCounterPrefix starts the name of every slot counter: the fence counter that all lock
// keys of one Redis Cluster hash slot share in the default layout, [SlotCounters]. A slot
// counter is named SlotCounterPrefix + "{" + tag + "}", with a short tag whose hash slot is
// the slot's, so a node holds at most 16 384 of them. Lock keys may not start with it.
const SlotCounterPrefix = "redlock:slot:"

// CounterLayout says which fence counters a Client mints its tokens from (docs/design.md
// §5.11). Both layouts read both counters of a key, so Clients of either layout, and of
// versions before layouts existed, can share the nodes and the keys: no token of a key is
// ever issued at or below one issued before for that key, whichever layout issued it.
type CounterLayout int

const (
	// SlotCounters, the default, mints every key's tokens from the counter of its hash slot
	// on each node: the fencing state of a node is at most 16 384 counters, whatever the
	// number of distinct keys. A token is at least the acquiring client's clock in
	// microseconds and one more than either counter; tokens of one key grow, with gaps.
	SlotCounters CounterLayout = iota
	// KeyCounters mints each key's tokens from a counter of its own, as every version before
	// SlotCounters did: consecutive tokens per key (one more per acquisition, after the
	// first, seeded from the clock), at the price of one counter per distinct key per node
	// for the counter's idle TTL ([WithCounterIdleTTL]; about 140 bytes each).
	KeyCounters
)

// String returns "slot" or "key".
func (l CounterLayout) String() string {
	switch l {
	case SlotCounters:
		return "slot"
	case KeyCounters:
		return "key"
	}
	return "CounterLayout(" + strconv.Itoa(int(l)) + ")"
}

// fenceKey returns the name of the per-key fence counter of a lock key, in the key's cluster
// slot (slotKey). Lock keys may not start with FencePrefix or SlotCounterPrefix.
func fenceKey(key string) (string, error) {
	return slotKey(FencePrefix, key, true, FencePrefix, SlotCounterPrefix)
}

// slotCounter returns the name of the slot counter of a valid lock key: the same string for
// every key of one hash slot, built once per slot.
func slotCounter(key string) string {
	slot := keySlot(key)
	slotCountersOnce.Do(func() {
		names := make([]string, 16384)
		for i := range names {
			names[i] = SlotCounterPrefix + "{" + slotTag(uint16(i)) + "}"
		}
		slotCounterNames = names
	})
	return slotCounterNames[slot]
}

var (
	slotCountersOnce sync.Once
	slotCounterNames []string
)

// counterSeed is the acquiring client's clock in microseconds: the least token of an
// acquisition with the slot layout, and the value a missing per-key counter starts from.
// Every node of one acquire gets the same seed, so a brand-new key, and with the slot layout
// nearly every key, takes the one-round-trip fast path, and a counter that was lost restarts
// above every token issued before as long as clocks agree within the time between the two
// acquisitions (docs/design.md §5.6).
func counterSeed(now time.Time) int64 {
	s := now.UnixMicro()
	if s < 1 {
		s = 1
	}
	return s
}
