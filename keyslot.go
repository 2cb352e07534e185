package redlock

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Keys, and the keys the library derives from them (fence counters, RedisFence's token
// keys), which must sit in the same Redis Cluster hash slot as the key they belong to, so
// that one script can touch both on a node that is a Redis Cluster.

// MaxKeyLen is the longest lock key (or fenced data key) accepted, in bytes. Redis itself
// takes keys up to 512 MB, but a lock key is a name: every acquire sends it (and its
// counter's name) to every node, and errors and logs mention it. 8 KiB leaves room for
// composite names and stops a runaway value at once, with ErrInvalidArgument.
const MaxKeyLen = 8 << 10

// quoteLimit is how many bytes of a key errors and log lines show.
const quoteLimit = 64

// quoteKey returns key for errors and logs: whole when short, else its first bytes and its
// length, so that a huge key never makes a huge message.
func quoteKey(key string) string {
	if len(key) <= quoteLimit {
		return key
	}
	return fmt.Sprintf("%s…(%d bytes)", key[:quoteLimit], len(key))
}

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

// slotKey derives the name of a key that belongs to key (prefix + something), in key's
// cluster slot, the same way for the fence counter and RedisFence's token key:
//
//   - key has a hash tag and is not all tag: prefix + key (the prefix has no braces, so
//     key's tag stays first);
//   - key has no '}': prefix + "{" + key + "}", whose tag is the whole key;
//   - key has a '}' but no hash tag (such as "a}b", "{}x" or "}{"), or, with split, is all
//     one hash tag ("{x}", whose first form is the second form's name for "x"): a short tag
//     with key's own slot is chosen from a table (slotTag), giving
//     prefix + prefix + "{" + tag + "}" + key. No key may start with prefix, so no key of
//     the first form can have this name, and key at the end keeps names distinct.
//
// Keys that are empty, longer than MaxKeyLen or start with one of the reserved prefixes are
// refused with ErrInvalidArgument.
//
// split says whether a key that is all one hash tag gets the third form (fence counters) or
// keeps the first (RedisFence's token keys; see highestKey).
func slotKey(prefix, key string, split bool, reserved ...string) (string, error) {
	if err := checkKey("key", key, reserved...); err != nil {
		return "", err
	}
	if _, ok := hashTag(key); ok && !(split && wholeTag(key)) {
		return prefix + key, nil
	}
	if strings.IndexByte(key, '}') < 0 {
		return prefix + "{" + key + "}", nil
	}
	return prefix + prefix + "{" + slotTag(keySlot(key)) + "}" + key, nil
}

// checkKey refuses, with ErrInvalidArgument, a key (or a name that follows a key's rules:
// what names it in the message, "key" or "semaphore name", say) that is empty, longer than
// MaxKeyLen or starts with one of the reserved prefixes.
func checkKey(what, key string, reserved ...string) error {
	if key == "" {
		return invalidf("%s is empty", what)
	}
	if len(key) > MaxKeyLen {
		return invalidf("%s %q is %d bytes, longer than MaxKeyLen (%d)", what, quoteKey(key), len(key), MaxKeyLen)
	}
	for _, p := range reserved {
		if strings.HasPrefix(key, p) {
			return invalidf("%s %q starts with the reserved prefix %q", what, quoteKey(key), p)
		}
	}
	return nil
}

// wholeTag reports whether key is "{" + t + "}" with t its hash tag: a key the first form of
// slotKey would name exactly as the second form names t.
func wholeTag(key string) bool {
	return len(key) > 2 && key[0] == '{' && strings.IndexByte(key, '}') == len(key)-1
}

// keySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of its hash tag, or of the
// whole key when it has none, modulo 16384 (redis.io, "Redis cluster specification").
func keySlot(key string) uint16 {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return crc16(key) & 16383
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	slotTagsOnce sync.Once
	slotTags     []string // per slot, a short string without braces that hashes to it
)

// slotTag returns a short tag whose slot is slot. The table is built on first use: the
// base-36 numbers 0, 1, 2, … are hashed until every slot has one (about 160 000 of them,
// a few milliseconds; the longest tag has 4 characters).
func slotTag(slot uint16) string {
	slotTagsOnce.Do(func() {
		tags := make([]string, 16384)
		for n, left := int64(0), len(tags); left > 0; n++ {
			s := strconv.FormatInt(n, 36)
			if i := crc16(s) & 16383; tags[i] == "" {
				tags[i] = s
				left--
			}
		}
		slotTags = tags
	})
	return slotTags[slot]
}

// nameOf inverts slotKey(prefix, name, true, namePrefixes...) == key, where rest is key
// without prefix: the name, or false when key is no such key.
func nameOf(prefix, rest, key string) (string, bool) {
	var cands []string
	switch {
	case strings.HasPrefix(rest, prefix): // prefix + prefix + "{" + tag + "}" + name
		if _, after, ok := strings.Cut(rest[len(prefix):], "}"); ok {
			cands = append(cands, after)
		}
	case len(rest) > 2 && rest[0] == '{' && rest[len(rest)-1] == '}': // prefix + "{" + name + "}"
		cands = append(cands, rest[1:len(rest)-1], rest)
	default: // prefix + name, name with a hash tag of its own
		cands = append(cands, rest)
	}
	for _, n := range cands {
		if k, err := slotKey(prefix, n, true, namePrefixes...); err == nil && k == key {
			return n, true
		}
	}
	return "", false
}
