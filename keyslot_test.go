package redlock

import (
	"errors"
	"strings"
	"testing"
)

// redisSlot computes a key's Redis Cluster slot independently of keyslot.go, from the
// cluster specification: CRC16/XMODEM with a lookup table, of the hash tag if the key has a
// non-empty one, modulo 16384. TestRealFenceKeySlot checks both against CLUSTER KEYSLOT.
func redisSlot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return crc % 16384
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// TestSlotTags: every slot has a tag, without braces, that hashes to it.
func TestSlotTags(t *testing.T) {
	for slot := range uint16(16384) {
		tag := slotTag(slot)
		if tag == "" || strings.ContainsAny(tag, "{}") || len(tag) > 4 || redisSlot(tag) != slot {
			t.Fatalf("slot %d: tag %q (slot %d)", slot, tag, redisSlot(tag))
		}
	}
}

// FuzzSlotKey: for every non-empty key the library accepts, the fence counter and the
// token key hash to the key's own slot, both are made by one function, two different keys
// never share a counter, and share a token key only as "x" and "{x}" (highestKey says why). A rejected key is rejected with
// ErrInvalidArgument by both.
func FuzzSlotKey(f *testing.F) {
	for _, s := range []string{"orders:42", "{user1}:lock", "a{b", "a}b", "{}x", "}{", "}", "{}", "{{x}}",
		"a{b}c{d}", "payout:é:日本", "redlock:fence:x", "redlock:highest:x", "redlock:slot:{x}", "\x00}", strings.Repeat("}", 300)} {
		f.Add(s, s+"}")
		f.Add(s, "{"+s+"}") // a key and the same key as a whole hash tag
	}
	f.Add("{x}", "x")
	f.Add("{a{b}", "a{b")
	f.Fuzz(func(t *testing.T, a, b string) {
		fa, errA := fenceKey(a)
		ha, errH := highestKey(a)
		if a == "" || len(a) > MaxKeyLen || strings.HasPrefix(a, FencePrefix) || strings.HasPrefix(a, SlotCounterPrefix) ||
			strings.HasPrefix(a, HighestTokenPrefix) {
			if !errors.Is(errA, ErrInvalidArgument) || !errors.Is(errH, ErrInvalidArgument) {
				t.Fatalf("key %q: fenceKey %q, %v; highestKey %q, %v; want ErrInvalidArgument", a, fa, errA, ha, errH)
			}
			return
		}
		if errA != nil {
			t.Fatalf("fenceKey(%q): %v", a, errA)
		}
		if errH != nil {
			t.Fatalf("highestKey(%q): %v", a, errH)
		}
		if redisSlot(fa) != redisSlot(a) {
			t.Fatalf("key %q in slot %d, its counter %q in slot %d", a, redisSlot(a), fa, redisSlot(fa))
		}
		if errH == nil && redisSlot(ha) != redisSlot(a) {
			t.Fatalf("key %q in slot %d, its token key %q in slot %d", a, redisSlot(a), ha, redisSlot(ha))
		}
		if !strings.HasPrefix(fa, FencePrefix) {
			t.Fatalf("counter %q lacks the prefix", fa)
		}
		// The slot counter: in a's slot, the same for every key of the slot, never the name
		// of a lock key, a per-key counter or a token key.
		sa := slotCounter(a)
		if redisSlot(sa) != redisSlot(a) || !strings.HasPrefix(sa, SlotCounterPrefix) {
			t.Fatalf("key %q in slot %d, its slot counter %q in slot %d", a, redisSlot(a), sa, redisSlot(sa))
		}
		if _, err := fenceKey(sa); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("slot counter %q accepted as a lock key", sa)
		}
		if sa == fa || sa == ha {
			t.Fatalf("key %q: slot counter %q is also its counter %q or token key %q", a, sa, fa, ha)
		}
		if _, err := fenceKey(b); err == nil && (redisSlot(b) == redisSlot(a)) != (slotCounter(b) == sa) {
			t.Fatalf("keys %q and %q: slots %d, %d, slot counters %q, %q", a, b, redisSlot(a), redisSlot(b), sa, slotCounter(b))
		}
		// b is often a made from a; "{" + a + "}" is the shape that once shared a's name.
		for _, b := range []string{b, "{" + a + "}", strings.TrimSuffix(strings.TrimPrefix(a, "{"), "}")} {
			if fb, err := fenceKey(b); err == nil && a != b && fa == fb {
				t.Fatalf("keys %q and %q share the counter %q", a, b, fa)
			}
		}
		if fb, err := fenceKey(b); err == nil && a != b && fa == fb {
			t.Fatalf("keys %q and %q share the counter %q", a, b, fa)
		}
		// RedisFence's token keys are shared by exactly the pairs "x", "{x}" (kept across an
		// upgrade, see highestKey); every other pair has its own.
		if hb, err := highestKey(b); err == nil && errH == nil && a != b && ha == hb && a != "{"+b+"}" && b != "{"+a+"}" {
			t.Fatalf("keys %q and %q share the token key %q", a, b, ha)
		}
	})
}

func TestQuoteKey(t *testing.T) {
	if got := quoteKey("short"); got != "short" {
		t.Fatalf("quoteKey(short) = %q", got)
	}
	huge := strings.Repeat("x", 16<<20)
	if got := quoteKey(huge); len(got) > 100 || !strings.Contains(got, "16777216 bytes") {
		t.Fatalf("quoteKey of 16 MiB: %d bytes: %.100q", len(got), got)
	}
	_, err := fenceKey(huge)
	if !errors.Is(err, ErrInvalidArgument) || len(err.Error()) > 300 {
		t.Fatalf("a 16 MiB key: %d-byte error", len(err.Error()))
	}
}
