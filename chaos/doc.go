// Package chaos is redlock's chaos lab: it reproduces the known ways a Redlock lock fails on
// real redis-server processes, checks what the fencing tokens do about each, and reports
// the result as tables and timelines. `redlock lab` runs it; so do the package's tests, with
// short TTLs.
//
// # What a run is
//
// A [Scenario] starts 5 independent redis-server nodes (internal/redisproc; with an AOF and
// appendfsync always when the scenario persists; in sentinel-failover, node 0 is a Sentinel
// group of a master, a replica and three Sentinels, reached with go-redis failover clients),
// puts a TCP fault proxy (internal/faultproxy) between every workload client and every node
// (every redis-server of the group), and lets the clients loop on [redlock.Client.Do]. Inside
// each critical section a client makes a few writes to a fenced store ([Register]), checking
// before each one that its lock is still valid. In a transfer workload each section locks two
// accounts with [redlock.Client.DoMulti] instead, and each write is a transfer: one atomic
// write with a leg per account, each leg fenced by its own account's token. Meanwhile
// the scenario's script injects faults: it kills, restarts, stops and slows nodes, cuts
// clients off from chosen nodes (a partition is a set of blackholed proxies), makes a node's
// clock jump, pauses a client, or holds a write in flight. To make each failure happen for
// sure rather than by luck, scripts park the clients between critical sections and let them
// go one by one, waiting on events in the history, never on sleeps; the only sleeps are the
// faults themselves (a pause of a given length).
//
// A [Recorder] writes the [History] on Go's monotonic clock: every critical section (who,
// which token, when granted, the validity deadline, when it ended; a section over several
// keys as one [Hold] per key), every write and the store's decision, every fault, and,
// sampled from outside the proxies with [redlock.Client.Status], which lock id each node
// held over time.
//
// # Checkers
//
// [Check] runs them all and returns a [Verdict]:
//   - [Overlaps]: critical sections of one key that overlapped in time, counted as pairs and
//     as [Violations] (groups of sections linked by overlaps), each marked as "both valid"
//     (the lock was granted twice) or not (a holder worked past its deadline);
//   - [CheckTokens]: the token claims of docs/design.md, U (unique) and O (an acquisition
//     that began after another had returned gets a larger token);
//   - [StaleAccepted] and [StaleRejected]: writes the store accepted although it had
//     admitted a write of another holder with a token at least as high, and writes it
//     refused;
//   - [CheckLinearizable]: porcupine on the store's history against a fenced-register
//     model; a check that times out is "unknown", which never counts as a pass;
//   - [LostWrites]: writes acknowledged as accepted that the store does not hold;
//   - [CheckConservation]: in a transfer workload, every transfer applied whole or not at
//     all, and the balances adding up to zero.
//
// # Clock jumps on real nodes
//
// libfaketime hangs Debian's redis-server at start, so the lab cannot step a real node's
// clock. A forward jump of Δ is emulated instead: one Lua script takes Δ off the remaining
// TTL of every key on the node and deletes the keys whose TTL runs out, which is what the
// jump does to key expiry. The node's TIME does not move, which no part of redlock reads.
// In the package's simulator (the tests), miniredis's FastForward on one node is an exact
// jump.
//
// # The simulator
//
// The tests also run a deterministic simulator: miniredis nodes reached over in-memory
// pipes inside a testing/synctest bubble, so time is fake and every step can be waited out.
// A rapid state machine drives it with faults as actions and checks the invariants after
// every step; see sim_test.go.
package chaos
