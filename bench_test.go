package redlock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// Benchmarks on real redis-server processes (skipped without redis-server):
//
//	go test -run '^$' -bench . -benchmem
//
// BenchmarkTryAcquireRelease/nodes=N is one TryAcquire plus one Release on N nodes
// (nodes=5,without-fencing: the same with WithoutFencing, to price the fencing token);
// BenchmarkFloorSingleNode is the least a lock can cost: SET NX PX and a compare-and-delete
// script on one node with go-redis, no quorum, no token; BenchmarkScriptCost prices the
// scripts' fast paths inside one redis-server. Compare ratios from one run: the machine is
// shared and noisy.

func BenchmarkTryAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			cluster := redisproc.StartT(b, n, redisproc.Config{})
			benchLockLoop(b, cluster.ClientsT(b))
		})
	}
	b.Run("nodes=5,without-fencing", func(b *testing.B) {
		cluster := redisproc.StartT(b, 5, redisproc.Config{})
		benchLockLoop(b, cluster.ClientsT(b), WithoutFencing())
	})
	b.Run("nodes=5,one-delayed-20ms", func(b *testing.B) {
		cluster := redisproc.StartT(b, 5, redisproc.Config{})
		clients := cluster.ClientsT(b)
		p, err := faultproxy.Start(cluster.Addrs()[4])
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		p.SetDelay(20*time.Millisecond, 20*time.Millisecond)
		slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer slow.Close()
		clients[4] = slow
		benchLockLoop(b, clients)
	})
	b.Run("nodes=5,one-hung", func(b *testing.B) {
		cluster := redisproc.StartT(b, 5, redisproc.Config{})
		clients := cluster.ClientsT(b)
		if err := cluster.Nodes()[4].Pause(); err != nil {
			b.Fatal(err)
		}
		benchLockLoop(b, clients)
		if err := cluster.Nodes()[4].Resume(); err != nil {
			b.Fatal(err)
		}
	})
}

func benchLockLoop(b *testing.B, clients []redis.UniversalClient, opts ...Option) {
	c, err := New(clients, append([]Option{WithNodeTimeout(time.Second)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		l, err := c.TryAcquire(ctx, keys[i%len(keys)], 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorSingleNode(b *testing.B) {
	cluster := redisproc.StartT(b, 1, redisproc.Config{})
	rc := cluster.ClientsT(b)[0]
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("floor:%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		key := keys[i%len(keys)]
		ok, err := rc.SetNX(ctx, key, "holder", 10*time.Second).Result()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := releaseScript.Run(ctx, rc, []string{key}, "holder").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// serversCPU is the CPU time the cluster's redis-server processes have used so far, and
// false where it cannot be read (/proc is Linux's).
func serversCPU(cluster *redisproc.Cluster) (time.Duration, bool) {
	var t time.Duration
	for _, n := range cluster.Nodes() {
		d, err := n.CPU()
		if err != nil {
			return 0, false
		}
		t += d
	}
	return t, true
}

// BenchmarkParallelAcquireRelease is TryAcquire plus Release from P goroutines at once on
// distinct keys, through one Client on 5 real nodes: the load of a service with many
// locks in flight. ns/op is per acquire+release cycle of the whole process; errors/op counts
// the acquires and releases that failed (node timeouts when the machine is saturated);
// server-µs/op (Linux) is the CPU the five redis-server processes spent per cycle (/proc,
// 10 ms ticks: use enough cycles), which with the client's own bounds the rate when the
// client and the servers share the machine's cores (bench/run.sh -scenarios p prints both). The
// node-concurrency variants compare pipelines per node in one process (DefaultNodeConcurrency
// was chosen across processes, bench scenario procsd):
//
//	go test -run '^$' -bench 'ParallelAcquireRelease/P=256' -benchtime 20000x -count 3
func BenchmarkParallelAcquireRelease(b *testing.B) {
	cluster := redisproc.StartT(b, 5, redisproc.Config{})
	clients := cluster.ClientsT(b)
	for _, bc := range []struct {
		p    int
		name string
		opts []Option
	}{{1, "", nil}, {64, "", nil}, {64, ",without-wakeups", []Option{WithoutWakeups()}}, {256, "", nil}, {1024, "", nil},
		// Pipelines in flight per node, against the default of 1.
		{256, ",node-concurrency=2", []Option{WithNodeConcurrency(2)}},
		{256, ",node-concurrency=4", []Option{WithNodeConcurrency(4)}},
		{256, ",node-concurrency=8", []Option{WithNodeConcurrency(8)}},
		{256, ",node-concurrency=16", []Option{WithNodeConcurrency(16)}}} {
		p := bc.p
		b.Run(fmt.Sprintf("P=%d%s", p, bc.name), func(b *testing.B) {
			c, err := New(clients, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			var next, failed atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(max(1, p/runtime.GOMAXPROCS(0)))
			server0, _ := serversCPU(cluster)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Sprintf("par:%d", next.Add(1))
					l, err := c.TryAcquire(ctx, key, 10*time.Second)
					if err != nil {
						failed.Add(1) // a node timeout on a saturated machine; counted
						continue
					}
					if err := l.Release(ctx); err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
			if server1, ok := serversCPU(cluster); ok {
				b.ReportMetric(float64((server1-server0).Microseconds())/float64(b.N), "server-µs/op")
			}
		})
	}
}

// pathCounter is an Observer that counts acquire attempts by the path that decided them.
type pathCounter struct {
	BaseObserver
	won, raised, other atomic.Int64
}

func (p *pathCounter) Attempt(_ context.Context, a Attempt) {
	switch {
	case a.Outcome == OutcomeOK && a.Raised:
		p.raised.Add(1)
	case a.Outcome == OutcomeOK:
		p.won.Add(1)
	default:
		p.other.Add(1)
	}
}

// BenchmarkCounterLayouts compares the two fence-counter layouts (docs/design.md §5.11) on
// a load of many distinct keys: P goroutines at once, each TryAcquire plus Release on a key no
// one locked before, one Client, 5 real nodes; the layouts alternate within one run.
// fastpath is the share of won attempts decided on the fast path (one round trip), raised
// the share that needed the raise, failed/op the attempts that did not win. With the slot
// layout, two keys of one slot acquired at once can reach the nodes in different orders and
// get different counter values: the price this benchmark measures. A token is at least the
// acquiring client's clock in microseconds, which usually decides it on every node alike;
// the variant slot,counters-ahead first sets every slot counter an hour ahead of the clock,
// so that every token is one more than a shared counter (the plain shared INCR, and a fleet
// in which one client's clock ran ahead).
//
//	go test -run '^$' -bench CounterLayouts -benchtime 20000x
func BenchmarkCounterLayouts(b *testing.B) {
	cluster := redisproc.StartT(b, 5, redisproc.Config{})
	clients := cluster.ClientsT(b)
	var round atomic.Int64
	type variant struct {
		layout CounterLayout
		ahead  bool
	}
	for _, p := range []int{64, 256} {
		for _, v := range []variant{{SlotCounters, false}, {KeyCounters, false}, {SlotCounters, true}} {
			layout := v.layout
			name := fmt.Sprintf("P=%d,layout=%v", p, layout)
			for _, rc := range clients { // each variant starts from empty nodes
				if err := rc.FlushAll(context.Background()).Err(); err != nil {
					b.Fatal(err)
				}
			}
			if v.ahead {
				name += ",counters-ahead"
				ahead := time.Now().Add(time.Hour).UnixMicro()
				for _, rc := range clients {
					pipe := rc.Pipeline()
					for slot := range 16384 {
						pipe.Set(context.Background(), SlotCounterPrefix+"{"+slotTag(uint16(slot))+"}", ahead, 0)
					}
					if _, err := pipe.Exec(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run(name, func(b *testing.B) {
				paths := &pathCounter{}
				c, err := New(clients, WithCounterLayout(layout), WithObserver(paths))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				prefix := fmt.Sprintf("cl%d:", round.Add(1))
				var next atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(max(1, p/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l, err := c.TryAcquire(ctx, prefix+fmt.Sprint(next.Add(1)), 10*time.Second)
						if err != nil {
							continue // counted by the observer
						}
						_ = l.Release(ctx)
					}
				})
				b.StopTimer()
				won, raised := paths.won.Load(), paths.raised.Load()
				all := won + raised + paths.other.Load()
				if all > 0 {
					b.ReportMetric(float64(won)/float64(max(1, won+raised)), "fastpath")
					b.ReportMetric(float64(raised)/float64(max(1, won+raised)), "raised")
					b.ReportMetric(float64(paths.other.Load())/float64(b.N), "failed/op")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "locks/s")
			})
		}
	}
}

// BenchmarkScriptCost measures what the two scripts with a fast path cost inside one
// redis-server, as sent and as their general path alone (the scripts before the fast path):
// release (a TryAcquire lock's release, nobody queued) and head (the acquire of a queued
// waiter told its turn: the key free, the waiter at the head of the queue). Each op sets up
// the node's state with other commands and runs the script once; server-µs/call is the
// script's usec_per_call from INFO commandstats, which counts only the EVALSHA. Compare the
// four from one run (the machine is shared and noisy):
//
//	go test -run '^$' -bench ScriptCost -count 3 .
func BenchmarkScriptCost(b *testing.B) {
	cluster := redisproc.StartT(b, 1, redisproc.Config{})
	rc := cluster.ClientsT(b)[0]
	c := newTestClient(b, []redis.UniversalClient{rc})
	ctx := context.Background()
	load := func(src string) string {
		sha, err := rc.ScriptLoad(ctx, src).Result()
		if err != nil {
			b.Fatal(err)
		}
		return sha
	}
	shas := map[string][2]string{
		"release": {load(releaseScript.src), load(queueSrc + releaseSrc)},
		// The general path alone: acquire.lua behind counters.lua and queue.lua, with tried
		// false (as TestAcquireFastMatchesGeneral runs it).
		"head": {load(acquireQueuedScript.src), load("local tried = false\n" + countersSrc + queueSrc + acquireSrc)},
	}
	const ttl = 8 * time.Second
	for _, script := range []string{"release", "head"} {
		for k, path := range []string{"sent", "general"} {
			b.Run(script+"/"+path, func(b *testing.B) {
				if err := rc.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				for i := range b.N {
					key := fmt.Sprintf("sc:%s:%s:%d", script, path, i)
					set, err := newLockKeys(key)
					if err != nil {
						b.Fatal(err)
					}
					id := newHolderID()
					q := c.newQueueArgs(key, counterSeed(time.Now()))
					var cmd *command
					if script == "release" {
						rc.Set(ctx, key, id, ttl)
						cmd = newReleaseCommand(set, id, releaseArgs{announce: true, turn: true, member: c.id, live: q.live})
					} else {
						live := time.Now().UnixMilli() + 10_000
						rc.ZAdd(ctx, q.keys.queue, redis.Z{Score: float64(q.ticket), Member: c.id}, redis.Z{Score: float64(q.ticket + 1), Member: "next"})
						rc.HSet(ctx, q.keys.waiters, c.id, live, "next", live)
						cmd = newAcquireCommand(set, acquireArgs{id: id, px: c.keyTTLMillis(ttl), seed: counterSeed(time.Now()),
							idleMillis: c.counterIdleMillis(ttl), fenced: true, layout: c.cfg.layout, queue: q})
					}
					args := append([]any{}, cmd.args...)
					args[1] = shas[script][k]
					if err := rc.Do(ctx, args...).Err(); err != nil {
						b.Fatal(err)
					}
					if script == "head" {
						rc.Del(ctx, key, q.keys.queue, q.keys.waiters)
					}
				}
				b.StopTimer()
				st, err := rc.Info(ctx, "commandstats").Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, line := range strings.Split(st, "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
						for _, f := range strings.Split(v, ",") {
							if per, ok := strings.CutPrefix(f, "usec_per_call="); ok {
								x, _ := strconv.ParseFloat(per, 64)
								b.ReportMetric(x, "server-µs/call")
							}
						}
					}
				}
			})
		}
	}
}
