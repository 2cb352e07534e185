package redlock

import "strings"

// LockKeyOfCounter returns the lock key whose per-key fence counter is named name, and true;
// or "" and false when name is not the per-key counter name of any valid lock key (slot
// counters, [SlotCounterPrefix], belong to no one key). It inverts the naming of per-key
// counters (docs/design.md §2): for every key k the library accepts,
// LockKeyOfCounter(counter name of k) returns k (TestLockKeyOfCounterInverts), and it returns
// true only for a name that the key it returns really has, so a key found this way can be
// passed to [Client.Status]. Only Clients of the [KeyCounters] layout (and versions before
// layouts existed) write per-key counters, so scanning for [FencePrefix] finds the keys they
// locked, free or held, and nothing else; `redlock top` finds held locks by their keys
// instead. It allocates nothing beyond the check and is safe for concurrent use.
func LockKeyOfCounter(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, FencePrefix)
	if !ok || rest == "" {
		return "", false
	}
	var key string
	switch {
	case strings.HasPrefix(rest, FencePrefix):
		// prefix + prefix + "{" + tag + "}" + key: the tag has no braces.
		r := rest[len(FencePrefix):]
		end := strings.IndexByte(r, '}')
		if !strings.HasPrefix(r, "{") || end < 0 {
			return "", false
		}
		key = r[end+1:]
	case strings.HasPrefix(rest, "{") && strings.IndexByte(rest, '}') == len(rest)-1:
		// prefix + "{" + key + "}", key without '}'. A key of the first form never has this
		// shape: "{" + t + "}" with t its tag is the third form, and "{}" has no tag.
		key = rest[1 : len(rest)-1]
	default:
		key = rest // prefix + key
	}
	if f, err := fenceKey(key); err != nil || f != name {
		return "", false
	}
	return key, true
}
