package redlock

import (
	"context"
	_ "embed"
	"time"

	"github.com/quorumlock/redlock/internal/transport"
	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one file each under lua/, with their KEYS and ARGV in the file header,
// and beside each the typed constructor of its command. They run with EVALSHA and fall back
// to EVAL when a node answers NOSCRIPT (its script cache was lost by a restart or SCRIPT
// FLUSH). The SHA-1 that names each script for EVALSHA is a constant (scripts_sha.go), never
// computed at run time: Go's FIPS 140-only mode forbids SHA-1 (see lua below).
//
//go:generate go test -run ^TestScriptSHAs$ -update-shas .

// counters.lua: the fence-counter rules (mint, store, mirror), put in front of every script
// that writes counters: acquire, acquire_multi, raise and heal.
//
//go:embed lua/counters.lua
var countersSrc string

// queue.lua: the waiter queue's rules (qgate, qtaken, qhandoff, ...), put in front of the
// scripts that use a key's queue: acquire, release, release_multi and leave.
//
//go:embed lua/queue.lua
var queueSrc string

// acquire.lua (one key) and acquire_multi.lua (several, all or none): KEYS are the lock keys
// each followed by its own and its other fence counter (lockKeys.triples), then for a queued
// Acquire of one key its queue and waiters hash; ARGV id, the keys' PX, the seed, the
// counter's idle TTL, (multi only) "1" to mint tokens or "0" without fencing, and "1" for
// the slot layout or "0" for the per-key layout; for a queued Acquire then the Client's id,
// its ticket, the place's liveness, the grace and "1" to mint a token.
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/acquire_multi.lua
	acquireMultiSrc string
	//go:embed lua/acquire_fast.lua
	acquireFastSrc      string
	acquireScript       = newLua("acquire", withFastPath(countersSrc+acquireSrc))
	acquireQueuedScript = newLua("acquire_queued", withFastPath(countersSrc+queueSrc+acquireSrc)) // the same script with the queue's rules in front
	acquireMultiScript  = newLua("acquire_multi", countersSrc+acquireMultiSrc)
)

// withFastPath puts acquire_fast.lua in front of an acquire script (counters.lua and
// acquire.lua, with queue.lua between them or not), which becomes the function general,
// run only when the fast path does not apply: its helpers are then made only when needed.
func withFastPath(general string) string {
	return acquireFastSrc + "local function general(tried)\n" + general + "\nend\nreturn general(tried)\n"
}

// acquireArgs are the ARGV of acquire.lua and acquire_multi.lua.
type acquireArgs struct {
	id         string
	px         int64 // the keys' PX (keyTTLMillis)
	seed       int64 // counterSeed
	idleMillis int64 // counterIdleMillis
	fenced     bool  // mint tokens (multi, and a queued single key)
	layout     CounterLayout
	queue      *queueArgs  // a queued Acquire of one key; nil otherwise
	writer     *writerArgs // a read/write lock's writer (rwlock.go); nil otherwise
}

func newAcquireCommand(set lockKeys, a acquireArgs) *command {
	slot := argFlag(a.layout == SlotCounters)
	if w := a.writer; w != nil {
		keys := append(set.triples(a.layout), w.keys.readers, w.keys.intent, w.keys.phase)
		return newScriptCall(acquireWriteScript, keys, a.id, a.px, a.seed, a.idleMillis, slot, w.intentMillis, w.client)
	}
	if q := a.queue; q != nil {
		keys := append(set.triples(a.layout), q.keys.queue, q.keys.waiters)
		return newScriptCall(acquireQueuedScript, keys, a.id, a.px, a.seed, a.idleMillis, slot,
			q.member, q.ticket, q.live, q.grace, argFlag(a.fenced), turnChannelPrefix)
	}
	if len(set.keys) == 1 {
		return newScriptCall(acquireScript, set.triples(a.layout), a.id, a.px, a.seed, a.idleMillis, slot)
	}
	cmd := newScriptCall(acquireMultiScript, set.triples(a.layout), a.id, a.px, a.seed, a.idleMillis, argFlag(a.fenced), slot)
	cmd.kind = transport.ReplySlice
	return cmd
}

// raise.lua: KEYS the lock key, its own counter and its other counter; ARGV id, the target
// token, the counter's idle TTL, "1" for the slot layout.
var (
	//go:embed lua/raise.lua
	raiseSrc    string
	raiseScript = newLua("raise", countersSrc+raiseSrc)
)

// raiseArgs are the ARGV of raise.lua.
type raiseArgs struct {
	id         string
	target     int64
	idleMillis int64
	layout     CounterLayout
}

func newRaiseCommand(set lockKeys, k int, a raiseArgs) *command {
	own, other := set.counters(k, a.layout)
	return newScriptCall(raiseScript, []string{set.keys[k], own, other}, a.id, a.target, a.idleMillis,
		argFlag(a.layout == SlotCounters))
}

// release.lua (one key) and release_multi.lua: KEYS the lock keys, with the queues each
// key's queue and waiters hash; ARGV id and, to announce the release to other processes'
// waiters (wakehub.go), the key's wake-up channel (multi: the channel prefix), then with the
// queues the turn channel prefix, the Client's id and what becomes of its place. The undo
// of a failed acquire does not announce.
var (
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/release_multi.lua
	releaseMultiSrc string
	//go:embed lua/release_fast.lua
	releaseFastSrc     string
	releaseScript      = newLua("release", withReleaseFastPath(queueSrc+releaseSrc))
	releaseMultiScript = newLua("release_multi", queueSrc+releaseMultiSrc)
)

// withReleaseFastPath puts release_fast.lua in front of release.lua (with queue.lua in front
// of it), which becomes the function general, run only when a queue is there: queue.lua's
// rules are then defined only when they are needed.
func withReleaseFastPath(general string) string {
	return releaseFastSrc + "local function general()\n" + general + "\nend\nreturn general()\n"
}

// releaseArgs are what a release (or an undo) tells the nodes beyond the holder id.
type releaseArgs struct {
	announce bool   // publish on the keys' wake-up channels
	turn     bool   // tell the head of each key's queue that its turn has come
	member   string // the Client's id, for the queues; "" for no queue work
	// ticket, for a single key: the ticket of this Client's next waiter for the key, which
	// takes its place in the queue; 0 when it has none (its place is removed). An undo gives
	// the failed attempt's own ticket, so that the place it had is kept.
	ticket int64
	live   int64 // ms, the place's liveness when ticket is set
}

func newReleaseCommand(set lockKeys, id string, a releaseArgs) *command {
	n := len(set.keys)
	if n > 1 {
		switch {
		case a.member != "" && a.announce && a.turn:
			keys := make([]string, 0, 3*n)
			keys = append(keys, set.keys...)
			for _, k := range set.keys {
				q := newQueueKeys(k)
				keys = append(keys, q.queue, q.waiters)
			}
			return newScriptCall(releaseMultiScript, keys, id, WakeChannelPrefix, n, turnChannelPrefix, a.member)
		case a.announce:
			return newScriptCall(releaseMultiScript, set.keys, id, WakeChannelPrefix)
		}
		return newScriptCall(releaseMultiScript, set.keys, id)
	}
	channel, prefix := "", ""
	if a.announce {
		channel = wakeChannel(set.keys[0])
	}
	if a.turn {
		prefix = turnChannelPrefix
	}
	if a.member == "" {
		if a.announce {
			return newScriptCall(releaseScript, set.keys, id, channel)
		}
		return newScriptCall(releaseScript, set.keys, id)
	}
	q := newQueueKeys(set.keys[0])
	return newScriptCall(releaseScript, []string{set.keys[0], q.queue, q.waiters}, id, channel, prefix,
		a.member, a.ticket, a.live)
}

// leave.lua: KEYS the lock key, its queue and waiters hash; ARGV the Client's id, the turn
// channel prefix and a message id.
var (
	//go:embed lua/leave.lua
	leaveSrc    string
	leaveScript = newLua("leave", queueSrc+leaveSrc)
)

func newLeaveCommand(key string, q queueKeys, member, msgID string) *command {
	return newScriptCall(leaveScript, []string{key, q.queue, q.waiters}, member, turnChannelPrefix, msgID)
}

// extend.lua (one key) and extend_multi.lua (every key or none): KEYS the lock keys; ARGV id
// and the new PX.
var (
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/extend_multi.lua
	extendMultiSrc    string
	extendScript      = newLua("extend", extendSrc)
	extendMultiScript = newLua("extend_multi", extendMultiSrc)
)

func newExtendCommand(set lockKeys, id string, px int64) *command {
	if len(set.keys) > 1 {
		return newScriptCall(extendMultiScript, set.keys, id, px)
	}
	return newScriptCall(extendScript, set.keys, id, px)
}

// heal.lua: KEYS the lock keys each followed by its own and its other counter; ARGV id, the
// PX of keys set again, the counters' idle TTL, "1" to lift counters ("0" without fencing),
// the seed of a missing counter, "1" for the slot layout, then the token of each key.
var (
	//go:embed lua/heal.lua
	healSrc    string
	healScript = newLua("heal", countersSrc+healSrc)
)

// healArgs are the ARGV of heal.lua.
type healArgs struct {
	id         string
	px         int64 // the PX of keys set again
	idleMillis int64
	fenced     bool
	seed       int64 // counterSeed for a missing counter
	layout     CounterLayout
	tokens     []Token // per key
}

func newHealCommand(set lockKeys, a healArgs) *command {
	argv := make([]any, 0, 6+len(a.tokens))
	argv = append(argv, a.id, a.px, a.idleMillis, argFlag(a.fenced), a.seed, argFlag(a.layout == SlotCounters))
	for _, t := range a.tokens {
		argv = append(argv, uint64(t))
	}
	return newScriptCall(healScript, set.triples(a.layout), argv...)
}

// status.lua: KEYS the lock key, its own and its other counter, its waiter queue; no ARGV. An
// array reply.
var (
	//go:embed lua/status.lua
	statusSrc    string
	statusScript = newLua("status", statusSrc)
)

func newStatusCommand(set lockKeys, l CounterLayout) *command {
	cmd := newScriptCall(statusScript, append(set.triples(l), newQueueKeys(set.keys[0]).queue))
	cmd.kind = transport.ReplySlice
	return cmd
}

// permits.lua: KEYS a semaphore's permit keys; no ARGV. An array reply: each key's PTTL.
var (
	//go:embed lua/permits.lua
	permitsSrc    string
	permitsScript = newLua("permits", permitsSrc)
)

func newPermitsCommand(keys []string) *command {
	cmd := newScriptCall(permitsScript, keys)
	cmd.kind = transport.ReplySlice
	return cmd
}

// proclaim.lua: KEYS the election's lock key and leader record; ARGV id, seq, term, value
// and the channel of the announcement. leader.lua: the same KEYS, no ARGV, an array reply.
var (
	//go:embed lua/proclaim.lua
	proclaimSrc    string
	proclaimScript = newLua("proclaim", proclaimSrc)
	//go:embed lua/leader.lua
	leaderSrc    string
	leaderScript = newLua("leader", leaderSrc)
)

func newProclaimCommand(key, record, id string, seq int64, term Token, value, channel string) *command {
	return newScriptCall(proclaimScript, []string{key, record}, id, seq, uint64(term), value, channel)
}

func newLeaderCommand(key, record string) *command {
	cmd := newScriptCall(leaderScript, []string{key, record})
	cmd.kind = transport.ReplySlice
	return cmd
}

// The read/write lock's scripts (rwlock.go): a writer's acquire is acquire.lua behind
// rw_gate.lua (KEYS the writer key, its counters, the readers, the intent and the reader phase;
// ARGV acquire.lua's five, the intent's TTL and the Client's id); a writer's release is
// rw_release.lua; a reader's acquire, extend and release are read_*.lua.
var (
	//go:embed lua/rw_gate.lua
	rwGateSrc string
	//go:embed lua/rw_gate_end.lua
	rwGateEndSrc       string
	acquireWriteScript = newLua("acquire_write", "local tried = false\n"+countersSrc+rwGateSrc+acquireSrc+rwGateEndSrc)
	//go:embed lua/rw_release.lua
	rwReleaseSrc    string
	rwReleaseScript = newLua("rw_release", rwReleaseSrc)
	//go:embed lua/read_acquire.lua
	readAcquireSrc    string
	readAcquireScript = newLua("read_acquire", readAcquireSrc)
	//go:embed lua/read_extend.lua
	readExtendSrc    string
	readExtendScript = newLua("read_extend", readExtendSrc)
	//go:embed lua/read_release.lua
	readReleaseSrc    string
	readReleaseScript = newLua("read_release", readReleaseSrc)
)

// rw_status.lua: the read/write lock's read (rwstatus.go), with status.lua's body in front
// of it as status_body(), so that the writer key is read as status reads a lock key, in the
// same atomic script as the readers and the intent. KEYS status.lua's four, the readers and
// the intent; ARGV the most readers to list. An array reply.
var (
	//go:embed lua/rw_status.lua
	rwStatusSrc    string
	rwStatusScript = newLua("rw_status", "local function status_body()\n"+statusSrc+"end\n"+rwStatusSrc)
)

func newRWStatusCommand(set lockKeys, k rwKeys, l CounterLayout, most int) *command {
	keys := append(set.triples(l), newQueueKeys(set.keys[0]).queue, k.readers, k.intent, k.phase)
	cmd := newScriptCall(rwStatusScript, keys, most)
	cmd.kind = transport.ReplySlice
	return cmd
}

func argFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// lua is a script: its source, sent with EVAL when a node does not have it, and the SHA-1
// of the source, by which EVALSHA names it. The SHA-1 comes from scriptSHAs, constants
// written at development time (go generate), and is never computed here: Go's FIPS 140-only
// mode (GODEBUG=fips140=only) forbids SHA-1 and panics on its first use, so go-redis's
// NewScript, which hashes its source, cannot be used (docs/operations.md, "FIPS 140-only
// mode"). TestScriptSHAs recomputes every constant in the test binary and fails when one is
// stale, and TestRealScripts compares them with what a real server computes: a stale
// constant would make EVALSHA run whatever script a node has cached under that name.
type lua struct {
	name string
	src  string
	sha  string
}

// luaScripts holds every script by name, for the tests that check the constants.
var luaScripts = map[string]*lua{}

func newLua(name, src string) *lua {
	s := &lua{name: name, src: src, sha: scriptSHAs[name]}
	luaScripts[name] = s
	return s
}

// Hash returns the SHA-1 of the script's source in hex, as EVALSHA expects it.
func (s *lua) Hash() string { return s.sha }

// Run sends the script to one server outside the transport (RedisFence, tests): EVALSHA,
// then EVAL if the server answers NOSCRIPT, as go-redis's Script.Run does.
func (s *lua) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := c.EvalSha(ctx, s.sha, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return c.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// Load loads the script into a server's cache with SCRIPT LOAD and returns the SHA-1 the
// server computed (for tests).
func (s *lua) Load(ctx context.Context, c redis.Scripter) *redis.StringCmd {
	return c.ScriptLoad(ctx, s.src)
}

// command is one request built once per fan-out: its arguments are shared, read-only, by
// the per-node calls made from it.
type command struct {
	args   []any
	script *lua // non-nil for a script: "evalsha", sha1, numkeys, keys..., argv...
	kind   transport.ReplyKind
	// patience, when longer than the node's timeout, is how long its calls wait for a reply
	// (internal/transport: a batch waits for the longest patience among its calls): an acquire or raise waits up to a twentieth of its TTL
	// (patienceFor), as redsync does, so that a burst that makes every node slow for a
	// moment does not turn into timeouts, undos and retries.
	patience time.Duration
}

// patienceFor is the patience of the calls of an acquire or raise with ttl: a twentieth of
// it (5 %, go-redsync's default timeout factor; the validity left after the wait is checked
// as always). Extends and releases have none: their caller gets its answer within the
// node's timeout, and a renewal that fails is tried again.
func patienceFor(ttl time.Duration) time.Duration { return ttl / 20 }

// newScriptCall builds the EVALSHA command of a script.
func newScriptCall(s *lua, keys []string, argv ...any) *command {
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", s.sha, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	return &command{args: append(args, argv...), script: s, kind: transport.ReplyInt}
}

// newSetNXCall is the acquire without fencing: SET key id NX PX ttl. It reports 1 when the
// key was set, so that every node reports the same "counter" and the tally decides on its
// fast path, and 0 when the key was present. Unlike acquire.lua it cannot tell our own key
// (a SET that go-redis resent after losing the reply) from another holder's, so a refusal
// may be ours when the attempt is undone.
func newSetNXCall(key, id string, ttlMillis int64) *command {
	return &command{args: []any{"set", key, id, "px", ttlMillis, "nx"}, kind: transport.ReplySetNX}
}

// newCall makes a per-node call of the command for the transport.
func (cmd *command) newCall(tag uint8, s transport.Sink) *transport.Call {
	c := new(transport.Call)
	cmd.fill(c, tag, s)
	return c
}

// newCalls makes one call of the command per node, in one allocation: a fan-out's calls
// live as long as one another (the Lock or the pending releases keep them together).
func (cmd *command) newCalls(n int, tag uint8, s transport.Sink) []transport.Call {
	calls := make([]transport.Call, n)
	for i := range calls {
		cmd.fill(&calls[i], tag, s)
	}
	return calls
}

func (cmd *command) fill(c *transport.Call, tag uint8, s transport.Sink) {
	c.Args, c.Kind, c.Tag, c.Sink, c.Patience = cmd.args, cmd.kind, tag, s, cmd.patience
	if cmd.script != nil {
		c.Src = cmd.script.src
	}
}

// run sends the command to one node directly, outside the transport, and returns its
// integer reply (for tests and tools).
func (cmd *command) run(ctx context.Context, rc redis.UniversalClient) (int64, error) {
	ev := transport.Do(ctx, rc, cmd.newCall(0, nil))
	return ev.Val, ev.Err
}
