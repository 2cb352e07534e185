package redlock

import (
	"strconv"
	"strings"
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

// FencePrefix starts the name of every fence counter key. Lock keys may not start with it.
const FencePrefix = "redlock:fence:"

// hashTag returns the part of key that Redis Cluster hashes to find its slot: the text
// between the first '{' and the first '}' after it, when that text is not empty.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

// fenceKey returns the name of the counter key of a lock key, in the same cluster hash
// slot: FencePrefix + key when the key has a hash tag (the prefix has no braces, so the tag
// stays the first one), else FencePrefix + "{" + key + "}", whose tag is the whole key.
// A key that has no hash tag but contains '}' cannot be wrapped that way and is rejected.
func fenceKey(key string) (string, error) {
	if key == "" {
		return "", invalidf("key is empty")
	}
	if strings.HasPrefix(key, FencePrefix) {
		return "", invalidf("key %q starts with the reserved prefix %q", key, FencePrefix)
	}
	if _, ok := hashTag(key); ok {
		return FencePrefix + key, nil
	}
	if strings.IndexByte(key, '}') >= 0 {
		return "", invalidf("key %q contains '}' but no hash tag, so its fence counter cannot share its cluster slot; put a hash tag such as {name} in the key", key)
	}
	return FencePrefix + "{" + key + "}", nil
}

// counterSeed is the value a missing fence counter starts from: the client's clock in
// microseconds. Every node of one acquire gets the same seed, so a brand-new key still takes
// the one-round-trip fast path, and a counter that was lost restarts above every token
// issued before as long as clocks agree within the time between the two acquisitions
// (docs/design.md, "Seeding counters from the clock").
func counterSeed(now time.Time) int64 {
	s := now.UnixMicro()
	if s < 1 {
		s = 1
	}
	return s
}
