package model

import (
	"os"
	"strings"
	"testing"
)

// large runs the bigger bounds (REDLOCK_MODEL_LARGE=1, or 2 for the huge ones too); the
// default keeps go test ./model/ under a minute on two cores, and under -race (raceBuild)
// only the cheap configurations run, so that go test -race ./... stays within CI's budget.
var (
	large = os.Getenv("REDLOCK_MODEL_LARGE") == "1" || huge
	huge  = os.Getenv("REDLOCK_MODEL_LARGE") == "2"
)

// tier says which runs include a configuration.
type tier uint8

const (
	cheap  tier = iota // every run, -race included
	normal             // the default run without -race, and the large run
	big                // only with REDLOCK_MODEL_LARGE=1 or 2
	// only with REDLOCK_MODEL_LARGE=2: searches that did not finish on two cores and 23 GB
	// (more than 16 GB, or more than 4 minutes), kept for a bigger machine
	gigantic
)

func (t tier) included() bool {
	switch t {
	case cheap:
		return true
	case normal:
		return !raceBuild || large
	case big:
		return large
	}
	return huge
}

func two(l1, l2 Layout, acq int) []ClientConfig {
	return []ClientConfig{{Layout: l1, Acquisitions: acq}, {Layout: l2, Acquisitions: acq}}
}

// extender and other: a holder that extends once (its extend may start after its validity
// has ended), and a client that acquires the same key once without extending.
var (
	extender = ClientConfig{Layout: SlotLayout, Acquisitions: 1, Extends: 1}
	other    = ClientConfig{Layout: SlotLayout, Acquisitions: 1}
)

type tiered struct {
	tier tier
	cfg  Config
}

// realConfigs are run with the real rules: none may find a counterexample.
var realConfigs = []tiered{
	{cheap, Config{Name: "N2 Q2 continuity, a late extend and another acquisition", N: 2, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true, Timely: true}},
	{cheap, Config{Name: "N3 Q2 slot+key", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), NoLeftover: true}},
	{cheap, Config{Name: "N2 Q2 slot+key, two keys of one slot, expiry", N: 2, Q: 2, Keys: 2, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true, NoLeftover: true}},
	{normal, Config{Name: "N3 Q2 slot+slot, two keys, no expiry", N: 3, Q: 2, Keys: 2, Clients: two(SlotLayout, SlotLayout, 1), NoLeftover: true}},
	{normal, Config{Name: "N3 Q2 mutual exclusion, slot+slot", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Exclusion: true, NoLeftover: true}},
	// Counters at their maximum (design.md §5.12): an acquire that would mint past it gets an
	// error reply with nothing changed; the client counts the node as failed and undoes.
	{cheap, Config{Name: "N3 Q2 slot+key, counters at their maximum", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), MaxCounter: 1, NoLeftover: true}},
	{cheap, Config{Name: "N2 Q2 slot+key, counters at their maximum, timeouts, expiry", N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), MaxCounter: 1, Lose: true, Expiry: true, NoLeftover: true}},
	// Seeds refused by the node's clock bound (design.md §5.6): any acquire of a free key may
	// get an error reply that changed nothing.
	{cheap, Config{Name: "N2 Q2 slot+key, seed refusals, timeouts, expiry", N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Refuse: true, Lose: true, Expiry: true, NoLeftover: true}},
	{normal, Config{Name: "N3 Q2 slot+key, seed refusals", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Refuse: true, NoLeftover: true}},
	{big, Config{Name: "N3 Q2 mutual exclusion, slot+slot, seed refusals", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Exclusion: true, Refuse: true, NoLeftover: true}},
	{big, Config{Name: "N2 Q2 continuity, 2 extends + 1 extend, a resend", N: 2, Q: 2, Keys: 1, Clients: []ClientConfig{{Layout: SlotLayout, Acquisitions: 1, Extends: 2}, extender}, Expiry: true, Exclusion: true, Continuity: true, Timely: true, Resends: 1}},
	{big, Config{Name: "N3 Q2 slot+key, expiry, timeouts", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true, Lose: true}},
	{big, Config{Name: "N3 Q2 two keys of one slot, slot+slot, expiry", N: 3, Q: 2, Keys: 2, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true}},
	{big, Config{Name: "N3 Q3 (f=1) amnesia 1, constant seeds, slot+key", N: 3, Q: 3, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Amnesia: 1, Expiry: true}},
	{big, Config{Name: "N3 Q2 upgrade step 1: old+key, constant seeds", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, KeyLayout, 1), Expiry: true, Lose: true}},
	{big, Config{Name: "N3 Q2 upgrade step 2: key+slot, two keys, constant seeds", N: 3, Q: 2, Keys: 2, Clients: two(KeyLayout, SlotLayout, 1), Expiry: true}},
	{gigantic, Config{Name: "N3 Q2 old+slot, clock advancing", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, SlotLayout, 1), Expiry: true, Seeds: FreshSeeds}},
	{big, Config{Name: "N3 Q2 amnesia 1, clock advancing, slot+slot", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1, Seeds: FreshSeeds}},
	{gigantic, Config{Name: "N3 Q2 slot+key, 2 acquisitions each, resend", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 2), Expiry: true, Resends: 1}},
	{gigantic, Config{Name: "N5 Q4 (f=1) amnesia 1, constant seeds, slot+slot", N: 5, Q: 4, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1}},
	{gigantic, Config{Name: "N5 Q3 slot+key, expiry", N: 5, Q: 3, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true}},
	{gigantic, Config{Name: "N3 Q2 three clients slot/slot/key", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{Layout: SlotLayout, Acquisitions: 1}, {Layout: SlotLayout, Acquisitions: 1}, {Layout: KeyLayout, Acquisitions: 1}}, Expiry: true}},
	// The waiter queue (design.md §3.10): any node may refuse an acquire of a free key.
	{cheap, Config{Name: "N3 Q2 slot+key, queue gate", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Gate: true, NoLeftover: true}},
	{normal, Config{Name: "N3 Q2 mutual exclusion, slot+slot, queue gate", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Exclusion: true, Gate: true, NoLeftover: true}},
	{big, Config{Name: "N3 Q2 slot+key, expiry, timeouts, queue gate", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true, Lose: true, Gate: true}},
	{gigantic, Config{Name: "N3 Q2 slot+slot, 2 acquisitions each, expiry, queue gate", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 2), Expiry: true, Exclusion: true, Gate: true}},
	// The semaphore (design.md §3.11, §5.13): two permit keys, three clients each free to
	// take either; at most two may hold with validity left.
	{cheap, Config{Name: "N1 Q1 semaphore, 2 permits, three clients, expiry", N: 1, Q: 1, Keys: 2, Permits: 2, Clients: threeAny, Expiry: true, Exclusion: true, NoLeftover: true}},
	{big, Config{Name: "N2 Q2 semaphore, 2 permits, three clients", N: 2, Q: 2, Keys: 2, Permits: 2, Clients: threeAny, Exclusion: true}},
	{big, Config{Name: "N2 Q2 semaphore, 2 permits, three clients, expiry", N: 2, Q: 2, Keys: 2, Permits: 2, Clients: threeAny, Expiry: true, Exclusion: true}},
}

// threeAny are three clients that acquire once each, any key: a semaphore's holders, each
// free to choose a permit.
var threeAny = []ClientConfig{{Layout: SlotLayout, Acquisitions: 1}, {Layout: SlotLayout, Acquisitions: 1}, {Layout: SlotLayout, Acquisitions: 1}}

// countingRun is the three-holder run of design.md §3.11: 2 permits on 3 nodes, three
// clients that all ask for permit k0 first; a node that has k0 taken gives the asker k1.
var countingRun = []string{
	"c0: start acquire #1 of k0",
	"c1: start acquire #1 of k0",
	"c2: start acquire #1 of k0",
	"n0: acquire.lua(k0, c0#1",
	"n1: acquire.lua(k0, c0#1",
	"n0: acquire.lua(k0, c1#1",
	"n2: acquire.lua(k0, c1#1",
	"n1: acquire.lua(k0, c2#1",
	"n2: acquire.lua(k0, c2#1",
	"c0: n0 answers acquire",
	"c0: n1 answers acquire",
	"c1: n0 answers acquire",
	"c1: n2 answers acquire",
	"c2: n1 answers acquire",
	"c2: n2 answers acquire",
	"n2: raise.lua(k0, c1#1",
	"c1: n2 answers raise",
}

// TestModelCountingSemaphore: counting holders per node lets three hold two permits (the
// run above, replayed with the CountOnMajority mutation), while with the real rules the same
// schedule leaves the third client refused. The full search for it is in mutations (big).
func TestModelCountingSemaphore(t *testing.T) {
	first := []ClientConfig{{Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}, {Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}, {Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}}
	cfg := Config{N: 3, Q: 2, Keys: 2, Permits: 2, Clients: first, Exclusion: true, Mutation: CountOnMajority}
	trace, v, un := Follow(cfg, countingRun)
	t.Logf("counting:\n%s", strings.Join(trace, "\n"))
	if un != "" || !strings.Contains(v, "semaphore broken: 3 holders") {
		t.Fatalf("counting: violation %q, no step for %q", v, un)
	}
	cfg.Mutation = Real
	trace, v, un = Follow(cfg, countingRun)
	t.Logf("real rules:\n%s", strings.Join(trace, "\n"))
	if v != "" {
		t.Fatalf("real rules: %s", v)
	}
	if un == "" {
		t.Fatalf("real rules: the whole counting run was possible, ending %q", trace[len(trace)-1])
	}
}

// TestModelGateRefuses: the queue gate is a real branch of the search, not a no-op: with it
// a run has more states, and a schedule in which a node's queue refuses the first acquire of
// a free key ends with that acquisition lost and the other client holding the key.
func TestModelGateRefuses(t *testing.T) {
	cfg := Config{N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}, {Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}}}
	without := Check(cfg)
	cfg.Gate = true
	with := Check(cfg)
	t.Logf("states without the gate %d, with it %d", without.States, with.States)
	if with.Violation != "" || with.States <= without.States {
		t.Fatalf("gate: violation %q, %d states against %d without", with.Violation, with.States, without.States)
	}
	trace, v, un := Follow(cfg, []string{
		"c0: start acquire #1 of k0",
		"n0: acquire.lua(k0, c0#1",
		"n1: acquire.lua(k0, c0#1, slot layout, seed 1) refused by the queue",
		"n2: acquire.lua(k0, c0#1, slot layout, seed 1) refused by the queue",
		"c0: n1 answers acquire",
		"c0: n2 answers acquire",
		"c1: start acquire #1 of k0",
		"n1: acquire.lua(k0, c1#1",
		"n2: acquire.lua(k0, c1#1",
		"c1: n1 answers acquire",
		"c1: n2 answers acquire",
	})
	t.Logf("%d steps:\n%s", len(trace)-1, strings.Join(trace, "\n"))
	if un != "" || v != "" {
		t.Fatalf("violation %q, no step for %q", v, un)
	}
	if last := trace[len(trace)-1]; !strings.Contains(last, "wins") && !strings.Contains(last, "token") {
		t.Fatalf("c1 did not win after c0 was refused by the queues: %q", last)
	}
}

func TestModelRealRules(t *testing.T) {
	for _, c := range realConfigs {
		if !c.tier.included() {
			continue
		}
		cfg := c.cfg
		t.Run(cfg.Name, func(t *testing.T) {
			r := Check(cfg)
			t.Logf("%s: %d states, depth %d, %v, truncated %v", cfg.Name, r.States, r.Depth, r.Elapsed, r.Truncated)
			if r.Violation != "" {
				t.Fatalf("counterexample with the real rules: %s\n%s", r.Violation, strings.Join(r.Trace, "\n"))
			}
			if r.Truncated || r.States < 1000 {
				t.Fatalf("search incomplete or trivial: %d states", r.States)
			}
		})
	}
}

// mutations: each broken rule must give a counterexample to the invariant named by want; a
// checker that cannot fail proves nothing.
var mutations = []struct {
	tier tier
	cfg  Config
	want string
}{
	{cheap, Config{Name: "constant seeds, amnesia, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1}, "claim U"},
	{cheap, Config{Name: "raise without key-still-ours, N2 Q2", N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Mutation: RaiseNotOurs}, "claim"},
	{normal, Config{Name: "raise without key-still-ours, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Mutation: RaiseNotOurs}, "claim"},
	{normal, Config{Name: "amnesia with f=1 assumed, quorum not raised, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1, Exclusion: true, Seeds: FreshSeeds}, "mutual exclusion"},
	{cheap, Config{Name: "old+slot, frozen clock", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, SlotLayout, 1)}, "claim"},
	{cheap, Config{Name: "extend re-creates an expired key, N2 Q2", N: 2, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true, Timely: true, Mutation: ExtendRecreates}, "continuity"},
	{cheap, Config{Name: "extend overwrites another holder's key, N2 Q2", N: 2, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true, Timely: true, Mutation: ExtendOverwrites}, "continuity"},
	{normal, Config{Name: "extend overwrites another holder's key, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true, Timely: true, Mutation: ExtendOverwrites}, "mutual exclusion"},
	{big, Config{Name: "a semaphore that counts holders per node, N3 Q2, 2 permits", N: 3, Q: 2, Keys: 2, Permits: 2, Clients: []ClientConfig{{Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}, {Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}, {Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1}}, Exclusion: true, Mutation: CountOnMajority}, "semaphore broken"},
	{big, Config{Name: "extend re-creates an expired key, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true, Timely: true, Mutation: ExtendRecreates}, "continuity"},
	// Not a broken rule but a dropped assumption: without Timely, A's acquire may reach a
	// node after A's grant and after another holder has come and gone there.
	{big, Config{Name: "continuity without the timing assumption, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{extender, other}, Expiry: true, Exclusion: true, Continuity: true}, "continuity"},
	{big, Config{Name: "constant seeds, amnesia, N5 Q3", N: 5, Q: 3, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1}, "claim U"},
	// The acquire script as it was: the key set before the mint fails at the maximum, and a
	// reply the client reads as "held", so nothing undoes it.
	{cheap, Config{Name: "acquire sets the key before its mint fails, N2 Q2", N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), MaxCounter: 1, NoLeftover: true, Mutation: SetBeforeMint}, "key left behind"},
}

func TestModelFindsMutations(t *testing.T) {
	for _, c := range mutations {
		if !c.tier.included() {
			continue
		}
		t.Run(c.cfg.Name, func(t *testing.T) {
			r := Check(c.cfg)
			t.Logf("%s: %d states, %v, trace of %d steps:\n%s", c.cfg.Name, r.States, r.Elapsed, len(r.Trace)-1, strings.Join(r.Trace, "\n"))
			if !strings.HasPrefix(r.Violation, c.want) {
				t.Fatalf("want a counterexample to %q, got %q (%d states, truncated %v)", c.want, r.Violation, r.States, r.Truncated)
			}
		})
	}
}

// TestModelRefuseIsABranch: Refuse adds states (a node answering an error is a real branch),
// and a schedule reaches it: both nodes refuse c0's seed, c0 gives up and undoes, and c1 then
// takes the key.
func TestModelRefuseIsABranch(t *testing.T) {
	cfg := Config{N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), NoLeftover: true}
	without := Check(cfg)
	cfg.Refuse = true
	with := Check(cfg)
	t.Logf("states without refusals %d, with them %d", without.States, with.States)
	if with.Violation != "" || with.States <= without.States {
		t.Fatalf("refuse: violation %q, %d states against %d without", with.Violation, with.States, without.States)
	}
	trace, v, un := Follow(cfg, []string{
		"c0: start acquire #1 of k0",
		"n0: acquire.lua(k0, c0#1, slot layout, seed 1) -> error: refused",
		"c0: n0 answers acquire with -1; decide: lost; undo: release on n0 n1",
		"n1: acquire.lua(k0, c0#1, slot layout, seed 1) -> error: refused",
		"n0: release.lua(k0, c0#1",
		"n1: release.lua(k0, c0#1",
		"c1: start acquire #1 of k0",
		"n0: acquire.lua(k0, c1#1",
		"n1: acquire.lua(k0, c1#1",
		"c1: n0 answers acquire",
		"c1: n1 answers acquire",
	})
	t.Logf("%d steps:\n%s", len(trace)-1, strings.Join(trace, "\n"))
	if un != "" || v != "" || !strings.Contains(trace[len(trace)-1], "token 1") {
		t.Fatalf("violation %q, no step for %q, last %q", v, un, trace[len(trace)-1])
	}
}

// TestModelCounterMaxReached: the maximum is a real branch of the search. With counters that
// end at 1, c1's acquire after c0's token 1 gets an error reply on each node, which leaves
// the node as it was; c1 gives up and its undo releases both nodes (an error may be a lost
// reply), and no key of c1 is left.
func TestModelCounterMaxReached(t *testing.T) {
	cfg := Config{N: 2, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), MaxCounter: 1, NoLeftover: true}
	trace, v, un := Follow(cfg, []string{
		"c0: start acquire #1 of k0",
		"n0: acquire.lua(k0, c0#1",
		"n1: acquire.lua(k0, c0#1",
		"c0: n0 answers acquire",
		"c0: n1 answers acquire", // fast path, token 1
		"c0: release c0#1",
		"n0: release.lua(k0, c0#1",
		"n1: release.lua(k0, c0#1",
		"c1: start acquire #1 of k0",
		"n0: acquire.lua(k0, c1#1",
		"c1: n0 answers acquire", // lost: undo on n0 and n1
		"n0: release.lua(k0, c1#1",
		"n1: acquire.lua(k0, c1#1",
		"n1: release.lua(k0, c1#1",
	})
	t.Logf("%d steps:\n%s", len(trace)-1, strings.Join(trace, "\n"))
	all := strings.Join(trace, "\n")
	if un != "" || v != "" {
		t.Fatalf("violation %q, no step for %q", v, un)
	}
	for _, want := range []string{"acquire.lua(k0, c1#1, slot layout, seed 1) -> error", "answers acquire with -1; decide: lost; undo: release on n0 n1", "k0=- L0=none C=1"} {
		if !strings.Contains(all, want) {
			t.Fatalf("the trace lacks %q", want)
		}
	}
}

// raiseLowersSchedule breaks "counters never decrease" with the RaiseLowers mutation: c0's
// raise of k0 (target 2) reaches n0 after c1's acquisition of k1, in the same slot, lifted
// the shared counter C there to 3 and won token 3 on n0 and n2; the mutated raise sets C back
// to 2, and c1's next acquisition of k1 mints 3 again on n0 and on n1 (2 since c0's
// acquire). The search cannot reach it: the shortest run is 26 steps deep, and breadth first
// the smallest configuration that holds it (c0 acquiring k0 once, c1 acquiring k1 twice,
// N = 3, Q = 2, no faults) passes 6 million states, and 6.7 GB, at depth 16. So the test
// follows this one schedule through the model's own steps.
var raiseLowersSchedule = []string{
	"c1: start acquire #1 of k1",
	"c0: start acquire #1 of k0",
	"n1: acquire.lua(k1, c1#1",
	"n1: acquire.lua(k0, c0#1",
	"n0: acquire.lua(k0, c0#1",
	"c0: n0 answers acquire",
	"c0: n1 answers acquire", // slow path: target 2, raise n0
	"n2: acquire.lua(k0, c0#1",
	"c0: n2 answers acquire", // below the target: raise n2
	"n2: raise.lua(k0, c0#1",
	"n2: acquire.lua(k1, c1#1",
	"n0: acquire.lua(k1, c1#1",
	"c1: n2 answers acquire",
	"c1: n0 answers acquire", // slow path: target 3, raise n0
	"n0: raise.lua(k1, c1#1",
	"c1: n0 answers raise",   // c1 wins token 3 of k1
	"n0: raise.lua(k0, c0#1", // C is 3, above the target 2
	"c0: n0 answers raise",
	"c1: release c1#1",
	"n0: release.lua(k1, c1#1",
	"n1: release.lua(k1, c1#1",
	"c1: start acquire #2 of k1",
	"n0: acquire.lua(k1, c1#2",
	"n1: acquire.lua(k1, c1#2",
	"c1: n0 answers acquire",
	"c1: n1 answers acquire",
}

func TestModelRaiseLowersSchedule(t *testing.T) {
	cfg := Config{N: 3, Q: 2, Keys: 2, Clients: []ClientConfig{
		{Layout: SlotLayout, Acquisitions: 1, OnlyKey: 1},
		{Layout: SlotLayout, Acquisitions: 2, OnlyKey: 2},
	}}
	cfg.Mutation = RaiseLowers
	trace, v, un := Follow(cfg, raiseLowersSchedule)
	t.Logf("%v, %d steps:\n%s", cfg.Mutation, len(trace)-1, strings.Join(trace, "\n"))
	if un != "" || !strings.HasPrefix(v, "claim U broken: token 3 of k1") {
		t.Fatalf("want claim U broken for token 3 of k1, got %q (no step for %q)", v, un)
	}
	if !strings.Contains(strings.Join(trace, "\n"), "raise.lua(k0, c0#1, target 2) -> 1   [n0 k0=c0#1 L0=none k1=c1#1 L1=none C=2]") {
		t.Fatal("the trace does not show the raise lowering C to 2 on n0")
	}
	// The same schedule with the real rules: the raise leaves C at 3, the next acquisition
	// of k1 sees 4 on n0 and has to take the slow path to 4.
	cfg.Mutation = Real
	trace, v, un = Follow(cfg, raiseLowersSchedule)
	if un != "" || v != "" || !strings.Contains(trace[len(trace)-1], "target 4") {
		t.Fatalf("real rules: violation %q, no step for %q, last step %q", v, un, trace[len(trace)-1])
	}
}

// amnesiaN5Schedule is the restart-amnesia story of the redis.io Redlock page at N = 5, Q = 3:
// c0 holds a bare quorum of three, one of its nodes restarts empty, and c1 takes the lock on
// that node and the two c0 never reached while c0 is still valid.
var amnesiaN5Schedule = []string{
	"c0: start acquire #1 of k0",
	"n0: acquire.lua(k0, c0#1",
	"n1: acquire.lua(k0, c0#1",
	"n2: acquire.lua(k0, c0#1",
	"c0: n0 answers acquire",
	"c0: n1 answers acquire",
	"c0: n2 answers acquire", // the seeds differ (read as each script runs): slow path, raise n0 n1
	"n0: raise.lua(k0, c0#1",
	"n1: raise.lua(k0, c0#1",
	"c0: n0 answers raise",
	"c0: n1 answers raise", // c0 wins on n0, n1, n2
	"n2: restarts empty",
	"c1: start acquire #1 of k0",
	"n2: acquire.lua(k0, c1#1",
	"n3: acquire.lua(k0, c1#1",
	"n4: acquire.lua(k0, c1#1",
	"c1: n2 answers acquire",
	"c1: n3 answers acquire",
	"c1: n4 answers acquire",
	"n2: raise.lua(k0, c1#1",
	"n3: raise.lua(k0, c1#1",
	"c1: n2 answers raise",
	"c1: n3 answers raise", // c1 wins on n2, n3, n4 while c0 is valid
}

// TestModelAmnesiaF1AtQ3 is the case "amnesia at f = 1 with Q = 3": at N = 5 the search does
// not finish on two cores (REDLOCK_MODEL_LARGE=2), so the known schedule is followed through
// the model's steps: with the majority quorum Q = 3 one amnesic node breaks mutual exclusion;
// with the quorum WithAmnesiaTolerance(1) gives, Q = 4, the same schedule decides nothing for
// c0 after three answers and c1 cannot win on three nodes.
func TestModelAmnesiaF1AtQ3(t *testing.T) {
	cfg := Config{N: 5, Q: 3, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1, Exclusion: true, Seeds: FreshSeeds}
	trace, v, un := Follow(cfg, amnesiaN5Schedule)
	t.Logf("N5 Q3, %d steps:\n%s", len(trace)-1, strings.Join(trace, "\n"))
	if un != "" || !strings.HasPrefix(v, "mutual exclusion broken") {
		t.Fatalf("want mutual exclusion broken, got %q (no step for %q)", v, un)
	}
	cfg.Q = 4
	trace, v, _ = Follow(cfg, amnesiaN5Schedule)
	if v != "" {
		t.Fatalf("Q = 4: %s\n%s", v, strings.Join(trace, "\n"))
	}
}
