package redlock

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestIdempotencyKeyFormat: the key is the documented prefix and the SHA-256 of the
// documented byte string, computed here independently of the implementation; it is 68
// characters of [0-9a-f-] and the same on every call.
func TestIdempotencyKeyFormat(t *testing.T) {
	for _, tc := range []struct {
		key  string
		tok  Token
		step string
	}{
		{"settlement:2026-11-29", 1796124561755478, "payout"},
		{"k", 1, ""},
		{"ключ {tag}", 1<<64 - 1, "step with spaces\n"},
	} {
		got, err := IdempotencyKey(tc.key, tc.tok, tc.step)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("redlock idempotency key v1")
		for _, f := range []string{"token", tc.key, fmt.Sprint(uint64(tc.tok)), tc.step} {
			n := uint64(len(f))
			b.Write([]byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
			b.WriteString(f)
		}
		want := fmt.Sprintf("rl1-%x", sha256.Sum256(b.Bytes()))
		if got != want {
			t.Fatalf("IdempotencyKey(%q, %d, %q) = %s, want %s", tc.key, tc.tok, tc.step, got, want)
		}
		if len(got) != 68 || !strings.HasPrefix(got, IdempotencyKeyPrefix) || strings.Trim(got[4:], "0123456789abcdef") != "" {
			t.Fatalf("key %q is not rl1- and 64 lowercase hex digits", got)
		}
		if again, _ := IdempotencyKey(tc.key, tc.tok, tc.step); again != got {
			t.Fatalf("not stable: %s then %s", got, again)
		}
	}
}

// TestIdempotencyKeyDistinct: any change of key, token or step changes the key, including
// moving bytes across a field boundary, which a plain concatenation could not tell apart.
func TestIdempotencyKeyDistinct(t *testing.T) {
	seen := map[string]string{}
	add := func(key string, tok Token, step string) {
		t.Helper()
		k, err := IdempotencyKey(key, tok, step)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("(%q, %d, %q)", key, tok, step)
		if prev, ok := seen[k]; ok {
			t.Fatalf("%s and %s share the key %s", prev, what, k)
		}
		seen[k] = what
	}
	for _, key := range []string{"a", "ab", "a1", "a12", "b", "settlement:1"} {
		for _, tok := range []Token{1, 2, 12, 21, 123} {
			for _, step := range []string{"", "c", "bc", "2c", "23c", "payout", "payout:2"} {
				add(key, tok, step)
			}
		}
	}
	// The boundary cases, named: ("a","bc") vs ("ab","c") as key and step around a token,
	// and digits moved between the key and the token.
	pairs := [][2][3]string{
		{{"a", "1", "bc"}, {"ab", "1", "c"}},
		{{"a1", "2", "c"}, {"a", "12", "c"}},
		{{"a", "12", "3"}, {"a", "1", "23"}},
	}
	for _, p := range pairs {
		var keys [2]string
		for i, f := range p {
			var tok Token
			fmt.Sscan(f[1], &tok)
			keys[i], _ = IdempotencyKey(f[0], tok, f[2])
		}
		if keys[0] == keys[1] {
			t.Fatalf("%q and %q give the same key", p[0], p[1])
		}
	}
}

func TestIdempotencyKeyBadInput(t *testing.T) {
	if k, err := IdempotencyKey("k", 0, "payout"); !errors.Is(err, ErrInvalidArgument) || k != "" {
		t.Fatalf("token 0: %q, %v; want ErrInvalidArgument", k, err)
	}
	if k, err := IdempotencyKey("", 7, "payout"); !errors.Is(err, ErrInvalidArgument) || k != "" {
		t.Fatalf("empty key: %q, %v; want ErrInvalidArgument", k, err)
	}
	var l *Lock
	if k := l.IdempotencyKey("payout"); k != "" {
		t.Fatalf("nil Lock: %q", k)
	}
}

// TestLockIdempotencyKey: a fenced lock's key is the package function's for its key and
// token; a lock without fencing derives it from its holder id, so two unfenced acquisitions
// of one key get different keys (a constant key for token 0 would be wrong), and neither
// equals a token-derived key.
func TestLockIdempotencyKey(t *testing.T) {
	_, clients := miniNodes(t, 3)
	ctx := ctxT(t, 10*time.Second)
	fenced := newTestClient(t, clients)
	l, err := fenced.TryAcquire(ctx, "idem", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := IdempotencyKey("idem", l.Token(), "payout")
	if got := l.IdempotencyKey("payout"); got != want {
		t.Fatalf("Lock.IdempotencyKey = %s, want IdempotencyKey(key, token, step) = %s", got, want)
	}
	if l.IdempotencyKey("payout") == l.IdempotencyKey("refund") {
		t.Fatal("two steps share a key")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	unfenced := newTestClient(t, clients, WithoutFencing())
	var keys []string
	for range 2 {
		u, err := unfenced.TryAcquire(ctx, "idem", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if u.Token() != 0 {
			t.Fatalf("unfenced token %d", u.Token())
		}
		k := u.IdempotencyKey("payout")
		if k != u.IdempotencyKey("payout") || k != idempotencyKey("holder", "idem", u.ID(), "payout") {
			t.Fatalf("unfenced key %s is not the holder-derived key", k)
		}
		keys = append(keys, k)
		if err := u.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if keys[0] == keys[1] {
		t.Fatal("two unfenced acquisitions got the same idempotency key")
	}
	// A holder id that reads like a token cannot produce a token-derived key.
	if idempotencyKey("holder", "idem", "5", "payout") == idempotencyKey("token", "idem", "5", "payout") {
		t.Fatal("holder- and token-derived keys coincide")
	}
}

// TestIdempotencyIntentPattern model-checks the pattern of docs/fencing.md §6 for two holders
// of one step, A (older token) and B (newer), over every interleaving of their store
// operations on a real fenced store (RedisFence on miniredis): touch the intent with a fenced
// write, read the recorded key, record one's own key if there is none (fenced), then call
// the service with the key. A holder whose fenced write is refused stops. In every
// interleaving the service sees at most one key. The control drops the touch, and some
// interleaving then sends two keys: the checker can fail.
func TestIdempotencyIntentPattern(t *testing.T) {
	s := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { rc.Close() })
	fence := NewRedisFence(rc)
	ctx := ctxT(t, time.Minute)

	run := func(touch bool) (worst int, interleavings int) {
		steps := 4
		if !touch {
			steps = 3
		}
		// Every interleaving of two programs of `steps` operations: choose which slots are A's.
		var orders [][]int
		var gen func(order []int, a, b int)
		gen = func(order []int, a, b int) {
			if a == steps && b == steps {
				orders = append(orders, append([]int(nil), order...))
				return
			}
			if a < steps {
				gen(append(order, 0), a+1, b)
			}
			if b < steps {
				gen(append(order, 1), a, b+1)
			}
		}
		gen(nil, 0, 0)
		for n, order := range orders {
			intent := fmt.Sprintf("intent:%v:%d", touch, n)
			type holder struct {
				tok     Token
				own     string
				pc      int
				stopped bool
				key     string
			}
			hs := []*holder{{tok: 10, own: "key-A"}, {tok: 20, own: "key-B"}}
			sent := map[string]bool{}
			for _, who := range order {
				h := hs[who]
				if h.stopped {
					continue
				}
				op := h.pc
				if !touch {
					op++ // no touch: read, record, call
				}
				h.pc++
				switch op {
				case 0: // touch
					if err := fence.HSet(ctx, intent, map[string]string{"seen": h.tok.String()}, h.tok); err != nil {
						if !errors.Is(err, ErrStaleToken) {
							t.Fatal(err)
						}
						h.stopped = true
					}
				case 1: // read
					v, err := rc.HGet(ctx, intent, "key").Result()
					if err != nil && !errors.Is(err, redis.Nil) {
						t.Fatal(err)
					}
					h.key = v
				case 2: // record our own key if none was found
					if h.key == "" {
						h.key = h.own
						if err := fence.HSet(ctx, intent, map[string]string{"key": h.own}, h.tok); err != nil {
							if !errors.Is(err, ErrStaleToken) {
								t.Fatal(err)
							}
							h.stopped = true
						}
					}
				case 3: // the call to the service
					sent[h.key] = true
				}
			}
			worst = max(worst, len(sent))
		}
		return worst, len(orders)
	}
	if worst, n := run(true); worst > 1 {
		t.Fatalf("with the touch: some interleaving of %d sent %d keys", n, worst)
	} else {
		t.Logf("with the touch: %d interleavings, at most %d key sent", n, worst)
	}
	if worst, n := run(false); worst < 2 {
		t.Fatalf("control without the touch: no interleaving of %d sent two keys; the check cannot fail", n)
	}
}
