package redlock

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRealMemoryDistinctKeys measures the memory each node uses after
// REDLOCK_MEMORY_KEYS distinct keys (for example 1000000) were each locked once and
// released, for both counter layouts, each on three fresh redis-server nodes, 256 goroutines
// at once. It logs used_memory before and after and the number of keys left, and requires
// the slot layout to stay within 5 MB per node and to leave at most 16 384 keys. Skipped
// unless the variable is set: a million keys take minutes.
//
//	REDLOCK_MEMORY_KEYS=1000000 go test -run TestRealMemoryDistinctKeys -v -timeout 30m .
func TestRealMemoryDistinctKeys(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REDLOCK_MEMORY_KEYS"))
	if n <= 0 {
		t.Skip("set REDLOCK_MEMORY_KEYS to the number of distinct keys")
	}
	for _, layout := range []CounterLayout{SlotCounters, KeyCounters} {
		t.Run(layout.String(), func(t *testing.T) {
			cluster := redisproc.StartT(t, 3, redisproc.Config{})
			clients := cluster.ClientsT(t)
			ctx := ctxT(t, 30*time.Minute)
			before := usedMemory(t, ctx, clients)
			c := newTestClient(t, clients, WithCounterLayout(layout))
			start := time.Now()
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			for range 256 {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(n) {
							return
						}
						l, err := c.TryAcquire(ctx, fmt.Sprintf("order:%d", i), time.Minute)
						if err != nil {
							failed.Add(1)
							continue
						}
						if err := l.Release(ctx); err != nil {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			settle(c)
			elapsed := time.Since(start)
			after := usedMemory(t, ctx, clients)
			for i, rc := range clients {
				keys := rc.DBSize(ctx).Val()
				grew := after[i] - before[i]
				t.Logf("%v layout, node %d: %d keys locked in %v (%.0f/s, %d failed); used_memory %d -> %d (+%.2f MB, %.1f bytes per distinct key), %d keys left",
					layout, i, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), failed.Load(),
					before[i], after[i], float64(grew)/1e6, float64(grew)/float64(n), keys)
				if layout == SlotCounters && (grew > 5e6 || keys > 16384) {
					t.Errorf("node %d: the slot layout grew %d bytes and left %d keys", i, grew, keys)
				}
			}
		})
	}
}

func usedMemory(t *testing.T, ctx context.Context, clients []redis.UniversalClient) []int64 {
	t.Helper()
	out := make([]int64, len(clients))
	for i, rc := range clients {
		info, err := rc.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				out[i], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}
