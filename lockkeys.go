package redlock

import (
	"strconv"
	"strings"
)

// MaxMultiKeys is the most keys one multi-key lock ([Client.AcquireMulti]) may hold. Every
// acquire sends each key and its fence counter to every node in one script, and the per-key
// raises are told apart by a one-byte tag.
const MaxMultiKeys = 64

// lockKeys names what one lock holds: one key, or the keys of a multi-key lock in the
// caller's order, each with its per-key fence counter (fenceKey) and its slot counter
// (slotCounter). It is read-only once built.
type lockKeys struct {
	keys   []string
	fences []string
	slots  []string
}

// newLockKeys validates the keys of a lock and derives their fence counters. A single key
// is a lock of one key; more than one must be distinct and at most MaxMultiKeys.
func newLockKeys(keys ...string) (lockKeys, error) {
	for i, k := range keys {
		for _, p := range derivedPrefixes {
			if strings.HasPrefix(k, p) {
				if len(keys) > 1 {
					return lockKeys{}, invalidf("key %d: key %q starts with the reserved prefix %q", i, quoteKey(k), p)
				}
				return lockKeys{}, invalidf("key %q starts with the reserved prefix %q", quoteKey(k), p)
			}
		}
	}
	return newDerivedLockKeys(keys...)
}

// newDerivedLockKeys is newLockKeys for keys the library derives (permit, election and
// writer keys), and for Status, which reads them too.
func newDerivedLockKeys(keys ...string) (lockKeys, error) {
	switch {
	case len(keys) == 0:
		return lockKeys{}, invalidf("no keys")
	case len(keys) > MaxMultiKeys:
		return lockKeys{}, invalidf("%d keys, more than MaxMultiKeys (%d)", len(keys), MaxMultiKeys)
	}
	n := len(keys)
	names := make([]string, 3*n) // the keys, their counters, their slot counters: one allocation
	copy(names, keys)
	set := lockKeys{keys: names[:n:n], fences: names[n : 2*n : 2*n], slots: names[2*n:]}
	var seen map[string]bool
	if len(keys) > 1 {
		seen = make(map[string]bool, len(keys))
	}
	for i, k := range keys {
		f, err := fenceKey(k)
		if err != nil {
			if len(keys) > 1 {
				return lockKeys{}, invalidf("key %d: %w", i, err)
			}
			return lockKeys{}, err
		}
		if seen != nil {
			if seen[k] {
				return lockKeys{}, invalidf("key %q is given twice", quoteKey(k))
			}
			seen[k] = true
		}
		set.fences[i] = f
		set.slots[i] = slotCounter(k)
	}
	return set, nil
}

// multi returns the keys of a multi-key lock, nil for a single key (QuorumError.Keys).
func (s lockKeys) multi() []string {
	if len(s.keys) < 2 {
		return nil
	}
	return s.keys
}

// counters returns key i's own counter under layout l, the one its tokens are written to,
// and the other layout's, which is read (and, for the slot layout, kept up) so that the two
// layouts never issue one key a token twice.
func (s lockKeys) counters(i int, l CounterLayout) (own, other string) {
	if l == KeyCounters {
		return s.fences[i], s.slots[i]
	}
	return s.slots[i], s.fences[i]
}

// triples returns the KEYS of the acquire and heal scripts under layout l: each lock key,
// then its own counter, then the other one.
func (s lockKeys) triples(l CounterLayout) []string {
	out := make([]string, 0, 3*len(s.keys))
	for i, k := range s.keys {
		own, other := s.counters(i, l)
		out = append(out, k, own, other)
	}
	return out
}

// waitKey names the lock in this client's wait queues (wake.go): the key itself, or for a
// multi-key lock its keys, length-prefixed so that no two sets share a name.
func (s lockKeys) waitKey() string {
	if len(s.keys) == 1 {
		return s.keys[0]
	}
	var b strings.Builder
	b.WriteString("\x00multi")
	for _, k := range s.keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// String names the lock in error messages: the quoted key, or the quoted keys in brackets.
func (s lockKeys) String() string {
	if len(s.keys) == 1 {
		return strconv.Quote(quoteKey(s.keys[0]))
	}
	return quoteKeys(s.keys)
}

// logKey names the lock in log lines: the key as quoteKey shows it, or the quoted keys.
func (s lockKeys) logKey() string {
	if len(s.keys) == 1 {
		return quoteKey(s.keys[0])
	}
	return quoteKeys(s.keys)
}

// quoteKeys shows keys as ["a" "b"], each shortened by quoteKey, and at most eight of them.
func quoteKeys(keys []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i == 8 {
			b.WriteString(" …" + strconv.Itoa(len(keys)-8) + " more")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Quote(quoteKey(k)))
	}
	b.WriteByte(']')
	return b.String()
}
