package redlock

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// slotKeyShapes are keys of every shape slotKey distinguishes: no braces, a hash tag (first,
// later, empty, nested), all one tag, a '}' without a tag, control and non-ASCII bytes.
var slotKeyShapes = []string{"orders:42", "{user1}:lock", "a{b", "a}b", "{}x", "}{", "}", "{}", "{{x}}", "{x}", "x",
	"{a{b}", "a{b}c{d}", "payout:é:日本", "redlock:highest:x", "\x00}", "\x1b[2J", strings.Repeat("}", 300),
	"{" + FencePrefix + "}", "x" + FencePrefix, "{x}}", "{x}{y}", strings.Repeat("k", MaxKeyLen)}

// TestLockKeyOfCounterInverts: for keys of every shape, and random keys over the bytes that
// matter to the naming, LockKeyOfCounter undoes fenceKey; and names that are no counter's
// are refused.
func TestLockKeyOfCounterInverts(t *testing.T) {
	check := func(key string) {
		t.Helper()
		name, err := fenceKey(key)
		if err != nil {
			if got, ok := LockKeyOfCounter(FencePrefix + key); ok && got == key {
				t.Fatalf("invalid key %q found as a counter's lock key", key)
			}
			return
		}
		if got, ok := LockKeyOfCounter(name); !ok || got != key {
			t.Fatalf("LockKeyOfCounter(%q) = %q, %v; want %q", name, got, ok, key)
		}
	}
	for _, k := range slotKeyShapes {
		check(k)
		check(k + "}")
		check("{" + k + "}")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"{", "}", "a", "b", ":", "\x00", "é", "redlock:fence:"}
	for range 200000 {
		var b strings.Builder
		for range rng.IntN(10) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		check(b.String())
	}
	for _, name := range []string{"", "x", FencePrefix, "redlock:highest:{x}", FencePrefix + FencePrefix,
		FencePrefix + FencePrefix + "{zzzz}a}b", // a wrong tag for "a}b"
		FencePrefix + FencePrefix + "x", FencePrefix + "{x}", FencePrefix + "{}", FencePrefix + FencePrefix + "{1}{x}"} {
		if key, ok := LockKeyOfCounter(name); ok {
			if f, _ := fenceKey(key); f != name {
				t.Errorf("LockKeyOfCounter(%q) = %q, whose counter is %q", name, key, f)
			}
		}
	}
	for _, name := range []string{"", "x", FencePrefix, FencePrefix + "{}", FencePrefix + "{}x", FencePrefix + FencePrefix + "{zzzz}a}b"} {
		if key, ok := LockKeyOfCounter(name); ok {
			t.Errorf("LockKeyOfCounter(%q) = %q, true; want false", name, key)
		}
	}
}

// FuzzLockKeyOfCounter: on any key, LockKeyOfCounter inverts fenceKey; on any name, it
// accepts only a name that is the counter of the key it returns.
func FuzzLockKeyOfCounter(f *testing.F) {
	for _, s := range slotKeyShapes {
		f.Add(s)
		f.Add(FencePrefix + s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name, err := fenceKey(s); err == nil {
			if got, ok := LockKeyOfCounter(name); !ok || got != s {
				t.Fatalf("LockKeyOfCounter(%q) = %q, %v; want %q", name, got, ok, s)
			}
		}
		if key, ok := LockKeyOfCounter(s); ok {
			if name, err := fenceKey(key); err != nil || name != s {
				t.Fatalf("LockKeyOfCounter(%q) = %q, but its counter is %q (%v)", s, key, name, err)
			}
		}
	})
}
