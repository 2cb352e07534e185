package chaos

// One run of a scenario: the profiles that size it, the Run a script works with, and
// building, running and tearing down its cluster of real nodes, fault proxies and clients.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// Run is one execution of a scenario: real redis-server nodes, a fault proxy for every
// (client, node) pair, one redlock.Client per workload client, the fenced store and the
// recorder. Fault scripts drive it with the methods below.
//
// In a scenario with a Sentinel node, node 0 is not one redis-server but a Sentinel group:
// a master, its replica and three Sentinels (redisproc.StartSentinelGroup), reached through
// go-redis failover clients, which ask the Sentinels for the master's address. The link from
// a client to that node is then one fault proxy per redis-server of the group: the failover
// client's dialer sends each connection to the proxy of the address the Sentinels gave, so
// the link's faults follow the node through a failover. The Sentinels themselves are
// reached directly.
type Run struct {
	Scenario *Scenario
	Profile  Profile
	// Rand drives the script's choices (which client, which nodes). Seeded per run, so a
	// run's choreography is reproducible from its seed; timings are not.
	Rand *rand.Rand

	rec     *Recorder
	reg     *Register
	cluster *redisproc.Cluster
	nodes   []*redisproc.Node // [node]; nil for the Sentinel node
	group   *redisproc.SentinelGroup
	// groupNode is the index of the Sentinel node, -1 when every node is one redis-server.
	groupNode int
	// proxies holds every link's proxies, [client][node]: one for a plain node, one per
	// redis-server of the group for the Sentinel node.
	proxies  [][][]*faultproxy.Proxy
	conns    [][]*redis.Client // [client][node], through the proxies
	direct   []*redis.Client   // [node], for the sampler and the clock jump
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
	h := r.rec.Finish(r.reg.Contents())
	v := Check(h, p.LinTimeout)
	res := &Result{Scenario: s.Name, Run: run, Seed: seed, History: h, Verdict: v}
	if scriptErr != nil {
		res.Problems = append(res.Problems, "the fault script did not go as planned: "+scriptErr.Error())
	}
	res.Problems = append(res.Problems, s.Expect.judge(h, v)...)
	return res, nil
}

// start builds the run's cluster and clients: the nodes (and the Sentinel group), the
// sampler's direct connections, one Client per workload client through its own fault
// proxies, the warm-up, and the recorder and store. On error, whatever it started is
// stopped.
func (s *Scenario) start(ctx context.Context, p Profile, run int, seed uint64) (_ *Run, err error) {
	st := s.setup
	r := s.newRun(p, seed)
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.startNodes(startCtx, st); err != nil {
		return nil, err
	}
	retry := p.RetryDelay
	if st.storm {
		retry = p.StormRetryDelay
	}
	if err := r.startClients(st, retry, seed); err != nil {
		return nil, err
	}
	r.quorum = r.clients[0].Quorum()
	if err := r.warmUp(startCtx); err != nil {
		return nil, err
	}
	r.rec = NewRecorder(History{Scenario: s.Name, Run: run, Seed: seed, Nodes: st.nodes, Clients: r.nClients,
		Quorum: r.quorum, TTL: p.TTL, Keys: r.keys})
	r.reg = NewRegister(r.rec)
	return r, nil
}

// newRun returns the run before anything is started: its keys, its number of clients (the
// storm's in a retry storm), the script's random source and the default plan.
func (s *Scenario) newRun(p Profile, seed uint64) *Run {
	st := s.setup
	nClients := p.Clients
	if st.storm {
		nClients = p.StormClients
	}
	keys := []string{"chaos:" + s.Name}
	if st.slotKeys {
		keys[0] = "{chaos:" + s.Name + "}"
	}
	for i := 1; i < st.keys; i++ {
		keys = append(keys, fmt.Sprintf("%s:%d", keys[0], i))
	}
	r := &Run{Scenario: s, Profile: p, Rand: rand.New(rand.NewPCG(seed, 0x5eed)), keys: keys, ttl: p.TTL,
		nClients: nClients}
	r.defPlan = Plan{Writes: st.writes, Gap: p.TTL / 40}
	return r
}

// startNodes starts the nodes: the Sentinel group first when the scenario has one (node 0),
// then plain redis-server processes, with a direct connection to each and the sampler's
// Client on those.
func (r *Run) startNodes(ctx context.Context, st setup) (err error) {
	p := r.Profile
	cfg := redisproc.Config{Persist: st.persist, ExtraArgs: []string{"--maxmemory-policy", "noeviction"}}
	r.groupNode = -1
	plain := st.nodes
	if st.sentinel {
		// The lab fails the group over itself (FailoverNode); a long down-after keeps the
		// Sentinels from failing it over on their own when a loaded machine starves the master.
		r.group, err = redisproc.StartSentinelGroup(ctx, redisproc.SentinelConfig{Config: cfg, Masters: 1, Replicas: 1,
			Sentinels: 3, DownAfter: 30 * time.Second})
		if err != nil {
			return err
		}
		r.groupNode, plain = 0, st.nodes-1
		r.nodes = append(r.nodes, nil)
	}
	r.cluster, err = redisproc.Start(ctx, plain, cfg)
	if err != nil {
		return err
	}
	r.nodes = append(r.nodes, r.cluster.Nodes()...)
	for n, node := range r.nodes {
		if n == r.groupNode {
			r.direct = append(r.direct, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: groupMaster,
				SentinelAddrs: r.group.SentinelAddrs(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: p.NodeTimeout}))
			continue
		}
		r.direct = append(r.direct, redis.NewClient(&redis.Options{Addr: node.Addr(), ContextTimeoutEnabled: true,
			MaxRetries: -1, DialTimeout: p.NodeTimeout}))
	}
	r.status, err = redlock.New(universal(r.direct), redlock.WithNodeTimeout(p.NodeTimeout/2))
	return err
}

// startClients makes the workload clients: per client a connection to every node (through
// its own fault proxies unless the scenario is direct), a Client with the scenario's
// options on them, and its worker, seeded from seed.
func (r *Run) startClients(st setup, retry time.Duration, seed uint64) error {
	p := r.Profile
	for c := range r.nClients {
		var links [][]*faultproxy.Proxy
		var cs []*redis.Client
		for n := range r.nodes {
			link, conn, err := r.connect(n, st, p)
			if conn != nil {
				cs = append(cs, conn)
			}
			if link != nil {
				links = append(links, link)
			}
			if err != nil {
				r.conns = append(r.conns, cs) // so that close closes them
				r.proxies = append(r.proxies, links)
				return err
			}
		}
		if !st.direct {
			r.proxies = append(r.proxies, links)
		}
		r.conns = append(r.conns, cs)
		opts := []redlock.Option{redlock.WithNodeTimeout(p.NodeTimeout), redlock.WithRetryDelay(retry),
			redlock.WithAmnesiaTolerance(st.amnesia), redlock.WithLockDelay(time.Duration(st.lockDelay) * p.TTL)}
		if st.noHealing {
			opts = append(opts, redlock.WithoutHealing())
		}
		if st.mixedLayouts && c%2 == 1 {
			opts = append(opts, redlock.WithCounterLayout(redlock.KeyCounters))
		}
		cl, err := redlock.New(universal(cs), opts...)
		if err != nil {
			return err
		}
		r.clients = append(r.clients, cl)
		r.workers = append(r.workers, &worker{id: c, rng: rand.New(rand.NewPCG(seed, uint64(c))), gate: newGate()})
	}
	return nil
}

// groupMaster is the master name of the Sentinel node's group.
const groupMaster = "m1"

// connect makes one workload client's connection to node n: through a new fault proxy
// (unless the scenario is direct), or, for the Sentinel node, a failover client whose
// connections go through one new proxy per redis-server of the group. It returns the link's
// proxies and the connection; on error, whatever it made so far, for close to stop.
func (r *Run) connect(n int, st setup, p Profile) ([]*faultproxy.Proxy, *redis.Client, error) {
	if n != r.groupNode {
		addr := r.nodes[n].Addr()
		var link []*faultproxy.Proxy
		if !st.direct {
			px, err := faultproxy.Start(addr)
			if err != nil {
				return nil, nil, err
			}
			link, addr = []*faultproxy.Proxy{px}, px.Addr()
		}
		o := &redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: p.NodeTimeout}
		if st.noRetries {
			o.MaxRetries = -1
		}
		return link, redis.NewClient(o), nil
	}
	var link []*faultproxy.Proxy
	via := map[string]string{} // a redis-server's address → its proxy's, for this client
	if !st.direct {
		for _, node := range r.group.Nodes(groupMaster) {
			px, err := faultproxy.Start(node.Addr())
			if err != nil {
				return link, nil, err
			}
			link = append(link, px)
			via[node.Addr()] = px.Addr()
		}
	}
	o := &redis.FailoverOptions{MasterName: groupMaster, SentinelAddrs: r.group.SentinelAddrs(), ContextTimeoutEnabled: true,
		DialTimeout: p.NodeTimeout,
		// Every connection of the failover client: to the Sentinels (passed through as they
		// are) and to the master the Sentinels named (sent to its proxy).
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if px, ok := via[addr]; ok {
				addr = px
			}
			d := net.Dialer{Timeout: p.NodeTimeout}
			return d.DialContext(ctx, network, addr)
		}}
	if st.noRetries {
		o.MaxRetries = -1
	}
	return link, redis.NewFailoverClient(o), nil
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

// universal returns the clients as go-redis UniversalClients, as redlock.New takes them.
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
	for _, links := range r.proxies {
		for _, link := range links {
			for _, p := range link {
				_ = p.Close()
			}
		}
	}
	if r.cluster != nil {
		_ = r.cluster.Close()
	}
	if r.group != nil {
		_ = r.group.Close()
	}
}
