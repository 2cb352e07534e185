// Package model is an explicit-state model checker for the Redlock protocol of the root
// package: N nodes running the Lua scripts of lua/ as atomic steps, clients that acquire,
// raise, extend, heal and release as attempt.go and quorum.go do, a network that delays,
// reorders, duplicates and loses messages, and faults (a key expiring early, a node
// restarting empty). It searches every reachable state breadth first and checks claims U
// and O and, where docs/design.md §5.5 claims it, mutual exclusion after every step, and
// where asked the continuity of a late extend (§5.10) (docs/design.md §6). The package does not import the root package: the scripts below are
// written again in Go from the same rules, and TestModelScriptsMatchLua in the root package
// runs both on a real redis-server with the same inputs and compares the outputs.
package model

// Counter is a fence counter on one node; 0 means missing (real counters are at least 1).
type Counter = int64

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

// mirror is the slot layout's rule: an existing other (per-key) counter below v is lifted to v.
func mirror(other *Counter, v Counter, slot bool) {
	if slot && *other != 0 && *other < v {
		*other = v
	}
}

// mint is counters.lua's mint: one more than the larger counter, at least the seed when the
// own counter is missing or the layout is slot; the own counter takes the token, and the slot
// layout mirrors it into an existing other counter.
func mint(k *Key, seed Counter, slot bool) Counter {
	var t Counter
	if k.Own != 0 {
		t = k.Own + 1
	}
	if k.Other != 0 && k.Other+1 > t {
		t = k.Other + 1
	}
	if (slot || k.Own == 0) && seed > t {
		t = seed
	}
	k.Own = t
	mirror(&k.Other, t, slot)
	return t
}

// Acquire is acquire.lua: the token (>= 1) when the key was free or is already ours, 0 when
// another holder has it (the script returns minus the remaining TTL there, <= 0).
func Acquire(k *Key, id ID, seed Counter, slot bool) Counter {
	if k.Holder != 0 {
		if k.Holder != id {
			return 0
		}
		if k.Own != 0 {
			mirror(&k.Other, k.Own, slot)
			return k.Own
		}
	} else {
		k.Holder = id
	}
	return mint(k, seed, slot)
}

// AcquireMulti is acquire_multi.lua with fencing: every key free or ours, or nothing changes
// and ok is false. The keys may share counters (the slot counter of keys in one slot): the
// caller passes them as pointers into one store, and they are minted in order.
func AcquireMulti(keys []*Key, id ID, seed Counter, slot bool) (tokens []Counter, ok bool) {
	for _, k := range keys {
		if k.Holder != 0 && k.Holder != id {
			return nil, false
		}
	}
	for _, k := range keys {
		taken := k.Holder == 0
		k.Holder = id
		if !taken && k.Own != 0 {
			mirror(&k.Other, k.Own, slot)
			tokens = append(tokens, k.Own)
			continue
		}
		tokens = append(tokens, mint(k, seed, slot))
	}
	return tokens, true
}

// Raise is raise.lua: 0 when the key is not ours (nothing changes), else 1 with the own
// counter lifted to the target if it was below (never lowered) and the target mirrored.
func Raise(k *Key, id ID, target Counter, slot bool) int64 {
	if k.Holder != id {
		return 0
	}
	if k.Own == 0 || k.Own < target {
		k.Own = target
	}
	mirror(&k.Other, target, slot)
	return 1
}

// Heal is heal.lua for one key: 0 when another holder has the key (nothing changes); else
// the key is ours (set if it was absent), the own counter is lifted to the token (to the
// larger of seed and token when it was missing), mirrored, and the reply is 1.
func Heal(k *Key, id ID, token, seed Counter, slot bool) int64 {
	if k.Holder != 0 && k.Holder != id {
		return 0
	}
	k.Holder = id
	if k.Own == 0 && seed > token {
		token = seed
	}
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
