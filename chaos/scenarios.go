package chaos

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
	Group   string // the grouping: node faults, client and network faults, liveness
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
}

// Expect is what a scenario must show in every run. Whatever the scenario, a run must also
// show no stale write accepted, unique and ordered tokens (claims U and O of
// docs/design.md), a linearizable store history (porcupine "ok": "unknown" fails too), no
// lost write, money conserved where the workload makes transfers (CheckConservation), and
// at least one acquisition.
type Expect struct {
	// Violation: mutual exclusion is expected to break, and the run must observe at least
	// one overlap (so the reproduction is real). Otherwise the run must observe none.
	Violation bool
	// Rejections: the store must refuse at least one stale write.
	Rejections bool
	// LiveDuringFault: locks must still be granted while the fault named here holds.
	LiveDuringFault string
	// Kept names the role of a scripted section that must run to its end without its lock
	// being lost; Lost one that must not: its lock is lost (Do reported ErrLockLost) or the
	// store refuses one of its writes (a newer holder got the lock first). A section under
	// a lock over several keys counts once, with the writes of all its keys.
	Kept, Lost string
	// MayOverlap: mutual exclusion may break in this scenario, and the run neither needs nor
	// forbids an overlap (the lab counts them).
	MayOverlap bool
}

// Claim says in words what the scenario expects.
func (e Expect) Claim() string {
	s := "safe: no overlap"
	switch {
	case e.Violation:
		s = "mutual exclusion breaks"
	case e.MayOverlap:
		s = "mutual exclusion may break"
	}
	if e.Kept != "" {
		s += ", the " + e.Kept + " is kept"
	}
	if e.Lost != "" {
		s += ", the " + e.Lost + " is lost or fenced off"
	}
	if e.Rejections {
		s += ", fencing rejects the stale writes"
	}
	if e.LiveDuringFault != "" {
		s += ", locks granted during the fault"
	}
	return s
}

// The differences judge reports when a run did not reproduce an expected failure: a matter
// of timing (the fault has to land inside a window), not of safety.
const (
	problemNoViolation = "expected a mutual-exclusion violation, and the run observed none: the failure was not reproduced"
	problemNoRejection = "expected the store to reject a stale write, and it rejected none"
)

// Unreproduced reports whether a run's only problems are that an expected failure did not
// happen (problemNoViolation, problemNoRejection): every safety check passed.
func (res *Result) Unreproduced() bool {
	for _, p := range res.Problems {
		if p != problemNoViolation && p != problemNoRejection {
			return false
		}
	}
	return len(res.Problems) > 0
}

// judge compares a run with the expectation and returns the differences.
func (e Expect) judge(h *History, v Verdict) []string {
	var p []string
	switch {
	case e.Violation && len(v.Overlaps) == 0:
		p = append(p, problemNoViolation)
	case !e.Violation && !e.MayOverlap && len(v.Overlaps) > 0:
		p = append(p, fmt.Sprintf("%d overlapping critical sections where the lock claims mutual exclusion", len(v.Overlaps)))
	}
	if e.Rejections && v.StaleRejected == 0 {
		p = append(p, problemNoRejection)
	}
	if n := len(v.StaleAccepted); n > 0 {
		p = append(p, fmt.Sprintf("%d stale writes accepted (write IDs %v)", n, v.StaleAccepted))
	}
	for _, tp := range v.TokenProblems {
		p = append(p, fmt.Sprintf("token claim %s broken: %s", tp.Claim, tp.Detail))
	}
	if v.Linearizable != LinOK {
		p = append(p, fmt.Sprintf("porcupine check of the store history: %s (only %q passes)", v.Linearizable, LinOK))
	}
	if n := len(v.LostWrites); n > 0 {
		p = append(p, fmt.Sprintf("%d acknowledged writes missing from the store (write IDs %v)", n, v.LostWrites))
	}
	for _, c := range v.Conservation {
		p = append(p, "money not conserved: "+c)
	}
	if v.Acquisitions == 0 {
		p = append(p, "no lock was ever granted")
	}
	for _, want := range []struct {
		role string
		lost bool
	}{{e.Kept, false}, {e.Lost, true}} {
		if want.role == "" {
			continue
		}
		found := false
		for _, hd := range acquisitions(h) {
			if hd.Role != want.role {
				continue
			}
			found = true
			set := setOf(hd)
			refused := false
			for _, w := range h.Writes {
				if slices.Contains(set, w.Hold) && w.Applied >= 0 && !w.Accepted {
					refused = true
				}
			}
			for _, id := range set {
				hd.Lost = hd.Lost || h.Holds[id].Lost
			}
			switch {
			case want.lost && !hd.Lost && !refused:
				p = append(p, fmt.Sprintf("the %s (hold %d) was expected to lose its lock, and kept it with every write admitted", want.role, hd.ID))
			case !want.lost && (hd.Lost || refused):
				p = append(p, fmt.Sprintf("the %s (hold %d) lost its lock (lost %v, a write refused %v)", want.role, hd.ID, hd.Lost, refused))
			case !want.lost && hd.Open:
				p = append(p, fmt.Sprintf("the %s (hold %d) did not end", want.role, hd.ID))
			}
		}
		if !found {
			p = append(p, fmt.Sprintf("no %s was recorded", want.role))
		}
	}
	if e.LiveDuringFault != "" {
		granted, found := 0, false
		for _, f := range h.Faults {
			if f.Kind != e.LiveDuringFault {
				continue
			}
			found = true
			for _, hd := range acquisitions(h) {
				if hd.Granted >= f.At && hd.Granted < f.End {
					granted++
				}
			}
		}
		if !found {
			p = append(p, fmt.Sprintf("no %q fault was recorded", e.LiveDuringFault))
		} else if granted == 0 {
			p = append(p, fmt.Sprintf("no lock was granted while the %q fault held", e.LiveDuringFault))
		}
	}
	return p
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
		Name: "rolling-restart", Group: groupNode,
		Summary: "a long hold while every node restarts empty, one after another: healing keeps it",
		Story: "Client A holds the lock for 6 TTLs while the other clients keep trying. The five nodes restart " +
			"without persistence one at a time, each after the previous one came back and A's lock was renewed " +
			"twice. Each restarted node answers A's next extend \"not ours\"; the extend is still confirmed by the " +
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
		script: scripted(func(ctx context.Context, r *Run) error {
			actor := r.Rand.IntN(r.Clients())
			challenger := r.Other(actor)
			var pauseErr error // written by the paused writer, read after its hold ended (ordered by the recorder)
			hold, err := r.Begin(ctx, actor, Plan{Role: "paused", Writes: 2, Gap: r.TTL() / 20,
				Before: func(_ context.Context, hold, seq int) {
					if seq != 1 {
						return
					}
					f := r.Isolate(actor, fmt.Sprintf("client %d stops for at least %v", actor, 2*r.TTL()))
					r.Unpark(challenger)
					Pause(ctx, 2*r.TTL())                                             // the pause itself
					pauseErr = r.AwaitNewerWrite(ctx, hold, 10*r.TTL()+5*time.Second) // and until B has written
					r.Heal(f)
				}})
			if err != nil {
				return err
			}
			err = r.AwaitHoldEnd(ctx, hold, 15*r.TTL()+10*time.Second)
			return errors.Join(err, pauseErr)
		}),
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

// phased makes a script of body that plays the phases of an experiment: Warmup of plain
// workload, body (the fault), then Cooldown of plain workload. The cool-down follows
// whatever body returned, and its error is joined with body's; a failed warm-up ends the
// script.
func phased(body func(ctx context.Context, r *Run) error) func(ctx context.Context, r *Run) error {
	return func(ctx context.Context, r *Run) error {
		if err := r.Soak(ctx, r.Profile.Warmup); err != nil {
			return err
		}
		err := body(ctx, r)
		return errors.Join(err, r.Soak(ctx, r.Profile.Cooldown))
	}
}

// scripted is phased for a choreographed fault: once the warm-up is over, every client is
// parked (ParkAll) and body runs, letting clients go itself (Begin, Unpark, Park). When body
// returns (after its own deferred calls, such as a Heal), every client goes on (UnparkAll)
// and the cool-down follows.
func scripted(body func(ctx context.Context, r *Run) error) func(ctx context.Context, r *Run) error {
	return phased(func(ctx context.Context, r *Run) error {
		defer r.UnparkAll() // also when ParkAll fails: no client stays parked for the cool-down
		if err := r.ParkAll(ctx); err != nil {
			return err
		}
		return body(ctx, r)
	})
}

// killMinority kills N − Q nodes, waits a window, and restarts them.
func killMinority(ctx context.Context, r *Run) error {
	perm := r.Rand.Perm(r.Nodes())
	var errs []error
	var down []int
	for _, n := range perm[:r.Nodes()-r.Quorum()] {
		f, err := r.KillNode(n)
		errs = append(errs, err)
		down = append(down, f)
	}
	errs = append(errs, r.Soak(ctx, r.Profile.Window))
	for i, n := range perm[:len(down)] {
		if down[i] >= 0 {
			errs = append(errs, r.RestartNode(ctx, n, down[i]))
		}
	}
	return errors.Join(errs...)
}

// bareQuorumRestart is the script shared by the three restart scenarios: the holder reaches
// only a bare quorum, and one node of it crashes and restarts at once. It runs under
// scripted: every client is parked when it starts.
func bareQuorumRestart(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	challenger := r.Other(actor)
	perm := r.Rand.Perm(r.Nodes())
	side := perm[:r.Quorum()]
	victim := side[r.Rand.IntN(len(side))]
	pf := r.Partition(map[int][]int{actor: side}, fmt.Sprintf("client %d reaches only nodes %v", actor, sorted(side)))
	defer r.Heal(pf) // when the script returns, before the clients go on
	// 30 writes, TTL/20 apart: a section of 1.5 TTL, so the holder must renew.
	hold, err := r.Begin(ctx, actor, Plan{Role: "holder", Writes: 30, Gap: r.TTL() / 20})
	if err != nil {
		return err
	}
	r.NoteCounters(ctx, "fence counters before the restart")
	if err := r.CrashRestart(ctx, victim); err != nil {
		return err
	}
	r.NoteCounters(ctx, fmt.Sprintf("fence counters after node %d restarted", victim))
	r.Unpark(challenger)
	err = r.AwaitHoldEnd(ctx, hold, 4*r.TTL()+5*time.Second)
	r.NoteCounters(ctx, "fence counters when the holder stopped")
	return err
}

// transferPause is the script of multi-key-transfer-pause: the holder of two accounts
// pauses past its validity, and another client takes one of them (with a third account)
// and writes. It runs under scripted.
func transferPause(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	taker := r.Other(actor)
	perm := r.Rand.Perm(len(r.keys))
	mine := []string{r.keys[perm[0]], r.keys[perm[1]]}
	taken := mine[r.Rand.IntN(len(mine))]
	theirs := []string{r.keys[perm[2]], taken}
	r.rec.Note("client %d will hold %v, client %d will take %s with %s", actor, mine, taker, taken, theirs[0])
	var pauseErr error // written by the paused writer, read after its hold ended (ordered by the recorder)
	hold, err := r.Begin(ctx, actor, Plan{Role: "paused", Keys: mine, Writes: 2, Gap: r.TTL() / 20,
		Before: func(_ context.Context, hold, seq int) {
			if seq != 1 {
				return
			}
			stop := time.Now()
			f := r.Isolate(actor, fmt.Sprintf("client %d stops for at least %v", actor, 2*r.TTL()))
			// The taker gets the lock once A's keys have expired, and parks after that
			// one section, so that nobody else touches A's accounts meanwhile.
			_, err := r.Begin(ctx, taker, Plan{Role: "taker", Keys: theirs, Writes: 3, Gap: r.TTL() / 40})
			r.Park(taker)
			Pause(ctx, 2*r.TTL()-time.Since(stop)) // the rest of the pause
			// and until the taker has written the account it took
			pauseErr = errors.Join(err, r.AwaitNewerWrite(ctx, r.HoldOf(hold, taken), 10*r.TTL()+5*time.Second))
			r.Heal(f)
		}})
	if err != nil {
		return err
	}
	err = r.AwaitHoldEnd(ctx, hold, 15*r.TTL()+10*time.Second)
	if err == nil {
		err = r.refusedWhole(hold, taken)
	}
	return errors.Join(err, pauseErr)
}

// refusedWhole checks the last write of the hold's section: a transfer refused whole, its
// leg of the taken key stale and every other leg vetoed.
func (r *Run) refusedWhole(hold int, taken string) error {
	var err error
	var legs []int
	r.rec.View(func(h *History) {
		set := setOf(h.Holds[hold])
		last := -1
		for _, w := range h.Writes {
			if slices.Contains(set, w.Hold) && w.Applied >= 0 {
				last = w.ID
			}
		}
		if last < 0 || len(h.Writes[last].Legs) == 0 {
			err = fmt.Errorf("chaos: hold %d made no transfer", hold)
			return
		}
		for _, id := range h.Writes[last].Legs {
			w := h.Writes[id]
			switch {
			case w.Accepted:
				err = fmt.Errorf("chaos: the paused holder's last transfer was accepted on %s (write %d)", w.Key, id)
			case w.Key == taken && !w.Stale():
				err = fmt.Errorf("chaos: the paused holder's leg of the taken account %s was not stale (write %d)", w.Key, id)
			case w.Key != taken && !w.Vetoed:
				err = fmt.Errorf("chaos: the paused holder's leg of %s, which nobody took, was not refused with its transfer (write %d)", w.Key, id)
			}
			if err != nil {
				return
			}
		}
		legs = slices.Clone(h.Writes[last].Legs)
	})
	if err == nil {
		r.rec.Note("the paused holder's transfer (writes %v) was refused whole: its %s leg stale, the other vetoed", legs, taken)
	}
	return err
}

// sentinelFailover is the script of sentinel-failover: a long hold of the first key while
// the other clients work on both keys, and the Sentinel node fails over to its replica in
// the middle of it. It runs under scripted.
func sentinelFailover(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	contender := r.Other(actor)
	// The hold lasts until the failover is over, the promoted replica holds its key and it
	// has been renewed since; 20 TTLs at most. (If the script fails first, the end of
	// the run ends it.)
	stop := make(chan struct{})
	hold, err := r.Begin(ctx, actor, Plan{Role: "long hold", Keys: r.keys[:1], Writes: 200, Gap: r.TTL() / 10, Stop: stop})
	if err != nil {
		return err
	}
	// One client tries for the held key all along; the others work on the second key.
	r.Let(contender, Plan{Role: "contender", Keys: r.keys[:1], Writes: 3, Gap: r.TTL() / 40})
	r.UnparkAll()
	if err := r.awaitRenewals(ctx, hold, 1); err != nil {
		return err
	}
	if r.holdEnded(hold) {
		return fmt.Errorf("chaos: the long hold (hold %d) ended before the failover", hold)
	}
	r.NoteCounters(ctx, "fence counters before the failover")
	if err := r.FailoverNode(ctx, r.groupNode); err != nil {
		return err
	}
	// The hold goes on on the promoted replica: its key is there (replicated, or put back
	// by healing after an extend that found it missing) while the hold lasts.
	var id string
	r.rec.View(func(h *History) { id = h.Holds[hold].LockID })
	if err := r.awaitHeldOn(ctx, r.groupNode, hold, id); err != nil {
		return err
	}
	// and it is renewed again (two renewals seen: the first may be the one that healed).
	if err := r.awaitRenewals(ctx, hold, 2); err != nil {
		return err
	}
	if r.holdEnded(hold) {
		return fmt.Errorf("chaos: the long hold (hold %d) ended before the script stopped it", hold)
	}
	r.rec.Note("the long hold stops")
	close(stop) // the holder's section returns instead of its next write, and releases
	if err := r.AwaitHoldEnd(ctx, hold, 5*r.TTL()+5*time.Second); err != nil {
		return err
	}
	r.NoteCounters(ctx, "fence counters when the long hold ended")
	// The contender, refused all along, gets the key once the hold is over.
	return r.awaitTakeover(ctx, hold, contender, 5*r.TTL()+5*time.Second)
}

// awaitHeldOn waits until node n holds the hold's key for it (read directly, as the sampler
// does), and fails if the hold ends first or it takes more than two TTLs.
func (r *Run) awaitHeldOn(ctx context.Context, n, hold int, id string) error {
	key := r.key(hold)
	limit := time.NewTimer(2 * r.TTL())
	defer limit.Stop()
	tick := time.NewTicker(r.Profile.SampleEvery)
	defer tick.Stop()
	for {
		if st, err := r.status.Status(ctx, key); err == nil && st.Nodes[n].Holder == id {
			r.rec.Note("node %d holds the long hold's key again", n)
			return nil
		}
		if r.holdEnded(hold) {
			return fmt.Errorf("chaos: hold %d ended before node %d held its key", hold, n)
		}
		select {
		case <-tick.C:
		case <-limit.C:
			return fmt.Errorf("chaos: node %d did not hold hold %d's key within %v", n, hold, 2*r.TTL())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pausedPastValidity checks that the hold's critical section ended after its validity
// deadline: the pause really outlasted the lock, so a run without overlaps means something.
func (r *Run) pausedPastValidity(hold int) error {
	var err error
	r.rec.View(func(h *History) {
		if hd := h.Holds[hold]; hd.End <= hd.Until {
			err = fmt.Errorf("chaos: hold %d ended at %v, before its validity deadline %v: the pause did not outlast the lock", hold, hd.End, hd.Until)
		}
	})
	return err
}

// awaitTakeover waits until client c holds the hold's key after the hold, and notes when
// the hold's validity and section ended and when c asked for and got the lock.
func (r *Run) awaitTakeover(ctx context.Context, hold, c int, limit time.Duration) error {
	var a, b Hold
	err := r.rec.Await(ctx, limit, fmt.Sprintf("client %d to hold the lock after hold %d", c, hold), func(h *History) bool {
		a = h.Holds[hold]
		for _, hd := range h.Holds {
			if hd.Client == c && hd.Key == a.Key && hd.Token > a.Token {
				b = hd
				return true
			}
		}
		return false
	})
	if err == nil {
		r.rec.Note("hold %d: valid until %v, section ended %v; client %d asked at %v, granted at %v",
			hold, a.Until.Round(time.Millisecond), a.End.Round(time.Millisecond), c,
			b.Asked.Round(time.Millisecond), b.Granted.Round(time.Millisecond))
	}
	return err
}

// rollingRestart: one client holds the lock for 6 TTLs while the other clients keep trying
// and the nodes restart empty one at a time, each once the previous one is back and the
// hold has been renewed twice since (or has ended). It runs under scripted.
func rollingRestart(ctx context.Context, r *Run) error {
	actor := r.Rand.IntN(r.Clients())
	hold, err := r.Begin(ctx, actor, Plan{Role: "long hold", Writes: 60, Gap: r.TTL() / 10})
	if err != nil {
		return err
	}
	r.UnparkAll() // the others contend all along
	for _, n := range r.Rand.Perm(r.Nodes()) {
		if r.holdEnded(hold) {
			break
		}
		if err := r.CrashRestart(ctx, n); err != nil {
			return err
		}
		r.NoteCounters(ctx, fmt.Sprintf("fence counters after node %d restarted", n))
		if err := r.awaitRenewals(ctx, hold, 2); err != nil {
			return err
		}
	}
	err = r.AwaitHoldEnd(ctx, hold, 10*r.TTL()+5*time.Second)
	r.NoteCounters(ctx, "fence counters when the long hold ended")
	return err
}

func (r *Run) holdEnded(hold int) (ended bool) {
	r.rec.View(func(h *History) { ended = !h.Holds[hold].Open })
	return ended
}

// awaitRenewals waits until the hold's holder has seen its validity deadline move n times
// (each move is a confirmed renewal, seen at the holder's next write), or the hold ended.
func (r *Run) awaitRenewals(ctx context.Context, hold, n int) error {
	for ; n > 0; n-- {
		var last time.Duration
		r.rec.View(func(h *History) { last = h.Holds[hold].Until })
		err := r.rec.Await(ctx, 2*r.TTL()+5*time.Second, fmt.Sprintf("a renewal of hold %d", hold), func(h *History) bool {
			return !h.Holds[hold].Open || h.Holds[hold].Until > last
		})
		if err != nil || r.holdEnded(hold) {
			return err
		}
	}
	return nil
}

func sorted(s []int) []int {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
