package harness

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// keyRing returns n keys; a benchmark cycles through them, each released before reuse.
func keyRing(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return keys
}

// scenarioG measures allocations per TryAcquire+Release with testing.Benchmark. The loops
// call the libraries directly, not through the harness's interface, so that nothing of the
// harness is counted. testing.Benchmark counts every allocation in the process while the
// timer runs, so the replies that arrive after a quorum has been reached (and the
// goroutines that wait for them) are included, as they should be.
func (r *runner) scenarioG(ctx context.Context) error {
	if f := flag.Lookup("test.benchtime"); f != nil && r.cfg.BenchTime != "" {
		if err := f.Value.Set(r.cfg.BenchTime); err != nil {
			return fmt.Errorf("benchtime %q: %w", r.cfg.BenchTime, err)
		}
	}
	addrs := r.addrs[:5]
	o, err := newOurs(addrs)
	if err != nil {
		return err
	}
	defer o.close()
	unfenced, err := newOurs(addrs, redlock.WithoutFencing())
	if err != nil {
		return err
	}
	defer unfenced.close()
	rsd, rsf := newRsync(addrs, false), newRsync(addrs, true)
	defer rsd.close()
	defer rsf.close()
	single, fan := newFloorSingle(addrs[0]), newFloorFanout(addrs)
	defer single.close()
	defer fan.close()
	src, _, err := acquireLua()
	if err != nil {
		return err
	}
	qset, qlua := newFloorQuorum(addrs, nil), newFloorQuorum(addrs, redis.NewScript(src))
	defer qset.close()
	defer qlua.close()

	// A failed cycle (a node slower than the node timeout on a busy machine) is counted and
	// skipped rather than ending the benchmark; the count is reported. b.Fatal's message
	// would be lost outside a test binary.
	failures := make([]int, 8)
	var ops int64 // iterations over all the invocations of the current loop
	lastErr := make([]error, 8)
	cur := 0
	fail := func(_ *testing.B, name string, err error) {
		failures[cur]++
		lastErr[cur] = fmt.Errorf("%s: %w", name, err)
	}
	type bench struct {
		name string
		fn   func(b *testing.B)
		sent []string // the commands the loop itself sends (INFO commandstats also counts those run inside scripts)
	}
	rsLoop := func(rs *rsync, prefix string) func(b *testing.B) {
		return func(b *testing.B) {
			keys := keyRing(prefix, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			ops += int64(b.N)
			for i := 0; i < b.N; i++ {
				m := rs.rs.NewMutex(keys[i%len(keys)], rs.tryOpts...)
				if err := m.LockContext(ctx); err != nil {
					fail(b, prefix+" lock", err)
					continue
				}
				if ok, err := m.UnlockContext(ctx); !ok || err != nil {
					fail(b, prefix+" unlock", fmt.Errorf("ok=%v: %v", ok, err))
				}
			}
		}
	}
	// implLoop is TryAcquire+Release through the harness interface: ours and the floors.
	implLoop := func(f impl, prefix string) func(b *testing.B) {
		return func(b *testing.B) {
			keys := keyRing(prefix, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			ops += int64(b.N)
			for i := 0; i < b.N; i++ {
				h, err := f.try(ctx, keys[i%len(keys)])
				if err != nil {
					fail(b, prefix+" acquire", err)
					continue
				}
				if err := f.release(ctx, h); err != nil {
					fail(b, prefix+" release", err)
				}
			}
		}
	}
	scripts, setAndScripts := []string{"evalsha", "eval"}, []string{"set", "evalsha", "eval"}
	benches := []bench{
		{"ours: TryAcquire+Release", implLoop(o, "g:ours:"), scripts},
		{"redsync default: NewMutex(WithTries(1))+Lock+Unlock", rsLoop(rsd, "g:rs:"), setAndScripts},
		{"redsync fail-fast: same, WithFailFast(true)", rsLoop(rsf, "g:rsff:"), setAndScripts},
		{"floor: single node", implLoop(single, "g:single:"), setAndScripts},
		{"floor: naive 5-node fan-out", implLoop(fan, "g:fanout:"), setAndScripts},
		{"floor: quorum return, SET NX", implLoop(qset, "g:qset:"), setAndScripts},
		{"floor: quorum return, acquire.lua", implLoop(qlua, "g:qlua:"), scripts},
		{"ours, WithoutFencing (no token)", implLoop(unfenced, "g:ours-nofence:"), setAndScripts},
	}
	// Warm every client (dial, load scripts) before counting.
	for i, im := range []impl{o, rsd, rsf, single, fan, qset, qlua, unfenced} {
		c := &contender{impl: im, prefix: fmt.Sprintf("g:warm%d:", i)}
		c.warm(ctx)
	}
	// Alongside allocations: this process's CPU time (getrusage), the five redis-server
	// processes' CPU time (/proc, 10 ms ticks) and the time Redis spent executing the
	// commands (INFO commandstats), each divided by the cycles of all invocations.
	statClients := newClients(addrs)
	defer closeClients(statClients)
	pids := r.nodePIDs(len(addrs))
	serverCPU := func() time.Duration { return pidsCPU(pids) }
	type cost struct {
		client, server, inRedis time.Duration
		detail                  string
	}
	costs := make([]cost, len(benches))
	results := make([]testing.BenchmarkResult, len(benches))
	for i, b := range benches {
		r.logf("g: %s", b.name)
		cur = i
		quiesce(ctx, time.Second)
		resetCmdStats(ctx, statClients)
		ops = 0
		c0, s0 := selfCPU(), serverCPU()
		results[i] = testing.Benchmark(b.fn)
		c1, s1 := selfCPU(), serverCPU()
		if results[i].N == 0 || ops == 0 {
			return fmt.Errorf("benchmark %q failed", b.name)
		}
		quiesce(ctx, time.Second) // replies still arriving belong to this loop
		in, detail := serverWork(readCmdStats(ctx, statClients), ops, b.sent)
		costs[i] = cost{client: (c1 - c0) / time.Duration(ops), server: (s1 - s0) / time.Duration(ops), inRedis: in, detail: detail}
	}

	w := r.out
	fmt.Fprintf(w, "## g: allocations per TryAcquire+Release (testing.Benchmark, benchtime %s), 5 healthy nodes\n\n", r.cfg.BenchTime)
	ours, rs := results[0], results[1]
	rows := make([][]string, len(benches))
	for i, b := range benches {
		res := results[i]
		rows[i] = []string{b.name, fmt.Sprint(res.AllocsPerOp()), fmt.Sprint(res.AllocedBytesPerOp()),
			fmt.Sprintf("%.1f µs", float64(res.NsPerOp())/1e3), fmt.Sprint(res.N),
			ratio(float64(ours.AllocsPerOp()), float64(res.AllocsPerOp())),
			ratio(float64(ours.AllocedBytesPerOp()), float64(res.AllocedBytesPerOp())), fmt.Sprint(failures[i]),
			us(costs[i].client), us(costs[i].server), us(costs[i].inRedis)}
	}
	table(w, []string{"loop", "allocs/op", "B/op", "time/op", "iterations", "ours/this allocs", "ours/this bytes", "failed cycles",
		"client CPU/op", "redis-server CPU/op", "in-Redis command time/op"}, rows)
	var ns []string
	for i, b := range benches {
		if lastErr[i] != nil {
			ns = append(ns, fmt.Sprintf("%s, last error: `%v`", b.name, lastErr[i]))
		}
	}
	notes(w, ns)
	fmt.Fprintf(w, "Commands per cycle inside Redis (calls per cycle × mean µs per call, all nodes; INFO commandstats, which also counts the commands a script runs, inside the script's own time). "+
		"In-Redis time/op adds up only the commands the loop sends itself. Both include time a server spent descheduled: 5 servers and the client share 2 CPUs.\n\n")
	var ds []string
	for i, b := range benches {
		ds = append(ds, fmt.Sprintf("%s: %s", b.name, costs[i].detail))
	}
	notes(w, ds)
	fmt.Fprintf(w, "CPU per cycle: client = this process (getrusage, includes the harness loop), redis-server = the five server processes (/proc, 10 ms ticks, so ±10%%). "+
		"redsync's `NewMutex` is inside the loop: a redsync mutex is per lock name, so a TryAcquire on a new key needs one. "+
		"Its options slice is built once, outside. Time/op here comes from sequential runs, not interleaved: use a for speed.\n\n")
	ts := []Target{{Scenario: "g", Name: "allocs/op vs redsync default", Want: fmt.Sprintf("≤ %d (redsync's)", rs.AllocsPerOp()),
		Got: fmt.Sprint(ours.AllocsPerOp()), Pass: ours.AllocsPerOp() <= rs.AllocsPerOp()}}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}
