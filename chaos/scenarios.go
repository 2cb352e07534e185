package chaos

// The lab's scenarios: what a scenario is (its cluster set-up, its script, what it must
// show) and the table of every scenario, in report order. The scripts too long to write
// inline are in scripts.go, what the runs are judged by in expect.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Scenario is one entry of the lab: a cluster set-up, a fault script, and what the run must
// show. The same table drives the tests (one named test per scenario) and `redlock lab`.
type Scenario struct {
	Name    string
	Group   string // the report's grouping: node faults, client and network faults, liveness
	Summary string // one line
	// Story is the event sequence the script plays, in words, for the report.
	Story  string
	Expect Expect

	setup  setup
	script func(ctx context.Context, r *Run) error
}

type setup struct {
	nodes   int
	keys    int
	persist bool // AOF with appendfsync always
	amnesia int  // WithAmnesiaTolerance
	storm   bool // many clients, short retry pause
	direct  bool // clients connect to the nodes directly, without fault proxies
	// transfers makes the workload a transfer workload: the keys are accounts, and every
	// plain critical section locks two of them with DoMulti and moves money from one to
	// the other (Plan). Needs keys ≥ 2.
	transfers bool
	// reserved keys, the first ones, are left to scripted sections (Plan.Keys): the plain
	// workload picks among the others.
	reserved int
	// sentinel makes node 0 a Sentinel group (a master, its replica, three Sentinels)
	// reached through failover clients; see Run.
	sentinel bool
	// noRetries builds the go-redis clients with MaxRetries -1: a call to a dead node fails
	// at once instead of being retried by go-redis until the node timeout.
	noRetries bool
	writes    int // writes per plain critical section
	// lockDelay is every client's WithLockDelay, in TTLs of the profile; 0 for none.
	lockDelay int
	noHealing bool // every client WithoutHealing
	// mixedLayouts gives the odd-numbered clients WithCounterLayout(KeyCounters) and the
	// others the default slot layout; slotKeys puts every key in one hash slot (a shared hash
	// tag), so that they share one slot counter.
	mixedLayouts, slotKeys bool
	// election makes every single-key section a leadership: Election(key).Do, the term as
	// the section's token (the library's leader election).
	election bool
	// permits, when not 0, makes every single-key section a permit of the semaphore named by
	// the key: Semaphore(key, permits).Do; the section's key is then the permit's key.
	permits int
	// rwlock makes every single-key section a writer of the read/write lock named by the key:
	// RWLock(key).DoWrite; the section's key is then the writer key, its token the writer's.
	rwlock bool
}

// Scenarios returns the lab's scenarios in report order.
func Scenarios() []*Scenario { return slices.Clone(scenarios) }

// Lookup returns the scenario with the given name.
func Lookup(name string) (*Scenario, bool) {
	for _, s := range scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// Names returns the scenario names in report order.
func Names() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.Name)
	}
	return out
}

const (
	groupNode     = "control and node faults"
	groupClient   = "client and network faults"
	groupLiveness = "liveness"
)

var scenarios = []*Scenario{
	{
		Name: "baseline", Group: groupNode,
		Summary: "no fault: clients loop on Do over two keys",
		Story:   "The workload runs with no fault at all. Every critical section must be alone, every token larger than the one before it.",
		Expect:  Expect{},
		setup:   setup{nodes: 5, keys: 2, writes: 3},
		script: func(ctx context.Context, r *Run) error {
			return r.Soak(ctx, r.Profile.Warmup+r.Profile.Window+r.Profile.Cooldown)
		},
	},
	{
		Name: "slow-node", Group: groupNode,
		Summary: "one node answers a third of the node timeout late, each way",
		Story: "One node's traffic is delayed in both directions for every client, so its replies arrive after the " +
			"others' and its SETs land after acquisitions have been decided (stragglers).",
		Expect: Expect{LiveDuringFault: "slow node"},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: phased(func(ctx context.Context, r *Run) error {
			f := r.SlowNode(r.Rand.IntN(r.Nodes()), r.Profile.NodeTimeout/3)
			defer r.UnslowNode(f)
			return r.Soak(ctx, r.Profile.Window)
		}),
	},
	{
		Name: "minority-down", Group: groupNode,
		Summary: "two of five nodes killed with SIGKILL, then restarted from their AOF",
		Story: "Two nodes, a minority of the five, are killed with SIGKILL, and restarted from their AOF " +
			"(appendfsync always) after a while. Locks must still be granted by the remaining three. The " +
			"clients' go-redis connections are built with MaxRetries: -1, so a call to a dead node fails at " +
			"once; minority-down-retrying shows what go-redis's default retries cost.",
		Expect: Expect{LiveDuringFault: "node down"},
		setup:  setup{nodes: 5, keys: 1, persist: true, writes: 3, noRetries: true},
		script: phased(killMinority),
	},
	{
		Name: "restart-persistent", Group: groupNode,
		Summary: "holder on a bare quorum, one of its nodes crashes and restarts from its AOF",
		Story: "Client A can reach only a bare quorum of nodes and takes the lock there. One node of that quorum is " +
			"killed with SIGKILL and restarted at once; with appendfsync always it replays A's key from its AOF, " +
			"so no one else can assemble a quorum while A holds.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, persist: true, writes: 3},
		script: scripted(bareQuorumRestart),
	},
	{
		Name: "restart-amnesia", Group: groupNode,
		Summary: "the same restart without persistence, default quorum: mutual exclusion breaks",
		Story: "Client A can reach only a bare quorum (3 of 5) and takes the lock there. One node of that quorum is " +
			"killed and restarted at once without persistence: it comes back empty. Client B now finds that node " +
			"and the two A never reached free, and takes the lock while A's is still valid. The node's fence " +
			"counter is gone too; it is reseeded from B's clock, so B's token is still larger than A's, and the " +
			"store refuses A's next write.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: scripted(bareQuorumRestart),
	},
	{
		Name: "mixed-layouts", Group: groupNode,
		Summary: "clients of both counter layouts on three keys of one hash slot, no fault",
		Story: "Half the clients mint tokens from the slot counter (the default), the others from per-key counters " +
			"(WithCounterLayout(KeyCounters)), on three keys that share one hash slot and so one slot counter. Each " +
			"layout reads the other's counter, so every key's tokens must still be unique and increasing in holding " +
			"order, whoever took it (docs/design.md §5.11).",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 3, writes: 3, mixedLayouts: true, slotKeys: true},
		script: func(ctx context.Context, r *Run) error {
			return r.Soak(ctx, r.Profile.Warmup+r.Profile.Window+r.Profile.Cooldown)
		},
	},
	{
		Name: "mixed-layouts-amnesia", Group: groupNode,
		Summary: "restart-amnesia with clients of both counter layouts on keys of one slot",
		Story: "As restart-amnesia, with half the clients on per-key counters and the keys in one hash slot. The " +
			"restarted node comes back without its slot and per-key counters; B, of either layout, reseeds from its " +
			"clock, so its token is still above A's and the store refuses A's next write.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3, mixedLayouts: true, slotKeys: true},
		script: scripted(bareQuorumRestart),
	},
	{
		Name: "restart-amnesia-f1", Group: groupNode,
		Summary: "the same restart without persistence with WithAmnesiaTolerance(1): no violation",
		Story: "As restart-amnesia, with WithAmnesiaTolerance(1): the quorum is 4 of 5, A holds a bare quorum of " +
			"4, and one of them comes back empty. B can assemble at most 2 nodes while A's keys live, so it waits " +
			"until A has stopped.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, amnesia: 1, writes: 3},
		script: scripted(bareQuorumRestart),
	},
	{
		Name: "semaphore-amnesia", Group: groupNode,
		Summary: "a semaphore of 2 permits under restart-amnesia, default quorum: 3 holders",
		Story: "Client B holds one permit of a 2-permit semaphore on every node. Client A can reach only a bare " +
			"quorum (3 of 5) and takes the other permit there. One node of A's quorum restarts without persistence " +
			"and comes back empty. Client C finds B's permit held everywhere, reads the permits, finds A's free on " +
			"the restarted node and the two A never reached, and takes it: three holders of two permits while A's " +
			"is valid. A's next write under the permit's token is refused: C's token for that permit is larger.",
		Expect: Expect{Violation: true, Rejections: true, Permits: 2},
		setup:  setup{nodes: 5, keys: 1, writes: 3, permits: 2},
		script: scripted(semaphoreAmnesia),
	},
	{
		Name: "semaphore-amnesia-f1", Group: groupNode,
		Summary: "the same with WithAmnesiaTolerance(1): never more holders than permits",
		Story: "As semaphore-amnesia, with WithAmnesiaTolerance(1): the quorum is 4 of 5, A holds its permit on a " +
			"bare quorum of 4, and one of them comes back empty. C can find A's permit free on at most 2 nodes " +
			"while A's keys live, so it waits: never more than 2 holders.",
		Expect: Expect{Permits: 2},
		setup:  setup{nodes: 5, keys: 1, amnesia: 1, writes: 3, permits: 2},
		script: scripted(semaphoreAmnesia),
	},
	{
		Name: "rolling-restart", Group: groupNode,
		Summary: "a long hold while every node restarts empty, one after another: healing keeps it",
		Story: "Client A holds the lock for 6 TTLs while the other clients keep trying. The five nodes restart " +
			"without persistence one at a time, each once A's lock has been renewed twice since the last restart " +
			"(or since it was acquired). Each restarted node answers A's next extend \"not ours\"; the extend is still confirmed by the " +
			"others, and healing puts A's key back on the restarted node (SET NX) with its counter lifted to A's " +
			"token. A keeps a quorum throughout and finishes; nobody else gets the lock meanwhile.",
		Expect: Expect{Kept: "long hold"},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: scripted(rollingRestart),
	},
	{
		Name: "rolling-restart-no-healing", Group: groupNode,
		Summary: "the same rolling restarts WithoutHealing: the hold erodes and is lost",
		Story: "As rolling-restart, with every client made WithoutHealing, as in the Redlock of the redis.io page. " +
			"Every restart leaves A's key on one node fewer. After the third, A's extends reach only two nodes and " +
			"A loses the lock; meanwhile the restarted nodes are free, so another client can take them while A " +
			"still counts on its last renewal, and only fencing protects the store then.",
		Expect: Expect{Lost: "long hold", MayOverlap: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3, noHealing: true},
		script: scripted(rollingRestart),
	},
	{
		Name: "sentinel-failover", Group: groupNode,
		Summary: "one node is a Sentinel group, failed over to its replica during a long hold",
		Story: "Node 0 is not one redis-server but a Sentinel group: a master, one replica (asynchronous " +
			"replication) and three Sentinels, reached with go-redis failover clients. Their connections to the " +
			"group's servers still pass through the clients' fault proxies (the dialer sends each one to the proxy of " +
			"the server the Sentinels named); the Sentinels are reached directly. Client A holds the first key " +
			"until the failover is over; one client keeps trying for it, the others work on the second key. After A's first renewal the " +
			"group fails over (SENTINEL FAILOVER). Until a client hears of the switch it keeps writing to the old " +
			"master, which no longer replicates, so the promoted replica misses those writes: a failover is state " +
			"loss of one node (design.md §5.6, §7 assumption 1), and the clients are made WithAmnesiaTolerance(1) " +
			"(quorum 4 of 5), under which the design promises mutual exclusion and tokens on both keys. A keeps its " +
			"quorum on the four other nodes; healing puts its key back on the promoted replica; renewed once more, A " +
			"stops, and only then does the contender get the key.",
		Expect: Expect{Kept: "long hold", LiveDuringFault: "failover"},
		setup:  setup{nodes: 5, keys: 2, reserved: 1, writes: 3, sentinel: true, amnesia: 1},
		script: scripted(sentinelFailover),
	},
	{
		Name: "client-pause", Group: groupClient,
		Summary: "a holder stops for twice the TTL between its validity check and its write (no lock-delay)",
		Story: "Client A holds the lock, checks that it is still valid, and stops (a GC pause, SIGSTOP, a VM " +
			"migration) for twice the TTL before its write: its links are blackholed, so its renewals stop too. " +
			"A's keys expire, B takes the lock and writes. A resumes and sends its write with its old token; the " +
			"store refuses it. client-pause-lock-delay is the same pause with WithLockDelay.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: scripted(pausedHolder),
	},
	{
		Name: "leader-pause", Group: groupClient,
		Summary: "an elected leader stops for twice the TTL before its write: two leaders, the old term refused",
		Story: "Client A is the leader of an election (Election.Do) and stops for twice the TTL between its check " +
			"of the leadership and its write, its links blackholed. Its leadership lapses, B is elected with a " +
			"larger term and writes. A resumes and writes with its old term: for a moment two leaders acted, and " +
			"the store, which keeps the highest term, refuses A's write.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3, election: true},
		script: scripted(pausedHolder),
	},
	{
		Name: "rw-writer-pause", Group: groupClient,
		Summary: "a read/write lock's writer stops for twice the TTL before its write: two writers, the old token refused",
		Story: "Client A holds a read/write lock for writing (RWLock.DoWrite) and stops for twice the TTL between " +
			"its check of the lock and its write, its links blackholed. Its hold lapses, B becomes the writer with " +
			"a larger token and writes. A resumes and writes with its old token: for a moment two writers acted, " +
			"and the store, which keeps the highest token, refuses A's write. The gate that keeps readers and " +
			"writers apart is no help here: like a lock's, it ends with the validity.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3, rwlock: true},
		script: scripted(pausedHolder),
	},
	{
		Name: "client-pause-lock-delay", Group: groupClient,
		Summary: "the same pause with WithLockDelay(2 TTL), longer than the pause's overrun: no overlap",
		Story: "As client-pause, with every client made WithLockDelay(2 TTL): the lock keys live three TTLs from " +
			"the last confirmed acquire or extend, while validity still ends after one. A stops for twice the " +
			"TTL, one TTL past its validity. B keeps trying throughout and is refused, because A's keys are " +
			"still on the nodes. A resumes, sends its write (accepted: nobody newer has written), its Do reports " +
			"the lock lost and releases it (A then parks), and only then does B get the lock. Without a token check the write " +
			"would have been just as safe: no two holders overlapped.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, writes: 3, lockDelay: 2},
		script: scripted(func(ctx context.Context, r *Run) error {
			actor := r.Rand.IntN(r.Clients())
			challenger := r.Other(actor)
			hold, err := r.Begin(ctx, actor, Plan{Role: "paused", Writes: 2, Gap: r.TTL() / 20,
				Before: func(_ context.Context, hold, seq int) {
					if seq != 1 {
						return
					}
					f := r.Isolate(actor, fmt.Sprintf("client %d stops for at least %v", actor, 2*r.TTL()))
					r.Unpark(challenger)
					Pause(ctx, 2*r.TTL()) // the pause itself; B cannot get in meanwhile
					r.Heal(f)
					r.Park(actor) // so that B, not A's next section, takes over after A's release
				}})
			if err != nil {
				return err
			}
			err = r.AwaitHoldEnd(ctx, hold, 15*r.TTL()+10*time.Second)
			if err == nil {
				err = r.pausedPastValidity(hold)
			}
			if err == nil {
				// B, which kept trying since A stopped, gets the lock once A has released
				// (or A's keys have served the delay).
				err = r.awaitTakeover(ctx, hold, challenger, 10*r.TTL()+5*time.Second)
			}
			return err
		}),
	},
	{
		Name: "multi-key-transfer-pause", Group: groupClient,
		Summary: "transfers under DoMulti; a holder of two accounts pauses past its validity, another takes one of them",
		Story: "The workload is transfers between four accounts: each critical section locks two of them with DoMulti " +
			"and moves money from one to the other, each write one atomic step of the store with a leg per account, " +
			"each leg fenced by its own account's token (the store applies both legs or neither, as one SQL " +
			"transaction or one Lua script over both keys would). Client A holds accounts X and Y, checks its " +
			"validity and stops for twice the TTL before its next transfer, its links blackholed. B locks X and a " +
			"third account Z and transfers between them. A resumes and sends its X–Y transfer with its old tokens: " +
			"the X leg is stale, so the store refuses the transfer, and the Y leg, whose token is still Y's " +
			"highest, with it. Mutual exclusion breaks on X only; the balances still add up to zero.",
		Expect: Expect{Violation: true, Rejections: true, Kept: "taker", Lost: "paused"},
		setup:  setup{nodes: 5, keys: 4, writes: 3, transfers: true},
		script: scripted(transferPause),
	},
	{
		Name: "clock-jump-partition", Group: groupClient,
		Summary: "partition plus a forward clock jump on one node (Kleppmann 2016): mutual exclusion breaks",
		Story: "A partition splits the clients: A reaches nodes {a, b, c}, the others reach {c, d, e}. A takes the " +
			"lock on {a, b, c}. Node c's clock jumps forward by one TTL (emulated: every key there loses a TTL's " +
			"worth of its remaining time), so A's key on c expires at once. B takes the lock on {c, d, e} while " +
			"A's is still valid; B's token is larger, and the store refuses A's next write.",
		Expect: Expect{Violation: true, Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: scripted(func(ctx context.Context, r *Run) error {
			actor := r.Rand.IntN(r.Clients())
			challenger := r.Other(actor)
			perm := r.Rand.Perm(r.Nodes())
			q := r.Quorum()
			side, victim := perm[:q], perm[q-1]
			other := append(slices.Clone(perm[q:]), victim)
			reach := map[int][]int{}
			for c := range r.Clients() {
				reach[c] = other
			}
			reach[actor] = side
			pf := r.Partition(reach, fmt.Sprintf("client %d reaches nodes %v, the others reach %v", actor, sorted(side), sorted(other)))
			defer r.Heal(pf) // when the script returns, before the clients go on
			hold, err := r.Begin(ctx, actor, Plan{Role: "holder", Writes: 30, Gap: r.TTL() / 20})
			if err != nil {
				return err
			}
			if err := r.JumpNode(ctx, victim, r.TTL()); err != nil {
				return err
			}
			r.Unpark(challenger)
			return r.AwaitHoldEnd(ctx, hold, 4*r.TTL()+5*time.Second)
		}),
	},
	{
		Name: "delayed-write", Group: groupClient,
		Summary: "a write sent while the lock was valid is held in flight and delivered after a newer holder wrote",
		Story: "Client A, holding a valid lock, sends a write that the network holds for at least 1.5 TTL. A's own " +
			"wait for the answer times out, so it gives up and releases. B takes the lock and writes. Then A's " +
			"old write arrives at the store, which refuses it.",
		Expect: Expect{Rejections: true},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: scripted(func(ctx context.Context, r *Run) error {
			actor := r.Rand.IntN(r.Clients())
			challenger := r.Other(actor)
			// late and lateErr are written by the writer's and the store's goroutines and read
			// here after an Await that saw the write applied: the recorder's mutex orders them.
			late := -1
			var lateErr error
			hold, err := r.Begin(ctx, actor, Plan{Role: "delayed", Writes: 2, Gap: r.TTL() / 20,
				Send: func(wctx context.Context, req WriteReq) (bool, error) {
					if req.Seq != 1 {
						return r.Store().Write(req), nil
					}
					f := r.rec.BeginFault("write delayed", nil, []int{actor}, fmt.Sprintf("held in flight for at least %v", r.TTL()*3/2))
					id, res := r.Store().SendDelayed(req, r.TTL()*3/2, func(sctx context.Context) {
						lateErr = r.AwaitNewerWrite(sctx, req.Hold, 10*r.TTL()+5*time.Second)
						r.rec.EndFault(f)
					})
					late = id
					r.Unpark(challenger)
					t := time.NewTimer(r.TTL() / 10) // A's own timeout for the write
					defer t.Stop()
					select {
					case ok := <-res:
						r.Store().Ack(id)
						return ok, nil
					case <-t.C:
						return false, errors.New("chaos: write timed out; its outcome is unknown to the writer")
					case <-wctx.Done():
						return false, context.Cause(wctx)
					}
				}})
			if err != nil {
				return err
			}
			if err := r.AwaitHoldEnd(ctx, hold, 5*r.TTL()+5*time.Second); err != nil {
				return err
			}
			err = r.rec.Await(ctx, 15*r.TTL()+10*time.Second, "the delayed write to reach the store", func(h *History) bool {
				return late >= 0 && h.Writes[late].Applied >= 0
			})
			return errors.Join(err, lateErr)
		}),
	},
	{
		Name: "minority-down-retrying", Group: groupLiveness,
		Summary: "minority-down with go-redis's default retries on the node connections",
		Story: "The same two nodes killed as in minority-down, but with go-redis's default of 3 retries: a call " +
			"to a dead node is retried with backoff until the node timeout instead of failing at once. An " +
			"attempt that got some nodes but not a quorum cannot be declared lost while those calls are " +
			"pending, and keeps its keys meanwhile; with several clients contending, the vote keeps " +
			"splitting. Safety must hold; the lab measures the locks granted during the outage.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, persist: true, writes: 3},
		script: phased(killMinority),
	},
	{
		Name: "hung-node", Group: groupLiveness,
		Summary: "one node stopped with SIGSTOP: it accepts connections and never answers",
		Story: "One node is stopped with SIGSTOP: the kernel still accepts connections, but nothing comes back, " +
			"so every call to it lasts the full node timeout. An attempt that fails elsewhere cannot be " +
			"declared lost before that node times out, and meanwhile keeps its keys on the nodes it did get; " +
			"with several clients contending, these partial holds keep splitting the vote. Safety must hold; " +
			"the lab measures what the hung node costs in throughput and waiting.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, writes: 3},
		script: phased(func(ctx context.Context, r *Run) error {
			n := r.Rand.IntN(r.Nodes())
			f, err := r.PauseNode(n)
			if err != nil {
				return err
			}
			err = r.Soak(ctx, r.Profile.Window)
			return errors.Join(err, r.ResumeNode(n, f))
		}),
	},
	{
		Name: "retry-storm", Group: groupLiveness,
		Summary: "many clients on one key at once: split votes, throughput and waits",
		Story: "Many clients (12 in the quick profile, 32 in the full one) contend for one key, all starting at " +
			"once and retrying after the library's default jittered pause, so attempts often split the vote and " +
			"nobody gets a quorum. The lab measures how many locks are still granted per second and how long " +
			"clients wait for one.",
		Expect: Expect{},
		setup:  setup{nodes: 5, keys: 1, storm: true, direct: true, writes: 1},
		script: func(ctx context.Context, r *Run) error {
			return r.Soak(ctx, r.Profile.Storm)
		},
	},
}
