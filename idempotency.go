package redlock

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// IdempotencyKeyPrefix starts every key that [IdempotencyKey] and [Lock.IdempotencyKey]
// return; the 1 is the format's version.
const IdempotencyKeyPrefix = "rl1-"

// idempotencyDomain is hashed first, so that these digests cannot collide with SHA-256 digests
// made for another purpose over the same fields.
const idempotencyDomain = "redlock idempotency key v1"

// IdempotencyKey returns a key for the step named step of the acquisition of the lock named
// key that got token: the same for the same three values, different (with the strength of
// SHA-256) when any of them differs. Send it as the idempotency key of a call to a service
// that deduplicates on such a key but cannot check a fencing token, so that the service
// performs one holder's retries of that step once.
//
// A new holder after a takeover has a new token, and so a new key: used naively, a step that
// the old holder had already sent is sent again under another key, and performed twice. To
// get one key per step whatever the takeovers, record the key in the fenced store before
// the call and reuse a key recorded by an earlier holder (docs/fencing.md §6 and the example
// of [Lock.IdempotencyKey] show the pattern and why it holds).
//
// Format: [IdempotencyKeyPrefix] followed by the 64 lowercase hex digits of the SHA-256 of
// the ASCII string "redlock idempotency key v1" and then four fields: "token", key, the
// token in decimal, step; each field as its length in bytes (8 bytes, big-endian unsigned)
// followed by its bytes. The length prefixes keep ("a", "bc") and ("ab", "c") apart. The key
// is 68 characters of [0-9a-z-], safe in an HTTP header and in a URL.
//
// Errors: ErrInvalidArgument for an empty key or a zero token (the token of every lock of a
// Client made [WithoutFencing]: one key for every acquisition would make the service
// swallow a legitimate later call; [Lock.IdempotencyKey] derives from the holder id then).
// Pure function, safe for concurrent use.
func IdempotencyKey(key string, token Token, step string) (string, error) {
	if key == "" {
		return "", invalidf("idempotency key for an empty lock key")
	}
	if token == 0 {
		return "", invalidf("idempotency key for token 0 (a lock without fencing): it would be the same for every acquisition of %q", quoteKey(key))
	}
	return idempotencyKey("token", key, token.String(), step), nil
}

// IdempotencyKey returns the idempotency key of this acquisition for the named step: the
// key of the package function [IdempotencyKey] for the lock's key and token. For a lock of a
// Client made [WithoutFencing] (token 0) it is derived from the holder id ([Lock.ID], 128
// random bits, new for every acquisition) instead, in the same format with the first field
// "holder" and the id in place of the token: it deduplicates this holder's retries, but with
// no token there is no fenced store to record it in, so a takeover cannot be made to reuse
// it. Keys from tokens and from holder ids never coincide. It returns "" for a nil Lock.
// Safe for concurrent use; it sends nothing and does not check that the lock is still held.
func (l *Lock) IdempotencyKey(step string) string {
	if l == nil {
		return ""
	}
	if l.token == 0 {
		return idempotencyKey("holder", l.key, l.id, step)
	}
	return idempotencyKey("token", l.key, l.token.String(), step)
}

func idempotencyKey(fields ...string) string {
	h := sha256.New()
	h.Write([]byte(idempotencyDomain))
	for _, f := range fields {
		writeField(h, f)
	}
	return IdempotencyKeyPrefix + hex.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, f string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(f)))
	h.Write(n[:])
	h.Write([]byte(f))
}
