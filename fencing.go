package redlock

import (
	"strconv"
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

// fenceKey returns the name of the per-key fence counter of a lock key, in the key's cluster
// slot (slotKey). Lock keys may not start with any of reservedPrefixes.
func fenceKey(key string) (string, error) {
	return slotKey(FencePrefix, key, true, reservedPrefixes...)
}

// reservedPrefixes are the prefixes no lock key may start with: the library's own keys on
// the nodes (fence and slot counters, waiter queues) and RedisFence's token keys, which a
// lock key of that name would take over on a node that is also the store.
var reservedPrefixes = []string{FencePrefix, SlotCounterPrefix, HighestTokenPrefix, QueuePrefix, WaitersPrefix}

// derivedPrefixes start the keys the library derives from the names of semaphores,
// elections and read/write locks: lock keys given by callers may not start with them either
// (a caller's lock on an election's record would be overwritten by its leader), nor may those
// names, but the derived keys themselves are lock keys (newDerivedLockKeys) that Status reads.
var derivedPrefixes = []string{SemaphorePrefix, ElectionPrefix, LeaderPrefix, RWPrefix, ReadersPrefix, IntentPrefix, PhasePrefix}

// namePrefixes are the prefixes no name of a semaphore, election or read/write lock may
// start with.
var namePrefixes = append(append([]string(nil), reservedPrefixes...), derivedPrefixes...)

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
