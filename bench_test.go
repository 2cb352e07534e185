package redlock

import (
	"context"
	"fmt"
	"runtime"
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
// script on one node with go-redis, no quorum, no token. Compare ratios from one run: the
// machine is shared and noisy.

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

// BenchmarkParallelAcquireRelease is TryAcquire plus Release from P goroutines at once on
// distinct keys, through one Client on 5 real nodes: the load of a service with many
// locks in flight. ns/op is per acquire+release cycle of the whole process; errors/op counts
// the acquires and releases that failed (node timeouts when the machine is saturated).
func BenchmarkParallelAcquireRelease(b *testing.B) {
	cluster := redisproc.StartT(b, 5, redisproc.Config{})
	clients := cluster.ClientsT(b)
	for _, bc := range []struct {
		p    int
		name string
		opts []Option
	}{{1, "", nil}, {64, "", nil}, {64, ",without-wakeups", []Option{WithoutWakeups()}}, {256, "", nil}, {1024, "", nil}} {
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
			b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
		})
	}
}
