package harness

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestFloorsAcquire: every floor that sends the library's acquire script takes a free key
// and releases it on 5 real nodes. The script's keys and arguments follow lua/acquire.lua;
// when they drift from it the floors refuse every acquire ("floor: SET NX refused") and
// their rows are empty, which the report alone would not fail on.
func TestFloorsAcquire(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH; skipping (Debian: apt-get install -y redis-server)")
	}
	cluster := redisproc.StartT(t, 5, redisproc.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, _, err := acquireLua()
	if err != nil {
		t.Fatal(err)
	}
	fb, err := newFloorBatch(ctx, cluster.Addrs(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.close()
	fr, err := newFloorRueidis(cluster.Addrs(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.close()
	fq := newFloorQuorum(cluster.Addrs(), redis.NewScript(src))
	defer fq.close()
	for name, f := range map[string]interface {
		try(context.Context, string) (any, error)
		release(context.Context, any) error
	}{"batched pipelines": fb, "rueidis": fr, "quorum return, acquire.lua": fq} {
		for i := range 3 {
			key := fmt.Sprintf("floor:%s:%d", name, i)
			h, err := f.try(ctx, key)
			if err != nil {
				t.Fatalf("%s: acquire of a free key: %v", name, err)
			}
			// A release counts only where it deleted the key: so the key was set on a quorum.
			if err := f.release(ctx, h); err != nil {
				t.Fatalf("%s: release: %v", name, err)
			}
			if err := f.release(ctx, h); err == nil {
				t.Fatalf("%s: a second release found the key again", name)
			}
		}
	}
}
