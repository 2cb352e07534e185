package faultproxy

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

func setup(t *testing.T) (*Proxy, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	p, err := Start(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rc := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialerRetries: 1})
	t.Cleanup(func() { rc.Close() })
	return p, rc
}

func ping(rc *redis.Client, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := rc.Ping(ctx).Err()
	return time.Since(start), err
}

func TestForwardAndDelay(t *testing.T) {
	p, rc := setup(t)
	if _, err := ping(rc, time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(30*time.Millisecond, 20*time.Millisecond)
	rtt, err := ping(rc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 50*time.Millisecond {
		t.Fatalf("round trip %v with 30ms+20ms of delay", rtt)
	}
	p.SetDelay(0, 0)
	if _, err := ping(rc, time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestBlackhole(t *testing.T) {
	p, rc := setup(t)
	if _, err := ping(rc, time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetBlackhole(true)
	var ne net.Error
	if _, err := ping(rc, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("ping through a blackhole: %v, want a timeout", err)
	}
	p.SetBlackhole(false)
	p.Drop() // the swallowed request left that connection out of step
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := ping(rc, time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no answer after the blackhole lifted: %v", err)
		}
	}
}

func TestRefuseAndDrop(t *testing.T) {
	p, rc := setup(t)
	if _, err := ping(rc, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	_, err := ping(rc, time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("ping while refusing: %v", err)
	}
	if err := p.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := ping(rc, time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no answer after refusing ended: %v", err)
		}
	}
	p.Drop()
	p.Close()
	p.Close()
}
