package redlock

import (
	crand "crypto/rand"
	"encoding/hex"
)

// A holder id is the value a lock's keys hold on the nodes: 128 random bits, written as 32
// lowercase hex digits. Each acquire draws its own, so that a release or an extend can never
// touch a key that another holder wrote (docs/design.md §2).

// holderIDLen is the length of a holder id: 128 bits in hex.
const holderIDLen = 32

// newHolderID returns a random 128-bit holder id in hex. crypto/rand never fails (Go 1.24+).
func newHolderID() string {
	var b [holderIDLen / 2]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// IsHolderID reports whether v has the form of the holder ids that this library writes as a
// lock key's value: 32 lowercase hex digits. Tools that scan the nodes (redlock top) use it
// to tell lock keys from other keys; it says nothing about whether v's holder is alive.
func IsHolderID(v string) bool {
	if len(v) != holderIDLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
