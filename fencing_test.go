package redlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHashTag(t *testing.T) {
	for _, tc := range []struct {
		key, tag string
		ok       bool
	}{
		{"orders:42", "", false},
		{"{user1}:lock", "user1", true},
		{"a{b}c{d}", "b", true},
		{"a{}b", "", false},
		{"a{b", "", false},
		{"}a{b}", "b", true},
		{"{}{x}", "", false},
		{"{{x}}", "{x", true},
	} {
		tag, ok := hashTag(tc.key)
		if tag != tc.tag || ok != tc.ok {
			t.Errorf("hashTag(%q) = %q, %v; want %q, %v", tc.key, tag, ok, tc.tag, tc.ok)
		}
	}
}

func TestFenceKey(t *testing.T) {
	for _, tc := range []struct {
		key, want string
		wantErr   bool
	}{
		{"orders:42", "redlock:fence:{orders:42}", false},
		{"{user1}:lock", "redlock:fence:{user1}:lock", false},
		{"a{b", "redlock:fence:{a{b}", false},
		{"", "", true},
		{"redlock:fence:x", "", true},
		{"a}b", "redlock:fence:redlock:fence:{" + slotTag(redisSlot("a}b")) + "}a}b", false},
		{"a{}b", "redlock:fence:redlock:fence:{" + slotTag(redisSlot("a{}b")) + "}a{}b", false},
		{strings.Repeat("k", MaxKeyLen), "redlock:fence:{" + strings.Repeat("k", MaxKeyLen) + "}", false},
		{strings.Repeat("k", MaxKeyLen+1), "", true},
	} {
		got, err := fenceKey(tc.key)
		if tc.wantErr {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("fenceKey(%q) = %q, %v; want ErrInvalidArgument", tc.key, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("fenceKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
		// The counter must be in the lock key's cluster slot.
		if redisSlot(got) != redisSlot(tc.key) {
			t.Errorf("fenceKey(%q) = %q in slot %d, the key in %d", tc.key, got, redisSlot(got), redisSlot(tc.key))
		}
	}
}

func TestCounterSeed(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	if got, want := counterSeed(now), now.UnixMicro(); got != want {
		t.Fatalf("seed %d, want %d", got, want)
	}
	if got := counterSeed(time.Unix(0, 0)); got != 1 {
		t.Fatalf("seed at the epoch %d, want 1", got)
	}
	// Tokens must stay exact in a float64 (Lua numbers, JSON) for centuries.
	if s := counterSeed(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)); s >= 1<<53 {
		t.Fatalf("seed in 2200 is %d, beyond 2^53", s)
	}
}
