package compare

import "fmt"

// promise is what a backend's own documentation promises about its lock, or warns of, and
// how to tell from the runs whether the lab saw it kept.
type promise struct {
	Source string // where the promise is made
	Text   string // the promise, in our words
	// Warning: the documentation does not promise this but warns of its failure, so the
	// lab reports whether it saw the failure.
	Warning bool
	// seen judges the backend's fault runs: kept or not, and why.
	seen func(rs []*FaultResult) (bool, string)
}

// exclusive is kept when no run had two critical sections that overlapped while the first
// holder still believed, by its recipe, that it held the lock.
func exclusive(rs []*FaultResult) (bool, string) {
	for _, r := range rs {
		if r.Applicable && !r.stepped() && r.BothValid > 0 {
			return false, fmt.Sprintf("%s: %d overlaps with both holders within their validity", r.Fault, r.BothValid)
		}
	}
	return true, "no overlap within both holders' validity in any run"
}

// fenced is kept when no run's fenced store accepted a stale write.
func fenced(rs []*FaultResult) (bool, string) {
	for _, r := range rs {
		if r.Applicable && !r.stepped() && r.Store.StaleFenced > 0 {
			return false, fmt.Sprintf("%s: the store accepted %d stale writes despite their tokens", r.Fault, r.Store.StaleFenced)
		}
	}
	return true, "the checking store refused every stale write in every run"
}

func both(a, b func([]*FaultResult) (bool, string)) func([]*FaultResult) (bool, string) {
	return func(rs []*FaultResult) (bool, string) {
		if ok, why := a(rs); !ok {
			return false, why
		}
		ok, why := b(rs)
		if !ok {
			return false, why
		}
		return true, "no overlap within both holders' validity, and every stale write refused"
	}
}

var promises = map[string]promise{
	"redlock": {Source: "docs/design.md §1 and §5 (this library)",
		Text: "no two holders within their validity time while at most a minority of nodes fail or lose state; " +
			"tokens strictly increase, so a store that checks them refuses an older holder's writes",
		seen: both(exclusive, fenced)},
	"sentinel": {Warning: true, Source: "redis.io, Distributed Locks with Redis: why failover-based implementations are not enough",
		Text: "a single instance is safe while it lives; with a replica, the page warns, a failover can hand the " +
			"lock out twice because replication is asynchronous, and a single node's INCR is no fencing token across a failover",
		seen: both(exclusive, fenced)},
	"pg-advisory": {Source: "PostgreSQL documentation §13.3.5 Advisory Locks",
		Text: "a session-level advisory lock is held until it is released or the session ends: one session at a time",
		seen: exclusive},
	"pg-table": {Source: "PostgreSQL documentation §13 (a unique key, each statement its own transaction)",
		Text: "at most one unexpired row per lock name, expiry judged by the server's clock",
		seen: exclusive},
	"etcd": {Source: "etcd documentation, API guarantees: notes on the usage of lock and lease; contrib/lock",
		Text: "a lease-based lock alone cannot exclude a holder that pauses past its lease; the key's revision is " +
			"the fencing token a resource must check",
		seen: fenced},
}
