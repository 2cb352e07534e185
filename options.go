package redlock

import (
	"log/slog"
	"time"
)

// Defaults for the options. Each option's doc names its default too.
const (
	// DefaultDriftFactor is the share of the TTL set aside for clock drift between nodes,
	// 0.01 as in the redis.io Redlock page and antirez's reference implementation.
	DefaultDriftFactor = 0.01
	// DefaultNodeTimeout bounds one node's reply. The redis.io Redlock page suggests 5–50 ms
	// for a 10 s TTL, so that a dead node costs little of the validity time; we take 100 ms
	// because the first call to a node also dials it and loads the scripts (a dial, HELLO,
	// EVALSHA answered NOSCRIPT, then EVAL: four round trips or more). The wait
	// never exceeds the validity time either.
	DefaultNodeTimeout = 100 * time.Millisecond
	// DefaultNodeConcurrency is the number of pipelines a Client keeps in flight to one
	// node. Calls that become ready while they are out wait in the node's queue and go out
	// together in the next pipeline, as Nagle's algorithm holds small segments back while
	// one is unacknowledged (RFC 896). With one, the goroutines of a process share their
	// round trips to each node: tens of processes of a few goroutines each, on the same
	// nodes, made 1.2 to 1.6 times the locks per second they made with four, the default
	// until 2026-12-05, and one goroutine alone as many (docs/performance.md, "Pipelines per
	// node"; bench scenario procsd prints both). The price: a call that becomes ready while
	// its node's pipeline is out waits for that pipeline's reply, up to one round trip more,
	// and when a node stops answering, calls to it wait for the timeout of the batch that
	// was out (docs/implementation.md §1). Raise it (WithNodeConcurrency) where round trips
	// are long and a process's calls few.
	DefaultNodeConcurrency = 1
	// DefaultRetryLimit is the number of attempts Acquire makes; 0 means no limit, so
	// Acquire retries until it acquires or its context ends.
	DefaultRetryLimit = 0
	// DefaultRetryDelay is the mean pause between two Acquire attempts.
	DefaultRetryDelay = 50 * time.Millisecond
	// DefaultAmnesiaTolerance is the number of nodes that may lose their state (restart
	// without persistence) without breaking the guarantees: 0, classic Redlock.
	DefaultAmnesiaTolerance = 0
	// DefaultCounterIdleTTL is how long a fence counter lives without any acquire before
	// Redis may expire it. A counter that comes back is seeded from the clock, above every
	// token issued before (docs/design.md).
	DefaultCounterIdleTTL = 7 * 24 * time.Hour
	// DefaultRenewFraction is the share of the TTL between two renewals in [Client.Do]: a
	// lock of 30 s is extended every 10 s.
	DefaultRenewFraction = 1.0 / 3
	// DefaultCancelMargin is the share of the TTL by which [Client.Do] cancels the function's
	// context before the validity deadline when no renewal was confirmed: with a 30 s TTL,
	// 3 s before Until.
	DefaultCancelMargin = 0.1
	// DefaultLockDelay is the lock-delay of [WithLockDelay]: 0, a lock that expires is free
	// at once.
	DefaultLockDelay = 0 * time.Second
)

// Clock is the seam through which the library reads time. Now must return readings that
// carry Go's monotonic clock (as time.Now does) for elapsed time to be immune to wall-clock
// steps. Clock-seeded fence counters use Now().UnixMicro().
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a [Client]. Options are applied by [New], which returns an error that
// matches ErrInvalidArgument for a value out of range.
type Option func(*config) error

type config struct {
	driftFactor      float64
	nodeTimeout      time.Duration
	nodeConcurrency  int
	retryLimit       int
	retryDelay       time.Duration
	amnesiaTolerance int
	counterIdleTTL   time.Duration
	renewFraction    float64
	cancelMargin     float64
	clock            Clock
	logger           *slog.Logger
	noFencing        bool // WithoutFencing: plain SET NX PX, no counter, Token 0
	noHealing        bool // WithoutHealing: extends do not give keys back to nodes that lost them
	lockDelay        time.Duration
	observer         Observer      // WithObserver; nil for none
	noWakeups        bool          // WithoutWakeups: no PUBLISH on release, no SUBSCRIBE for waiters
	replicasAllowed  bool          // WithReplicasAllowed: New accepts a node with role:slave
	layout           CounterLayout // WithCounterLayout
}

func defaultConfig() config {
	return config{
		driftFactor:      DefaultDriftFactor,
		nodeTimeout:      DefaultNodeTimeout,
		nodeConcurrency:  DefaultNodeConcurrency,
		retryLimit:       DefaultRetryLimit,
		retryDelay:       DefaultRetryDelay,
		amnesiaTolerance: DefaultAmnesiaTolerance,
		counterIdleTTL:   DefaultCounterIdleTTL,
		renewFraction:    DefaultRenewFraction,
		cancelMargin:     DefaultCancelMargin,
		lockDelay:        DefaultLockDelay,
		clock:            systemClock{},
		logger:           slog.New(slog.DiscardHandler),
	}
}

// WithDriftFactor sets the share of the TTL subtracted from the validity time for clock
// drift between nodes (see [Drift]). f must be in [0, 0.5). Default [DefaultDriftFactor].
func WithDriftFactor(f float64) Option {
	return func(c *config) error {
		if !(f >= 0 && f < 0.5) { // also rejects NaN
			return invalidf("drift factor %v is outside [0, 0.5)", f)
		}
		c.driftFactor = f
		return nil
	}
}

// WithNodeTimeout sets the least time one call waits for one node's reply (d > 0), counted
// from the moment its pipeline is handed to go-redis (which includes any wait for a pooled
// connection or a dial; time spent in the node's queue, see [WithNodeConcurrency], does not
// count). A node that has not answered by then counts as failed for that operation, even
// when its go-redis client ignores context deadlines. The wait is longer, up to
// max(4 d, 1 s) / 2, in two cases (docs/implementation.md §1): when the node has lately answered
// slower than d (its smoothed round trip plus four deviations, as TCP's retransmission timer
// follows the RTT; many processes on one node under load), and for acquires, up to a
// twentieth of their TTL (go-redsync's timeout factor), so that a burst that makes
// every node slow for a moment does not turn into timeouts, undos and retries. While the
// node keeps answering other pipelines, the wait is extended up to max(4 d, 1 s) from the
// write, since the delay is then most likely this process's own; and while every call in
// flight to a node is past its timeout, new calls to that node fail at once without being
// sent. A dead or hung node costs an operation nothing while a quorum of the others answers.
// Default [DefaultNodeTimeout].
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalidf("node timeout %v must be positive", d)
		}
		c.nodeTimeout = d
		return nil
	}
}

// WithNodeConcurrency sets how many pipelines a Client keeps in flight to each node
// (1 ≤ n ≤ 1024). Every command to a node goes through that node's queue: calls that are
// ready at the same moment are written together as one go-redis pipeline, and at most n
// such pipelines are outstanding per node, so a burst of calls grows the batches rather
// than the connections and round trips. A call waiting in the queue is not yet timing out:
// the node timeout starts when its pipeline is written. Keep n at or below the node
// client's pool size (go-redis: PoolSize, 10 per CPU by default), or the extra pipelines
// wait for a connection. On a hung node each sender stays blocked until go-redis gives up
// on its pipeline (read timeout and retries: 15 s or more with go-redis v9.23's defaults),
// which is why calls to a node whose senders are all overdue fail at once.
// Default [DefaultNodeConcurrency].
func WithNodeConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return invalidf("node concurrency %d is outside [1, 1024]", n)
		}
		c.nodeConcurrency = n
		return nil
	}
}

// WithRetryLimit sets the number of attempts [Client.Acquire] makes (n ≥ 0); 0 means no limit,
// Acquire then stops only when it acquires or its context ends. Default [DefaultRetryLimit].
func WithRetryLimit(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return invalidf("retry limit %d is negative", n)
		}
		c.retryLimit = n
		return nil
	}
}

// WithRetryDelay sets the mean pause between two [Client.Acquire] attempts (d > 0). Each pause
// is drawn uniformly from [d/2, 3d/2), so that competing clients fall out of step instead of
// splitting the vote again (redis.io Redlock page, "Retry on failure"). A waiter tries
// before its pause ends when a release of the key wakes it (a release by this Client, or one
// another process announces: [WithoutWakeups]), and once when its wake-up subscription first
// becomes active, for a release it could not hear before.
// Default [DefaultRetryDelay].
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalidf("retry delay %v must be positive", d)
		}
		c.retryDelay = d
		return nil
	}
}

// WithAmnesiaTolerance sets f, the number of nodes that may lose their state (a restart
// without persistence, FLUSHALL, eviction) without breaking mutual exclusion or the
// uniqueness of fencing tokens. The quorum becomes the smallest Q with 2Q − N ≥ f + 1, so any
// two quorums share f + 1 nodes and at least one of them kept its state. With N = 5, f = 1
// gives Q = 4, and two nodes down then means no lock can be acquired. [New] rejects an f that
// makes Q larger than N. Default [DefaultAmnesiaTolerance] (Q is a majority).
func WithAmnesiaTolerance(f int) Option {
	return func(c *config) error {
		if f < 0 {
			return invalidf("amnesia tolerance %d is negative", f)
		}
		c.amnesiaTolerance = f
		return nil
	}
}

// WithCounterIdleTTL sets how long a fence counter may sit unused before Redis expires it.
// With [KeyCounters] this is what bounds memory when locks are taken on millions of distinct
// keys; with the default [SlotCounters] a node has at most 16 384 counters anyway, and a slot
// counter is refreshed by every acquire of any key of its slot. 0 means
// counters never expire: those this client creates get no TTL, and an acquire leaves a
// counter's existing TTL (set by a client with another setting) as it is. d must be 0 or at
// least one second, in whole milliseconds.
// Default [DefaultCounterIdleTTL].
func WithCounterIdleTTL(d time.Duration) Option {
	return func(c *config) error {
		if d != 0 && d < time.Second {
			return invalidf("counter idle TTL %v must be 0 or at least 1s", d)
		}
		if d%time.Millisecond != 0 {
			return invalidf("counter idle TTL %v is not a whole number of milliseconds", d)
		}
		c.counterIdleTTL = d
		return nil
	}
}

// WithCounterLayout sets which fence counters the Client mints tokens from: [SlotCounters]
// (the default: at most 16 384 counters per node, whatever the number of distinct keys) or
// [KeyCounters] (one counter per distinct key, consecutive tokens per key, as before
// SlotCounters existed). Clients of both layouts, and of earlier versions, may lock the same
// keys on the same nodes: each layout reads the other's counter, so no key gets a token at or
// below one it was issued before (docs/design.md §5.11, which also gives the rolling-upgrade
// procedure). Any other value is ErrInvalidArgument from New.
func WithCounterLayout(l CounterLayout) Option {
	return func(c *config) error {
		if l != SlotCounters && l != KeyCounters {
			return invalidf("counter layout %v is neither SlotCounters nor KeyCounters", l)
		}
		c.layout = l
		return nil
	}
}

// WithoutFencing turns fencing tokens off: each node gets a plain SET key value NX PX ttl
// instead of the acquire script, no fence counter is read or written, and every
// [Lock.Token] is 0, which [RedisFence] and package sqlfence reject. Mutual exclusion rests
// on the same quorum and validity time; what is lost is the protection of the data against a
// holder that pauses past its validity. Use it only for locks that save work, where a rare
// double holder costs efficiency, not correctness. Keys follow the same rules as with
// fencing, and fenced and unfenced clients may share them. [WithCounterIdleTTL] then has no
// effect. Why this is safe to mix, and how the undo treats "present" answers: docs/design.md
// §3.1 and §3.5. Default: fencing on.
func WithoutFencing() Option {
	return func(c *config) error {
		c.noFencing = true
		return nil
	}
}

// WithObserver sets an [Observer] that receives the Client's operations, attempts, node
// calls and lock events, for metrics and traces (package
// github.com/quorumlock/redlock/otel implements one with OpenTelemetry). o must not be nil.
// Default: none, and then nothing is reported and nothing is allocated for it.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return invalidf("observer is nil")
		}
		c.observer = o
		return nil
	}
}

// WithoutHealing turns off the healing of extends. By default, when an extend (a call to
// [Lock.Extend] or a renewal of [Client.Do]) is confirmed by a quorum, the nodes that
// answered that the lock's keys are not there (they restarted without persistence, or evicted
// the keys) get them back with SET NX, for at most the validity time left, and their fence
// counters are lifted to at least the lock's tokens. A node where another holder has the key
// is never touched. Without healing, a long hold loses a node at each such restart and is
// lost once fewer than a quorum are left, as in the Redlock of the redis.io page. The
// protocol and its safety argument: docs/design.md §5.9. Default: healing on.
func WithoutHealing() Option {
	return func(c *config) error {
		c.noHealing = true
		return nil
	}
}

// WithLockDelay keeps a lock that lapsed without a release out of everyone's reach for a
// further d, as Consul's lock-delay does: its keys are set and extended with PX ttl + d,
// while [Lock.Until] still comes from ttl alone. It protects calls to services that cannot
// check a fencing token from a holder that crashed, or paused past its validity; a
// [Lock.Release], or the undo of a failed acquire, frees the lock at once. d must be a whole
// number of milliseconds, at least 0 and below [MaxTTL]: [New] returns an error matching
// ErrInvalidArgument otherwise, and every call that takes a TTL refuses ttl + d > MaxTTL
// with ErrInvalidArgument, sending nothing. Default [DefaultLockDelay] (none). What it adds,
// and what it does not promise (a node restarted without its data, a pause longer than
// ttl + d, availability after a crash): docs/design.md §5.10.
func WithLockDelay(d time.Duration) Option {
	return func(c *config) error {
		switch {
		case d < 0:
			return invalidf("lock delay %v is negative", d)
		case d%time.Millisecond != 0:
			return invalidf("lock delay %v is not a whole number of milliseconds", d)
		case d >= MaxTTL:
			return invalidf("lock delay %v leaves no room for a TTL under MaxTTL (%v)", d, MaxTTL)
		}
		c.lockDelay = d
		return nil
	}
}

// WithReplicasAllowed lets [New] accept a node that answers as a replica (INFO's
// role:slave). By default New refuses one, with an error matching ErrInvalidArgument: a
// replica is a read-only copy of another server, so it refuses every acquire and is not an
// independent node of the quorum. Meant for tools that only read ([Client.Status]) and for
// tests. Default: replicas refused.
func WithReplicasAllowed() Option {
	return func(c *config) error {
		c.replicasAllowed = true
		return nil
	}
}

// WithoutWakeups turns the cross-process wake-ups off: a Release no longer publishes on the
// key's wake-up channel ([WakeChannelPrefix] + key) nor tells the head of the key's waiter
// queue, the Client subscribes to no channel, and its Acquire calls do not wait in the
// nodes' queues (nobody would tell them their turn), so Acquire calls waiting for a lock held
// by another process (or another Client) retry only after their retry pause
// ([WithRetryDelay]), as before wake-ups existed. Waiters of the same Client are still woken
// at once by its own releases. Meant for servers where pub/sub
// is unwanted (an ACL without channels that should not log a denied PUBLISH per release,
// say; docs/operations.md) and for measuring the difference. Mutual exclusion and tokens are
// the same either way: a wake-up only triggers an attempt. Default: wake-ups on.
func WithoutWakeups() Option {
	return func(c *config) error {
		c.noWakeups = true
		return nil
	}
}

// WithRenewFraction sets how often [Client.Do] extends its lock, as a share f of the TTL
// (0 < f < 1): renewals start f × ttl after the acquire and repeat f × ttl after each
// confirmed extend. [New] also requires f + the cancel margin < 1, so that a renewal is tried
// before the function could be cancelled. Default [DefaultRenewFraction].
func WithRenewFraction(f float64) Option {
	return func(c *config) error {
		if !(f > 0 && f < 1) {
			return invalidf("renew fraction %v is outside (0, 1)", f)
		}
		c.renewFraction = f
		return nil
	}
}

// WithCancelMargin sets how long before the validity deadline [Client.Do] cancels the
// function's context when renewal could not be confirmed, as a share m of the TTL
// (0 < m < 1): the function is told at Until − m × ttl, leaving it m × ttl to stop before
// the lock can pass to someone else. Default [DefaultCancelMargin].
func WithCancelMargin(m float64) Option {
	return func(c *config) error {
		if !(m > 0 && m < 1) {
			return invalidf("cancel margin %v is outside (0, 1)", m)
		}
		c.cancelMargin = m
		return nil
	}
}

// WithClock replaces the clock used for validity times, deadlines and counter seeds.
// Meant for simulations and tests. Default: the system clock (time.Now).
func WithClock(clk Clock) Option {
	return func(c *config) error {
		if clk == nil {
			return invalidf("clock is nil")
		}
		c.clock = clk
		return nil
	}
}

// WithLogger sets the logger of the library's records, all with a message beginning
// "redlock: ". Warn: New's warning of an even number of nodes, undos that stop or start
// reaching a node (Warn, then Info when they reach it again), a Do whose lock was lost or
// whose release failed. Debug: per-node failures of acquire, extend, release and renewal,
// fence counter raises, healing, and wake-up subscriptions failing and coming back. Default:
// a logger that discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return invalidf("logger is nil")
		}
		c.logger = l
		return nil
	}
}
