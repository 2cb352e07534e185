package redlock

import (
	"strconv"
	"sync"
)

// The two layouts of fence counters on a node (docs/design.md §5.11), and the names of
// slot counters.

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
