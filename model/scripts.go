// Package model is an explicit-state model checker for the Redlock protocol of the root
// package: N nodes running the Lua scripts of lua/ as atomic steps, clients that acquire,
// raise, extend, heal and release as attempt.go and quorum.go do, a network that delays,
// reorders, duplicates and loses messages, and faults (a key expiring early, a node
// restarting empty). It searches every reachable state breadth first and checks claims U
// and O and, where docs/design.md §5.5 claims it, mutual exclusion after every step, and
// where asked the continuity of a late extend (§5.10) (docs/design.md §6). The package does not import the root package: the scripts below are
// written again in Go from the same rules, and TestRealModelScriptsMatchLua in the root package
// runs both on a real redis-server with the same inputs and compares the outputs.
package model

import "math"

// Counter is a fence counter on one node; 0 means missing (real counters are at least 1).
type Counter = int64

// MaxCounter is the largest counter value on Redis: its integers are int64, and counters.lua
// refuses to mint past it rather than wrap (docs/design.md §5.12).
const MaxCounter Counter = math.MaxInt64

// Failed is the reply of a script that ended with an error reply: it changed nothing (it
// checks everything before its first write). The client counts the node as failed, and its
// undo releases the node all the same (attempt.go), since an error may also be a lost reply.
const Failed Counter = -1

// ID is a holder id on one node; 0 means the lock key is absent.
type ID = int

// Key is what one node holds for one lock key: the holder of the lock key and the key's two
// counters as the calling client's layout sees them (Own is the counter its layout writes,
// Other the other layout's).
type Key struct {
	Holder ID
	Own    Counter
	Other  Counter
}

// SeedLead is how far ahead of the node's clock, in microseconds, a seed may be when it is
// written as a counter (counters.lua's SEED_LEAD; docs/design.md §5.6).
const SeedLead Counter = 10_000_000

// Rules are what the scripts check besides the keys. Max is the largest counter value: a
// counter at Max mints no more, and a seed, target or token above it is a bad argument. On
// Redis it is MaxCounter; a search lowers it, to reach it. Clock is the node's clock in
// microseconds (TIME): a seed more than SeedLead ahead of it is refused where it would become
// a counter's value; 0 for no clock, as for a node user without TIME, and in the search,
// whose seeds are never ahead of the nodes (Config.Refuse has any refusal instead).
type Rules struct {
	Max   Counter
	Clock Counter
}

// Redis is the rules as the scripts apply them on a Redis node, without the clock.
var Redis = Rules{Max: MaxCounter}

// seedOK reports whether seed may become a counter's value on this node.
func (r Rules) seedOK(seed Counter) bool { return r.Clock == 0 || seed <= r.Clock+SeedLead }

// arg reports whether v is a good seed, target or token: from 1 to Max.
func (r Rules) arg(v Counter) bool { return v >= 1 && v <= r.Max }

// mirror is the slot layout's rule: an existing other (per-key) counter below v is lifted to v.
func mirror(other *Counter, v Counter, slot bool) {
	if slot && *other != 0 && *other < v {
		*other = v
	}
}

// mint is counters.lua's mint: one more than the larger counter, at least the seed when the
// own counter is missing or the layout is slot; the own counter takes the token, and the slot
// layout mirrors it into an existing other counter. It reports false, and changes nothing,
// when a counter is at Max, or when the seed would be the token and is too far ahead of the
// node's clock.
func (r Rules) mint(k *Key, seed Counter, slot bool) (Counter, bool) {
	if k.Own >= r.Max || k.Other >= r.Max {
		return 0, false
	}
	var t Counter
	if k.Own != 0 {
		t = k.Own + 1
	}
	if k.Other != 0 && k.Other+1 > t {
		t = k.Other + 1
	}
	if (slot || k.Own == 0) && seed > t {
		if !r.seedOK(seed) {
			return 0, false
		}
		t = seed
	}
	k.Own = t
	mirror(&k.Other, t, slot)
	return t, true
}

// Acquire is acquire.lua: the token (>= 1) when the key was free or is already ours, 0 when
// another holder has it (the script returns minus the remaining TTL there, <= 0), else
// Failed (nothing changed) for a bad seed, when the token would pass Max, or when the seed
// would be the token and is too far ahead of the node's clock.
func (r Rules) Acquire(k *Key, id ID, seed Counter, slot bool) Counter {
	if k.Holder != 0 && k.Holder != id {
		return 0
	}
	if !r.arg(seed) {
		return Failed
	}
	v := *k
	if v.Holder != 0 {
		if v.Own != 0 {
			mirror(&v.Other, v.Own, slot)
			*k = v
			return v.Own
		}
	} else {
		v.Holder = id
	}
	t, ok := r.mint(&v, seed, slot)
	if !ok {
		return Failed
	}
	*k = v
	return t
}

// AcquireMulti is acquire_multi.lua with fencing: every key free or ours (reply 1 and the
// tokens), or nothing changes and the reply is 0 (a key is another holder's) or else Failed
// (a bad seed, or a token would pass Max). The keys may share counters (the slot counter of keys in
// one slot): the caller passes them as pointers into one store, and they are minted in order.
func (r Rules) AcquireMulti(keys []*Key, id ID, seed Counter, slot bool) (tokens []Counter, reply Counter) {
	for _, k := range keys {
		if k.Holder != 0 && k.Holder != id {
			return nil, 0
		}
	}
	if !r.arg(seed) {
		return nil, Failed
	}
	before := make([]Key, len(keys))
	for i, k := range keys {
		before[i] = *k
	}
	for _, k := range keys {
		taken := k.Holder == 0
		k.Holder = id
		if !taken && k.Own != 0 {
			mirror(&k.Other, k.Own, slot)
			tokens = append(tokens, k.Own)
			continue
		}
		t, ok := r.mint(k, seed, slot)
		if !ok {
			for i := len(keys) - 1; i >= 0; i-- { // the script checks all before it writes
				*keys[i] = before[i]
			}
			return nil, Failed
		}
		tokens = append(tokens, t)
	}
	return tokens, 1
}

// Raise is raise.lua: Failed for a bad target, 0 when the key is not ours (nothing changes),
// else 1 with the own counter lifted to the target if it was below (never lowered) and the
// target mirrored.
func (r Rules) Raise(k *Key, id ID, target Counter, slot bool) int64 {
	if !r.arg(target) {
		return Failed
	}
	if k.Holder != id {
		return 0
	}
	if k.Own == 0 || k.Own < target {
		k.Own = target
	}
	mirror(&k.Other, target, slot)
	return 1
}

// Heal is heal.lua for one key: Failed for a bad token or seed, 0 when another holder has the
// key (nothing changes); else the key is ours (set if it was absent), the own counter is
// lifted to the token (to the larger of seed and token when it was missing), mirrored, and
// the reply is 1; Failed, with nothing changed, when the seed would be written and is too
// far ahead of the node's clock.
func (r Rules) Heal(k *Key, id ID, token, seed Counter, slot bool) int64 {
	if !r.arg(token) || !r.arg(seed) {
		return Failed
	}
	if k.Holder != 0 && k.Holder != id {
		return 0
	}
	if k.Own == 0 && seed > token {
		if !r.seedOK(seed) {
			return Failed
		}
		token = seed
	}
	k.Holder = id
	if k.Own == 0 || k.Own < token {
		k.Own = token
	}
	mirror(&k.Other, token, slot)
	return 1
}

// Extend is extend.lua: 1 when the key is ours (its TTL is renewed), else 0; it never
// creates a key.
func Extend(k *Key, id ID) int64 {
	if k.Holder == id && id != 0 {
		return 1
	}
	return 0
}

// Release is release.lua: delete the key if it is ours (1), else 0.
func Release(k *Key, id ID) int64 {
	if k.Holder == id && id != 0 {
		k.Holder = 0
		return 1
	}
	return 0
}

// OldAcquire is the acquire script of a client from before the counter layouts: it knows
// only the per-key counter, which it INCRs, seeding it when it was missing; a resend returns
// the counter as it is. Here Own is the per-key counter.
func OldAcquire(k *Key, id ID, seed Counter) Counter {
	if k.Holder != 0 {
		if k.Holder != id {
			return 0
		}
		if k.Own != 0 {
			return k.Own
		}
	} else {
		k.Holder = id
	}
	if k.Own == 0 {
		k.Own = seed
	} else {
		k.Own++
	}
	return k.Own
}

// OldRaise is that client's raise: the per-key counter only.
func OldRaise(k *Key, id ID, target Counter) int64 {
	if k.Holder != id {
		return 0
	}
	if k.Own != 0 && k.Own > target {
		return -1
	}
	k.Own = target
	return 1
}
