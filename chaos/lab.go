package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// Profile sets the scale of a lab run: TTLs, how long each phase lasts, how many clients.
type Profile struct {
	Name        string
	TTL         time.Duration // the lock TTL of every scenario
	NodeTimeout time.Duration
	RetryDelay  time.Duration
	Warmup      time.Duration // plain workload before the fault
	Window      time.Duration // how long a standing fault (slow node, nodes down) lasts
	Cooldown    time.Duration // plain workload after the fault is healed
	Clients     int           // workload clients
	// StormClients and Storm size the retry storm; StormRetryDelay is its mean retry pause.
	StormClients    int
	Storm           time.Duration
	StormRetryDelay time.Duration
	SampleEvery     time.Duration // how often the nodes are sampled for the timeline
	LinTimeout      time.Duration // bound of the porcupine check
}

// Quick is the profile of the default test run: every scenario once, short TTLs, a few
// seconds each.
var Quick = Profile{
	Name: "quick", TTL: time.Second, NodeTimeout: 200 * time.Millisecond, RetryDelay: 20 * time.Millisecond,
	Warmup: 500 * time.Millisecond, Window: 1500 * time.Millisecond, Cooldown: 500 * time.Millisecond,
	Clients: 3, StormClients: 12, Storm: 2 * time.Second, StormRetryDelay: 5 * time.Millisecond,
	SampleEvery: 20 * time.Millisecond, LinTimeout: DefaultLinTimeout,
}

// Full is the profile of `redlock lab` and of REDLOCK_CHAOS_LONG=1.
var Full = Profile{
	Name: "full", TTL: 2 * time.Second, NodeTimeout: 200 * time.Millisecond, RetryDelay: 30 * time.Millisecond,
	Warmup: 2 * time.Second, Window: 5 * time.Second, Cooldown: 2 * time.Second,
	Clients: 4, StormClients: 32, Storm: 10 * time.Second, StormRetryDelay: redlock.DefaultRetryDelay,
	SampleEvery: 20 * time.Millisecond, LinTimeout: DefaultLinTimeout,
}

// Plan is what a client does while it holds the lock: Writes writes to the store, Gap
// apart (the work between two writes), each preceded by the validity check a careful holder
// makes (its context is live and Lock.Until has not passed). A refused write ends the
// section: the store has told the holder that a newer one exists.
type Plan struct {
	Role   string // "" for the plain workload; a scripted section is named
	Writes int
	Gap    time.Duration
	// Before, if set, runs after the validity check of write seq and before the write: where
	// a scripted holder pauses.
	Before func(ctx context.Context, hold, seq int)
	// Send, if set, sends write seq instead of the plain store write: where a scripted write
	// is held in flight.
	Send func(ctx context.Context, req WriteReq) (bool, error)
}

// errPastValidity ends a critical section whose validity deadline passed.
var errPastValidity = errors.New("chaos: validity deadline passed before the write")

// Run is one execution of a scenario: real redis-server nodes, a fault proxy for every
// (client, node) pair, one redlock.Client per workload client, the fenced store and the
// recorder. Fault scripts drive it with the methods below.
type Run struct {
	Scenario *Scenario
	Profile  Profile
	// Rand drives the script's choices (which client, which nodes). Seeded per run, so a
	// run's choreography is reproducible from its seed; timings are not.
	Rand *rand.Rand

	rec      *Recorder
	reg      *Register
	cluster  *redisproc.Cluster
	nodes    []*redisproc.Node
	proxies  [][]*faultproxy.Proxy // [client][node]
	conns    [][]*redis.Client     // [client][node], through the proxies
	direct   []*redis.Client       // [node], for the sampler and the clock jump
	clients  []*redlock.Client
	status   *redlock.Client // on the direct connections, for the sampler
	workers  []*worker
	keys     []string
	ttl      time.Duration
	defPlan  Plan
	nClients int
	quorum   int
}

// Quorum returns the number of nodes a lock needs.
func (r *Run) Quorum() int { return r.quorum }

// Nodes returns the number of nodes.
func (r *Run) Nodes() int { return len(r.nodes) }

// Clients returns the number of workload clients.
func (r *Run) Clients() int { return r.nClients }

// TTL returns the lock TTL.
func (r *Run) TTL() time.Duration { return r.ttl }

// Store returns the fenced store.
func (r *Run) Store() *Register { return r.reg }

// Result is a finished run: its history, what the checkers found, and how that compares
// with what the scenario expects.
type Result struct {
	Scenario string
	Run      int
	Seed     uint64
	History  *History
	Verdict  Verdict
	// Problems lists every way the run differed from the scenario's expectation; empty
	// when the run behaved as expected.
	Problems []string
}

// OK reports whether the run behaved as the scenario expects.
func (res *Result) OK() bool { return len(res.Problems) == 0 }

// Run executes the scenario once with profile p. run numbers the run; seed alone drives the
// script's random choices (which client, which nodes) and the clients' choice of keys, so a
// run is replayed, as far as its choreography goes, by running again with its seed. It needs redis-server on PATH. Every process, proxy and goroutine
// it starts is stopped before it returns.
func (s *Scenario) Run(ctx context.Context, p Profile, run int, seed uint64) (*Result, error) {
	r, err := s.start(ctx, p, run, seed)
	if err != nil {
		return nil, err
	}
	defer r.close()

	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	var workers, sampler sync.WaitGroup
	sampler.Go(func() { r.sample(sctx) })
	busyFrom := r.rec.Now()
	for _, w := range r.workers {
		workers.Go(func() { r.work(wctx, w) })
	}

	scriptErr := s.script(ctx, r)
	r.healAll()
	stopWorkers()
	workers.Wait()
	busy := r.rec.Now() - busyFrom
	stopSampler()
	sampler.Wait()
	r.reg.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.rec.update(func(h *History) { h.Busy = busy })
	stored, highest := r.reg.Contents()
	h := r.rec.Finish(stored, highest)
	v := Check(h, p.LinTimeout)
	res := &Result{Scenario: s.Name, Run: run, Seed: seed, History: h, Verdict: v}
	if scriptErr != nil {
		res.Problems = append(res.Problems, "the fault script did not go as planned: "+scriptErr.Error())
	}
	res.Problems = append(res.Problems, s.Expect.judge(h, v)...)
	return res, nil
}

func (s *Scenario) start(ctx context.Context, p Profile, run int, seed uint64) (_ *Run, err error) {
	st := s.setup
	nClients := p.Clients
	retry := p.RetryDelay
	if st.storm {
		nClients, retry = p.StormClients, p.StormRetryDelay
	}
	keys := []string{"chaos:" + s.Name}
	for i := 1; i < st.keys; i++ {
		keys = append(keys, fmt.Sprintf("chaos:%s:%d", s.Name, i))
	}
	r := &Run{Scenario: s, Profile: p, Rand: rand.New(rand.NewPCG(seed, 0x5eed)), keys: keys, ttl: p.TTL,
		nClients: nClients}
	r.defPlan = Plan{Writes: st.writes, Gap: p.TTL / 40}
	defer func() {
		if err != nil {
			r.close()
		}
	}()

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r.cluster, err = redisproc.Start(startCtx, st.nodes, redisproc.Config{Persist: st.persist,
		ExtraArgs: []string{"--maxmemory-policy", "noeviction"}})
	if err != nil {
		return nil, err
	}
	r.nodes = r.cluster.Nodes()
	for _, n := range r.nodes {
		r.direct = append(r.direct, redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true,
			MaxRetries: -1, DialTimeout: p.NodeTimeout}))
	}
	r.status, err = redlock.New(universal(r.direct), redlock.WithNodeTimeout(p.NodeTimeout/2))
	if err != nil {
		return nil, err
	}
	for c := range nClients {
		var ps []*faultproxy.Proxy
		var cs []*redis.Client
		for _, n := range r.nodes {
			addr := n.Addr()
			if !st.direct {
				px, err := faultproxy.Start(addr)
				if err != nil {
					return nil, err
				}
				ps = append(ps, px)
				addr = px.Addr()
			}
			o := &redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: p.NodeTimeout}
			if st.noRetries {
				o.MaxRetries = -1
			}
			cs = append(cs, redis.NewClient(o))
		}
		if !st.direct {
			r.proxies = append(r.proxies, ps)
		}
		r.conns = append(r.conns, cs)
		opts := []redlock.Option{redlock.WithNodeTimeout(p.NodeTimeout), redlock.WithRetryDelay(retry),
			redlock.WithAmnesiaTolerance(st.amnesia), redlock.WithLockDelay(time.Duration(st.lockDelay) * p.TTL)}
		if st.noHealing {
			opts = append(opts, redlock.WithoutHealing())
		}
		cl, err := redlock.New(universal(cs), opts...)
		if err != nil {
			return nil, err
		}
		r.clients = append(r.clients, cl)
		r.workers = append(r.workers, &worker{id: c, rng: rand.New(rand.NewPCG(seed, uint64(c))), gate: newGate()})
	}
	r.quorum = r.clients[0].Quorum()
	if err := r.warmUp(startCtx); err != nil {
		return nil, err
	}
	r.rec = NewRecorder(History{Scenario: s.Name, Run: run, Seed: seed, Nodes: st.nodes, Clients: nClients,
		Quorum: r.quorum, TTL: p.TTL, Keys: keys})
	r.reg = NewRegister(r.rec)
	return r, nil
}

// warmUp opens a connection from every client to every node and loads the library's
// scripts on every node, with a generous timeout, so that the first acquisitions of the run
// do not pay for dials and script loads: on a loaded machine those can take longer than the
// node timeout, and a run would then start with a drought that has nothing to do with its
// scenario.
func (r *Run) warmUp(ctx context.Context) error {
	warm, err := redlock.New(universal(r.direct), redlock.WithNodeTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer warm.Close()
	l, err := warm.TryAcquire(ctx, "chaos:warm-up", 30*time.Second)
	if err != nil {
		return fmt.Errorf("chaos: warm-up: %w", err)
	}
	err = errors.Join(l.Extend(ctx, 30*time.Second), l.Release(ctx))
	for _, cs := range r.conns {
		for _, c := range cs {
			err = errors.Join(err, c.Ping(ctx).Err())
		}
	}
	if err != nil {
		return fmt.Errorf("chaos: warm-up: %w", err)
	}
	return nil
}

func universal(cs []*redis.Client) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// close stops everything start started, in reverse order. Safe on a partial start.
func (r *Run) close() {
	for _, c := range r.clients {
		_ = c.Close()
	}
	if r.status != nil {
		_ = r.status.Close()
	}
	for _, cs := range r.conns {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	for _, c := range r.direct {
		_ = c.Close()
	}
	for _, ps := range r.proxies {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	if r.cluster != nil {
		_ = r.cluster.Close()
	}
}

// worker is one workload client's loop.
type worker struct {
	id   int
	rng  *rand.Rand // only the worker's goroutine uses it
	gate *gate

	mu   sync.Mutex
	plan *Plan // the scripted plan for the next critical section
}

func (w *worker) takePlan(def Plan) Plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.plan == nil {
		return def
	}
	p := *w.plan
	w.plan = nil
	return p
}

func (w *worker) setPlan(p Plan) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.plan = &p
}

// work loops on Do until ctx ends: acquire, run the critical section, release.
func (r *Run) work(ctx context.Context, w *worker) {
	for {
		if !w.gate.pass(ctx) {
			return
		}
		p := w.takePlan(r.defPlan)
		key := r.keys[w.rng.IntN(len(r.keys))]
		asked := r.rec.Now()
		hold := -1
		err := r.clients[w.id].Do(ctx, key, r.ttl, func(fctx context.Context, l *redlock.Lock) error {
			hold = r.rec.BeginHold(Hold{Client: w.id, Key: key, Token: l.Token(), LockID: l.ID(), Role: p.Role,
				Asked: asked, Granted: r.rec.Now(), Until: r.rec.Offset(l.Until())})
			defer func() { r.rec.EndHold(hold, r.rec.Now()) }()
			return r.critical(fctx, w, l, hold, p)
		})
		if hold >= 0 && errors.Is(err, redlock.ErrLockLost) {
			r.rec.MarkLost(hold)
		}
		if ctx.Err() != nil {
			return
		}
		if hold < 0 && p.Role != "" {
			w.setPlan(p) // not acquired: the scripted plan is for the next section
		}
	}
}

// critical is one critical section under lock l.
func (r *Run) critical(fctx context.Context, w *worker, l *redlock.Lock, hold int, p Plan) error {
	for seq := 0; seq < p.Writes; seq++ {
		if seq > 0 && p.Gap > 0 {
			t := time.NewTimer(p.Gap) // the work between two writes
			select {
			case <-t.C:
			case <-fctx.Done():
				t.Stop()
				return context.Cause(fctx)
			}
		}
		until := l.Until()
		r.rec.SeeUntil(hold, r.rec.Offset(until))
		if fctx.Err() != nil {
			return context.Cause(fctx)
		}
		if !time.Now().Before(until) {
			return errPastValidity
		}
		if p.Before != nil {
			p.Before(fctx, hold, seq)
		}
		req := WriteReq{Client: w.id, Hold: hold, Key: l.Key(), Token: l.Token(), Seq: seq}
		ok := false
		if p.Send != nil {
			var err error
			if ok, err = p.Send(fctx, req); err != nil {
				return err
			}
		} else {
			ok = r.reg.Write(req)
		}
		if !ok {
			return &redlock.StaleTokenError{Resource: l.Key(), Got: l.Token()}
		}
	}
	return nil
}

// gate lets a fault script park workers between two critical sections.
type gate struct {
	mu      sync.Mutex
	shut    bool
	waiting bool
	wake    chan struct{} // closed and replaced on every change
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

func (g *gate) changed() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// pass returns once the gate is open, or false when ctx ends.
func (g *gate) pass(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.shut {
		if !g.waiting {
			g.waiting = true
			g.changed()
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		g.mu.Lock()
		if ctx.Err() != nil {
			break
		}
	}
	if g.waiting {
		g.waiting = false
		g.changed()
	}
	return ctx.Err() == nil
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != shut {
		g.shut = shut
		g.changed()
	}
}

// awaitParked waits until the worker waits at its shut gate.
func (g *gate) awaitParked(ctx context.Context, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		g.mu.Lock()
		ok, wake := g.waiting, g.wake
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return fmt.Errorf("chaos: a client did not finish its critical section within %v", limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Soak lets the workload run for d: the length of a phase of the experiment.
func (r *Run) Soak(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pause stops the calling goroutine for d, whatever happens meanwhile: the fault of a
// process pause, not a wait for anything. It returns early only when ctx ends.
func Pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ParkAll parks every client between two critical sections and returns once they all
// wait: their current sections have ended and their locks are released. They stay parked
// until Begin, Unpark or UnparkAll. (Parking everyone, rather than everyone but the next
// actor, keeps the actor from starving the others while they finish.)
func (r *Run) ParkAll(ctx context.Context) error {
	for _, w := range r.workers {
		w.gate.set(true)
	}
	for _, w := range r.workers {
		if err := w.gate.awaitParked(ctx, r.waitLimit()); err != nil {
			return err
		}
	}
	r.rec.Note("every client parked")
	return nil
}

// waitLimit bounds the waits of choreography steps that should take about a TTL.
func (r *Run) waitLimit() time.Duration { return 5*r.ttl + 5*time.Second }

// Begin hands client actor the plan for its next critical section, lets it go on if it
// was parked, and returns the hold ID once that section has begun.
func (r *Run) Begin(ctx context.Context, actor int, p Plan) (int, error) {
	r.workers[actor].setPlan(p)
	r.workers[actor].gate.set(false)
	hold := -1
	err := r.rec.Await(ctx, r.waitLimit(), fmt.Sprintf("client %d to begin its %q section", actor, p.Role), func(h *History) bool {
		for i := len(h.Holds) - 1; i >= 0; i-- {
			if hd := h.Holds[i]; hd.Client == actor && hd.Role == p.Role {
				hold = hd.ID
				return true
			}
		}
		return false
	})
	if err == nil {
		r.rec.Note("client %d holds the lock with token %d (hold %d, %q)", actor, r.token(hold), hold, p.Role)
	}
	return hold, err
}

func (r *Run) token(hold int) (t redlock.Token) {
	r.rec.View(func(h *History) { t = h.Holds[hold].Token })
	return t
}

// Unpark lets the listed clients go on.
func (r *Run) Unpark(clients ...int) {
	r.rec.Note("clients %v go on", clients)
	for _, c := range clients {
		r.workers[c].gate.set(false)
	}
}

// Park shuts the listed clients' gates: each parks after its current critical section, and
// stays parked until Begin, Unpark or UnparkAll. It does not wait.
func (r *Run) Park(clients ...int) {
	r.rec.Note("clients %v park after their current section", clients)
	for _, c := range clients {
		r.workers[c].gate.set(true)
	}
}

// UnparkAll lets every parked client go on.
func (r *Run) UnparkAll() {
	for _, w := range r.workers {
		w.gate.set(false)
	}
}

// Other returns a client other than c, chosen with Rand.
func (r *Run) Other(c int) int {
	return (c + 1 + r.Rand.IntN(r.nClients-1)) % r.nClients
}

// AwaitHoldEnd waits until the hold's critical section has ended.
func (r *Run) AwaitHoldEnd(ctx context.Context, hold int, limit time.Duration) error {
	return r.rec.Await(ctx, limit, fmt.Sprintf("hold %d to end", hold), func(h *History) bool {
		return !h.Holds[hold].Open
	})
}

// AwaitNewerWrite waits until the store has accepted a write to the hold's key with a
// higher token than the hold's: a newer holder has written.
func (r *Run) AwaitNewerWrite(ctx context.Context, hold int, limit time.Duration) error {
	return r.rec.Await(ctx, limit, fmt.Sprintf("a write newer than hold %d's", hold), func(h *History) bool {
		hd := h.Holds[hold]
		for _, w := range h.Writes {
			if w.Key == hd.Key && w.Accepted && w.Token > hd.Token {
				return true
			}
		}
		return false
	})
}

// NoteCounters notes every node's fence counter for the key and what it holds there, read
// directly from the nodes.
func (r *Run) NoteCounters(ctx context.Context, what string) {
	st, err := r.status.Status(ctx, r.keys[0])
	if err != nil {
		r.rec.Note("%s: status: %v", what, err)
		return
	}
	var b strings.Builder
	for _, ns := range st.Nodes {
		switch {
		case ns.Err != nil:
			fmt.Fprintf(&b, " node %d: no answer;", ns.Node)
		default:
			fmt.Fprintf(&b, " node %d: counter %d;", ns.Node, ns.Counter)
		}
	}
	r.rec.Note("%s:%s", what, strings.TrimSuffix(b.String(), ";"))
}

// Partition lets each client named in reach talk only to the listed nodes: the links from
// that client to every other node are blackholed (requests vanish, nothing comes back).
// Clients not named keep every link. It returns the fault's ID for Heal.
func (r *Run) Partition(reach map[int][]int, note string) int {
	var clients []int
	for c := range r.nClients {
		nodes, ok := reach[c]
		if !ok {
			continue
		}
		clients = append(clients, c)
		for n, px := range r.proxies[c] {
			px.SetBlackhole(!slices.Contains(nodes, n))
		}
	}
	return r.rec.BeginFault("partition", nil, clients, note)
}

// Isolate blackholes every link of one client: seen from the nodes, the client process has
// stopped (no renewal goes out, nothing comes back). It returns the fault's ID for Heal.
func (r *Run) Isolate(client int, note string) int {
	for _, px := range r.proxies[client] {
		px.SetBlackhole(true)
	}
	return r.rec.BeginFault("client paused", nil, []int{client}, note)
}

// Heal ends a Partition or an Isolate: the clients' links pass traffic again, and their
// connections are dropped so that requests swallowed meanwhile do not linger.
func (r *Run) Heal(fault int) {
	var clients []int
	open := false
	r.rec.View(func(h *History) { clients, open = slices.Clone(h.Faults[fault].Clients), h.Faults[fault].Open })
	if !open {
		return
	}
	for _, c := range clients {
		for _, px := range r.proxies[c] {
			px.SetBlackhole(false)
			px.Drop()
		}
	}
	r.rec.EndFault(fault)
}

func (r *Run) healAll() {
	for _, ps := range r.proxies {
		for _, px := range ps {
			px.SetBlackhole(false)
			px.SetDelay(0, 0)
		}
	}
	r.UnparkAll()
}

// SlowNode delays every client's traffic to and from node n by d in each direction.
func (r *Run) SlowNode(n int, d time.Duration) int {
	for c := range r.nClients {
		r.proxies[c][n].SetDelay(d, d)
	}
	return r.rec.BeginFault("slow node", []int{n}, nil, fmt.Sprintf("+%v each way", d))
}

// UnslowNode ends a SlowNode fault.
func (r *Run) UnslowNode(fault int) {
	var nodes []int
	r.rec.View(func(h *History) { nodes = slices.Clone(h.Faults[fault].Nodes) })
	for _, n := range nodes {
		for c := range r.nClients {
			r.proxies[c][n].SetDelay(0, 0)
		}
	}
	r.rec.EndFault(fault)
}

// KillNode kills node n with SIGKILL. It returns the fault's ID; RestartNode ends it.
func (r *Run) KillNode(n int) (int, error) {
	if err := r.nodes[n].Kill(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node down", []int{n}, nil, "kill -9"), nil
}

// RestartNode starts a killed node again (replaying its AOF when the scenario persists,
// empty otherwise) and ends the fault.
func (r *Run) RestartNode(ctx context.Context, n, fault int) error {
	if err := r.nodes[n].Restart(ctx); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// CrashRestart kills node n and starts it again at once: with the scenario's persistence
// the node comes back with its keys, without it the node comes back empty.
func (r *Run) CrashRestart(ctx context.Context, n int) error {
	what := "kill -9, restart without persistence (empty)"
	if r.Scenario.setup.persist {
		what = "kill -9, restart replaying the AOF (appendfsync always)"
	}
	f := r.rec.BeginFault("node restart", []int{n}, nil, what)
	err := r.nodes[n].Restart(ctx) // Restart kills the running process first
	r.rec.EndFault(f)
	return err
}

// PauseNode stops node n with SIGSTOP; ResumeNode ends it.
func (r *Run) PauseNode(n int) (int, error) {
	if err := r.nodes[n].Pause(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node paused", []int{n}, nil, "SIGSTOP"), nil
}

// ResumeNode continues a paused node with SIGCONT and ends the fault.
func (r *Run) ResumeNode(n, fault int) error {
	if err := r.nodes[n].Resume(); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// jumpScript emulates a forward step of d milliseconds of one node's clock, as far as key
// expiry goes: every key with a TTL loses d ms of it, and a key whose TTL runs out is
// deleted. (libfaketime hangs Debian's redis-server at start, so the lab cannot step a real
// node's clock.) KEYS is fine here: a lab node holds a handful of keys.
var jumpScript = redis.NewScript(`
local d = tonumber(ARGV[1])
local expired, shortened = 0, 0
for _, k in ipairs(redis.call("KEYS", "*")) do
  local t = redis.call("PTTL", k)
  if t > 0 then
    if t <= d then
      redis.call("DEL", k)
      expired = expired + 1
    else
      redis.call("PEXPIRE", k, t - d)
      shortened = shortened + 1
    end
  end
end
return {expired, shortened}
`)

// JumpNode makes node n's clock jump forward by d, emulated with jumpScript.
func (r *Run) JumpNode(ctx context.Context, n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := jumpScript.Run(ctx, r.direct[n], nil, d.Milliseconds()).Int64Slice()
	if err != nil {
		return fmt.Errorf("chaos: clock jump on node %d: %w", n, err)
	}
	r.rec.Event("clock jump", []int{n}, nil, fmt.Sprintf("+%v: %d keys expired, %d shortened", d, res[0], res[1]))
	return nil
}

// sample reads every key's state on every node, directly (not through the proxies), every
// SampleEvery, and records the spans of time during which it did not change.
func (r *Run) sample(ctx context.Context) {
	type cur struct {
		span NodeSpan
		ok   bool
	}
	open := make([][]cur, len(r.keys))
	for k := range open {
		open[k] = make([]cur, len(r.nodes))
	}
	flush := func(now time.Duration) {
		for k := range open {
			for n := range open[k] {
				if c := open[k][n]; c.ok && now > c.span.From {
					c.span.To = now
					r.rec.addSpan(c.span)
				}
			}
		}
	}
	tick := time.NewTicker(r.Profile.SampleEvery)
	defer tick.Stop()
	for {
		for k, key := range r.keys {
			st, err := r.status.Status(ctx, key)
			if err != nil {
				flush(r.rec.Now())
				return
			}
			now := r.rec.Now()
			for n, ns := range st.Nodes {
				s := NodeSpan{Key: key, Node: n, From: now, LockID: ns.Holder, Down: ns.Err != nil}
				c := &open[k][n]
				if c.ok && c.span.LockID == s.LockID && c.span.Down == s.Down {
					continue
				}
				if c.ok {
					c.span.To = now
					r.rec.addSpan(c.span)
				}
				*c = cur{span: s, ok: true}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			flush(r.rec.Now())
			return
		}
	}
}
