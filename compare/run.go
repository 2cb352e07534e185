package compare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/chaos"
)

// Profile is how long and how hard a comparison runs.
type Profile struct {
	Name string `json:"name"`
	// TTL is every backend's lock TTL or lease; etcd needs whole seconds, at least 2.
	TTL time.Duration `json:"ttl_ns"`
	// Clients is the number of holders contending for the one key of a fault run.
	Clients int `json:"clients"`
	// Faults are the faults run against every backend, by name (Faults lists them all). In
	// a Report, the faults that were run (Options.Faults when it was given).
	Faults []string `json:"faults"`
	// PerfFor is the length of each healthy measurement; Contenders the number of clients
	// on one key in the contended one.
	PerfFor    time.Duration `json:"perf_for_ns"`
	Contenders int           `json:"contenders"`
}

// Quick is the profile CI runs: the healthy measurements, briefly, and the pause fault.
var Quick = Profile{Name: "quick", TTL: 2 * time.Second, Clients: 3, Faults: []string{"pause"}, PerfFor: time.Second, Contenders: 8}

// Full runs every fault.
var Full = Profile{Name: "full", TTL: 2 * time.Second, Clients: 3, Faults: FaultNames(), PerfFor: 5 * time.Second, Contenders: 8}

// Fault is one fault of the schedule, the same for every backend.
type Fault struct {
	Name string
	What string
}

// Faults lists the faults in the order the reports give them.
var Faults = []Fault{
	{"pause", "the holder stops for 2 TTLs between checking its lock and writing (a long GC pause, SIGSTOP): its connections carry nothing meanwhile"},
	{"kill", "the holder's process is killed while it holds the lock: its connections close, it releases nothing"},
	{"partition", "the holder is cut off from every server of the lock service for 2 TTLs (not from the store); it keeps running"},
	{"slow", "every link of the holder gets TTL/8 of delay each way for 2 TTLs"},
	{"primary", "the lock service's primary is killed while a client holds the lock: the Redis master (the Sentinels fail over), the PostgreSQL server (a crash, restarted at once), the etcd leader, or one Redlock node of five"},
	{"restart-empty", "the server that holds the lock restarts at once without its data (Redis without persistence); not applicable where the service persists its state by design"},
}

// FaultNames returns the names of Faults.
func FaultNames() []string {
	var out []string
	for _, f := range Faults {
		out = append(out, f.Name)
	}
	return out
}

func faultByName(name string) (Fault, error) {
	for _, f := range Faults {
		if f.Name == name {
			return f, nil
		}
	}
	return Fault{}, fmt.Errorf("compare: unknown fault %q (known: %s)", name, strings.Join(FaultNames(), ", "))
}

// plan is what every holder of a fault run does: writes writes, gap before each, a pause of
// think after each release.
type plan struct {
	writes       int
	gap, think   time.Duration
	faultFor     time.Duration // pause, partition and slow last this long
	recoverLimit time.Duration // how long to wait for another client to get the lock
}

func (p Profile) plan() plan {
	return plan{writes: 8, gap: p.TTL / 6, think: p.TTL / 20, faultFor: 2 * p.TTL, recoverLimit: 5*p.TTL + 10*time.Second}
}

// FaultResult is what one backend did under one fault.
type FaultResult struct {
	Backend string `json:"backend"`
	Fault   string `json:"fault"`
	// Applicable is false when the fault means nothing for the backend (Note says why).
	Applicable bool   `json:"applicable"`
	Note       string `json:"note"`
	Actor      int    `json:"actor"` // the client that held the lock when the fault began
	Holds      int    `json:"holds"` // critical sections
	// Overlaps counts pairs of critical sections of the key that overlapped in time;
	// BothValid those where the second was granted while the first holder still believed,
	// by its recipe, that it held the lock.
	Overlaps  int         `json:"overlaps"`
	BothValid int         `json:"both_valid"`
	Store     storeCounts `json:"store"`
	// Recovery is the time from the fault's start until a client other than the actor was
	// granted the lock; -1 when none was within the run.
	Recovery time.Duration `json:"recovery_ns"`
	// AcqErrors counts Acquire calls that failed before the run's end.
	AcqErrors int `json:"acquire_errors"`
	// ClockStep is how far this machine's wall clock moved against its monotonic clock
	// during the run (a step by NTP, or a virtual machine paused and resumed). Redis and
	// PostgreSQL expire by the wall clock, the clients time their validity on the monotonic
	// one, so a run whose clock stepped more than clockStepLimit shows a clock jump, not the
	// backend: the promises set it aside (stepped).
	ClockStep time.Duration  `json:"clock_step_ns"`
	History   *chaos.History `json:"-"`
}

// errRun wraps what kept a run from being carried out (not a finding about the backend).
var errRun = errors.New("compare: run failed")

// RunFault starts a fresh instance of the backend, runs the fault's schedule on it and stops
// it. An error means the run could not be carried out; what the backend did is the result.
func RunFault(ctx context.Context, mk func() Backend, fault string, p Profile) (*FaultResult, error) {
	f, err := faultByName(fault)
	if err != nil {
		return nil, err
	}
	b := mk()
	res := &FaultResult{Backend: b.Name(), Fault: f.Name, Applicable: true, Recovery: -1, Actor: -1}
	clock0 := time.Now() // wall and monotonic readings, compared at the end
	defer func() { res.ClockStep = time.Now().Round(0).Sub(clock0.Round(0)) - time.Since(clock0) }()
	if err := b.Start(ctx, p.TTL); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("%w: %s: start: %w", errRun, b.Name(), err)
	}
	defer b.Close()
	pl := p.plan()
	key := "acct"
	rec := chaos.NewRecorder(chaos.History{Scenario: b.Name() + " / " + f.Name, Clients: p.Clients, TTL: p.TTL, Keys: []string{key}})
	st := newStore(rec)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var hs []*holder
	defer func() {
		for _, h := range hs {
			h.close()
		}
	}()
	for i := range p.Clients {
		h, err := newHolder(runCtx, i, b, rec, st, key, pl)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: client %d: %w", errRun, b.Name(), i, err)
		}
		hs = append(hs, h)
	}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(h.run)
	}
	stopAll := func() { stop(); wg.Wait() }
	defer stopAll()

	// The service works: two critical sections have ended.
	if err := rec.Await(ctx, 10*time.Second+5*p.TTL, "two critical sections", func(h *chaos.History) bool {
		n := 0
		for _, hd := range h.Holds {
			if !hd.Open {
				n++
			}
		}
		return n >= 2
	}); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errRun, b.Name(), err)
	}
	// The fault begins while a client holds the lock.
	var hold chaos.Hold
	if err := rec.Await(ctx, 10*time.Second+5*p.TTL, "a critical section under way", func(h *chaos.History) bool {
		if n := len(h.Holds); n > 0 && h.Holds[n-1].Open {
			hold = h.Holds[n-1]
			return true
		}
		return false
	}); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errRun, b.Name(), err)
	}
	actor := hs[hold.Client]
	res.Actor = hold.Client
	var start, end time.Duration
	switch f.Name {
	case "pause":
		begun, ended := actor.armPause(pl.faultFor)
		select {
		case <-begun:
		case <-time.After(p.TTL + 5*time.Second):
			// The section ended (its lock lost, say) before its next write: pause the next.
			select {
			case <-begun:
			case <-time.After(pl.recoverLimit):
				return nil, fmt.Errorf("%w: %s: the pause never began", errRun, b.Name())
			}
		}
		start = rec.Now()
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		end = rec.Now()
		res.Note = fmt.Sprintf("client %d paused for %v at a write of its section", hold.Client, pl.faultFor)
	case "kill":
		start = rec.Now()
		rec.Event("kill", nil, []int{hold.Client}, fmt.Sprintf("client %d killed", hold.Client))
		actor.kill()
		end = start
		res.Note = fmt.Sprintf("client %d killed while holding", hold.Client)
	case "partition", "slow":
		start = rec.Now()
		id := rec.BeginFault(f.Name, nil, []int{hold.Client}, fmt.Sprintf("client %d: %s", hold.Client, f.What))
		if f.Name == "partition" {
			actor.partition(true)
		} else {
			actor.delay(p.TTL / 8)
		}
		_ = sleepCtx(ctx, pl.faultFor) // the fault itself
		if f.Name == "partition" {
			actor.partition(false)
		} else {
			actor.delay(0)
		}
		rec.EndFault(id)
		end = rec.Now()
		res.Note = fmt.Sprintf("client %d %s for %v", hold.Client, map[string]string{"partition": "partitioned", "slow": "slowed by TTL/8 each way"}[f.Name], pl.faultFor)
	case "primary", "restart-empty":
		start = rec.Now()
		do := b.KillPrimary
		if f.Name == "restart-empty" {
			do = b.RestartEmpty
		}
		note, err := do(ctx)
		if errors.Is(err, ErrNotApplicable) {
			res.Applicable, res.Note = false, notApplicable(b.Name(), f.Name)
			stopAll()
			res.History = rec.Finish(chaos.Contents{})
			return res, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %w", errRun, b.Name(), f.Name, err)
		}
		rec.Event(f.Name, nil, nil, note)
		end = rec.Now()
		res.Note = note
	}
	// Another client gets the lock, or the limit passes.
	_ = rec.Await(ctx, pl.recoverLimit, "another client granted the lock", func(h *chaos.History) bool {
		for _, hd := range h.Holds {
			if hd.Client != hold.Client && hd.Granted >= start {
				return true
			}
		}
		return false
	})
	// Then the run goes on for a TTL past the fault and the takeover, so that what a paused
	// or cut-off holder does next is seen.
	settle := max(end, rec.Now()) + p.TTL
	_ = sleepCtx(ctx, settle-rec.Now()) // the run's remaining length, not a synchronisation
	stopAll()

	h := rec.Finish(chaos.Contents{})
	h.Writes = st.history()
	res.History = h
	res.Holds = len(h.Holds)
	for _, o := range chaos.Overlaps(h) {
		res.Overlaps++
		if o.BothValid {
			res.BothValid++
		}
	}
	for _, hd := range h.Holds {
		if hd.Client != hold.Client && hd.Granted >= start && (res.Recovery < 0 || hd.Granted-start < res.Recovery) {
			res.Recovery = hd.Granted - start
		}
	}
	res.Store = st.counts()
	for _, h := range hs {
		res.AcqErrors += int(h.acqErrs.Load())
	}
	return res, ctx.Err()
}

// clockStepLimit is the step of the wall clock against the monotonic one past which a run
// is set aside as a clock jump (see FaultResult.ClockStep).
const clockStepLimit = 100 * time.Millisecond

// stepped reports whether the machine's clock stepped during the run.
func (r *FaultResult) stepped() bool {
	return r.ClockStep > clockStepLimit || r.ClockStep < -clockStepLimit
}

func notApplicable(backend, fault string) string {
	switch fault {
	case "restart-empty":
		return backend + " persists its state by design (a WAL or a Raft log); a restart without it is not a fault its recipe allows"
	}
	return "not applicable"
}

// sortedBackends is the order of the reports.
func sortedBackends(names []string) []string {
	order := BackendNames()
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	return out
}
