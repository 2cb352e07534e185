// Package compare is the comparison lab: it runs Redlock (this library) beside the locks
// people choose instead, on this machine, under the same workload and the same faults, and
// reports what each did. docs/choosing.md sets the usual advice against its figures;
// `redlock lab --compare` and the redlock-compare command run it.
//
// # Backends
//
// Each backend starts its own servers on free loopback ports, stops them by PID, and gives
// its clients one small interface (Client: acquire, renew, check, release, and a token):
//
//   - redlock: this library on 5 redis-servers, defaults;
//   - sentinel: one Redis master, a replica and three Sentinels; SET NX PX with a random
//     value, compare-and-delete, a watchdog every TTL/3, INCR on the master as the token;
//   - pg-advisory: a PostgreSQL session advisory lock (pg_try_advisory_lock, then
//     pg_advisory_lock), a sequence for the token;
//   - pg-table: a PostgreSQL lock table (unique name, an expiry on the server's clock, a
//     watchdog), a sequence for the token;
//   - etcd: concurrency.Mutex on a 3-member etcd cluster, one session per holder, the key's
//     create revision as the token.
//
// Every recipe is the one its own documentation describes (Backend.Recipe says which), and
// what that documentation promises or warns of is checked against the runs (the report's
// last table).
//
// # A fault run
//
// A fresh instance of the backend, 3 clients on one key, each looping: acquire, 8 writes
// TTL/6 apart to the store (each after checking that it still holds the lock; a section
// outlives its first TTL, so it needs its renewals), release.
// Every client reaches every server through fault proxies of its own
// (internal/faultproxy), so a fault can hit one client: stop it (pause), kill it, cut it
// off (partition) or slow its links; or the service: kill its primary, restart it empty.
// The store is two twins fed the same writes in the same order, one that takes every write
// and one that takes a token only if it is at least the highest it has seen, so one run
// measures a store with tokens and one without. The run is recorded as a chaos.History
// (critical sections, writes, faults) and drawn with the chaos lab's timelines.
//
// # What is reported
//
// Per backend and fault: overlapping critical sections, and those granted while the first
// holder was still within its validity (its deadline; for a lock held as long as a session,
// its last check that passed); stale writes (an older holder's write applied after a newer
// holder's) taken by each twin; lost writes (taken, but missing from the final value); fresh
// writes the token check refused (tokens out of order); and how long until another client
// held the lock. Healthy, per backend: acquisitions per second, acquire p50 and p99, alone
// and with 8 contenders on one key, and Jain's fairness of the contenders.
//
// The module is separate from the library's (like bench/ and otel/), so that neither the
// library nor the CLI depends on an etcd client.
package compare
