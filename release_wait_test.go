package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/redis/go-redis/v9"
)

// TestReleaseAnswersWithinTheNodeTimeout: two of five nodes stop answering and two others
// hold another holder's value, so neither Release nor Extend can reach a quorum; each must
// say so within about the node timeout (300 ms), not after the exec budget (1.2 s) that the
// calls themselves may go on for in the background. Before, releases waited for the hung
// nodes up to the exec budget: 1.2 s.
func TestReleaseAnswersWithinTheNodeTimeout(t *testing.T) {
	for _, op := range []string{"release", "extend"} {
		t.Run(op, func(t *testing.T) {
			servers, _ := miniNodes(t, 5)
			var clients []redis.UniversalClient
			var proxies []*faultproxy.Proxy
			for i, s := range servers {
				addr := s.Addr()
				if i < 2 {
					p, err := faultproxy.Start(addr)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					proxies = append(proxies, p)
					addr = p.Addr()
				}
				rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
				t.Cleanup(func() { rc.Close() })
				clients = append(clients, rc)
			}
			c := newTestClient(t, clients, WithNodeTimeout(300*time.Millisecond))
			ctx := ctxT(t, 30*time.Second)
			l, err := c.TryAcquire(ctx, testKey, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			settle(c)
			for _, s := range servers[2:4] {
				s.Set(testKey, "someone-else")
			}
			for _, p := range proxies {
				p.SetBlackhole(true)
			}
			t.Cleanup(func() {
				for _, p := range proxies {
					p.SetBlackhole(false)
					p.Drop() // the calls stuck in the hung nodes fail, so Close ends quickly
				}
			})
			start := time.Now()
			if op == "extend" {
				err = l.Extend(ctx, 10*time.Second)
			} else {
				err = l.Release(ctx)
			}
			took := time.Since(start)
			t.Logf("%s with 2 nodes hung and 2 taken over: after %v: %v", op, took, err)
			if !errors.Is(err, ErrNotHeld) {
				t.Fatalf("%s: %v, want ErrNotHeld", op, err)
			}
			if took > 900*time.Millisecond {
				t.Fatalf("%s took %v with a node timeout of 300 ms: it waited for the hung nodes past their timeout", op, took)
			}
		})
	}
}
