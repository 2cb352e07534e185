// Package redlock is a distributed lock over N independent Redis nodes (the Redlock
// algorithm of the redis.io Redlock page) that hands out fencing tokens.
//
// # What it guarantees, and what it does not
//
// A lock is granted when a quorum of nodes (a majority by default) took it and validity
// time is left after subtracting the time the acquire took and an allowance for clock drift
// ([Validity], [Drift]). While every node keeps its state, its clock runs at about the right
// rate and the holder does not pause, at most one holder has a valid lock at a time.
//
// Those conditions can fail: a process pause (garbage collection, SIGSTOP, a VM migration),
// a network delay, a clock jump on a node or a node restart without persistence can leave two
// holders each believing they hold the lock (Kleppmann, "How to do distributed locking",
// 2016). A lock alone therefore does not protect data. Every successful acquire also mints
// a fencing [Token], unique per acquisition and increasing across acquisitions that did not
// overlap, even when the lock's mutual exclusion was broken. The store that receives the
// holder's writes must reject a write whose token is lower than one it has already seen,
// checking and writing atomically. That is what keeps data correct; see docs/design.md for
// the protocol, the proof and its assumptions.
//
// # Entry points
//
//   - [New] builds a [Client] over go-redis clients, one per node, with [Option] values such
//     as [WithNodeTimeout], [WithDriftFactor], [WithRetryLimit], [WithRetryDelay],
//     [WithAmnesiaTolerance], [WithoutFencing] (no token, for locks that only save work) and
//     [WithLockDelay] (a lapsed lock stays out of reach for a further delay), and
//     [WithCounterLayout] (fence counters per hash slot, the default, whose memory does not
//     grow with the number of distinct keys, or per key, with consecutive tokens).
//   - [Client.TryAcquire] makes one attempt; [Client.Acquire] retries until it succeeds or
//     its context ends. Both return a [*Lock].
//   - [Lock.Token] is the fencing token, [Lock.Until] the validity deadline, [Lock.Extend]
//     renews, [Lock.Release] releases; [Lock.IdempotencyKey] derives a key for services
//     that deduplicate on one but cannot check a token.
//   - [Client.Do] holds a lock while a function runs, renews it, and cancels the function's
//     context with [ErrLockLost] before the validity deadline when renewals fail.
//   - [Client.AcquireMulti], [Client.TryAcquireMulti] and [Client.DoMulti] take one lock over
//     several keys, all or none, with a token per key ([MultiLock.Token]).
//   - Reentrancy: an acquire with a context that carries a held lock of the same Client on
//     the same keys (the function context of Do, or [Lock.Context]) joins that hold instead
//     of waiting for it; a nested hold that outlives its outer one fails with [ErrOutlived].
//   - Extends heal: once a quorum confirms, nodes that lost the keys get them back
//     ([WithoutHealing] turns this off).
//   - [Client.Status] shows each node's view of a lock, for operators.
//   - [RedisFence] makes fenced writes to a Redis store; package sqlfence does the same for
//     PostgreSQL. A refused write is a [*StaleTokenError] matching [ErrStaleToken].
//   - Errors: [ErrNotAcquired], [ErrNotHeld], [ErrLockLost], [ErrStaleToken],
//     [ErrInvalidArgument], [ErrClosed], [ErrReleased], [ErrOutlived], with detail in [*QuorumError], [*NodeError] and
//     [*StaleTokenError].
//
// Every call that does I/O takes a context first. Every command to a node goes through that
// node's queue and is written together with the others that are ready, as one pipeline
// ([WithNodeConcurrency]). Calls never wait for a node's answer longer than the node timeout
// counted from the write ([WithNodeTimeout]), even when that node's go-redis client ignores
// context deadlines (the default: go-redis honours them on reads only with
// ContextTimeoutEnabled). A Client is safe for use by any number of goroutines.
package redlock
