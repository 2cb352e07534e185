package redisproc_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestStartRedisCluster forms a 3-shard cluster and checks what StartRedisCluster
// promises: every shard owns its slot range (asked of the shard itself), the ranges cover
// all 16384 slots, and a ClusterClient writes each key on the shard that owns its slot.
func TestStartRedisCluster(t *testing.T) {
	start := time.Now()
	c := redisproc.StartRedisClusterT(t, 3, redisproc.Config{})
	t.Logf("3-shard cluster ready in %v", time.Since(start))
	if c.Shards() != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("Shards() = %d, %d nodes; want 3", c.Shards(), len(c.Nodes()))
	}
	ctx := ctxT(t)
	shards := c.ClientsT(t)
	next := 0
	for i, rc := range shards {
		first, last := redisproc.SlotRange(3, i)
		if first != next || last < first {
			t.Fatalf("shard %d: range %d-%d does not follow slot %d", i, first, last, next-1)
		}
		next = last + 1
		slots, err := rc.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		var owned []string
		for _, s := range slots {
			if s.Nodes[0].Addr == c.Nodes()[i].Addr() {
				owned = append(owned, fmt.Sprintf("%d-%d", s.Start, s.End))
			}
		}
		if want := []string{fmt.Sprintf("%d-%d", first, last)}; !slices.Equal(owned, want) {
			t.Fatalf("shard %d says it owns %v, want %v", i, owned, want)
		}
		for _, slot := range []int{first, last} {
			if got := c.ShardOfSlot(slot); got != i {
				t.Fatalf("ShardOfSlot(%d) = %d, want %d", slot, got, i)
			}
		}
	}
	if next != redisproc.SlotCount {
		t.Fatalf("ranges end at slot %d, want %d", next-1, redisproc.SlotCount-1)
	}
	if c.ShardOfSlot(-1) != -1 || c.ShardOfSlot(redisproc.SlotCount) != -1 {
		t.Fatal("ShardOfSlot accepts a slot out of range")
	}

	cc := c.ClusterClientT(t)
	seen := map[int]bool{}
	for i := 0; len(seen) < 3; i++ {
		if i > 1000 {
			t.Fatalf("1000 keys reached only shards %v", seen)
		}
		key := fmt.Sprintf("k%d", i)
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s through the ClusterClient: %v", key, err)
		}
		slot, err := shards[0].ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		owner := c.ShardOfSlot(int(slot))
		seen[owner] = true
		for j, rc := range shards {
			// A shard answers COUNTKEYSINSLOT from its own key space, for any slot.
			n, err := rc.ClusterCountKeysInSlot(ctx, int(slot)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(0); j == owner {
				want = 1
				if n != want {
					t.Fatalf("key %s (slot %d): shard %d holds %d keys in the slot, want %d", key, slot, j, n, want)
				}
			} else if n != want {
				t.Fatalf("key %s (slot %d) found on shard %d, which does not own the slot", key, slot, j)
			}
		}
		if err := cc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}

	plain := redisproc.StartT(t, 1, redisproc.Config{})
	if plain.Shards() != 0 || plain.ShardOfSlot(0) != -1 {
		t.Fatal("a Cluster of independent nodes claims shards")
	}
	if _, err := plain.ClusterClient(); err == nil {
		t.Fatal("ClusterClient of independent nodes: no error")
	}
}

func TestStartRedisClusterBadSize(t *testing.T) {
	for _, n := range []int{0, -1, redisproc.SlotCount + 1} {
		if c, err := redisproc.StartRedisCluster(t.Context(), n, redisproc.Config{}); err == nil {
			c.Close()
			t.Fatalf("%d shards: no error", n)
		}
	}
}
