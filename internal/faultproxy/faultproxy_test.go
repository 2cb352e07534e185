package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
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

// TestPartitioned: a close and a new connection do not cross a partition; both happen once
// it ends, and bytes sent during it are lost.
func TestPartitioned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	s1 := <-accepted
	defer s1.Close()

	p.SetPartitioned(true)
	if _, err := c1.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2, err := net.Dial("tcp", p.Addr()) // accepted by the proxy, not forwarded
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// Nothing reaches the server while the partition lasts: neither the bytes nor the close.
	_ = s1.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := s1.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("during the partition the server read %q, %v; want nothing until the deadline", buf[:n], err)
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a connection made during the partition reached the server")
	default:
	}

	p.SetPartitioned(false)
	_ = s1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := s1.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the partition the server read %q, %v; want the held-back close (EOF)", buf[:n], err)
	}
	select {
	case s2 := <-accepted:
		s2.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the connection made during the partition was not forwarded after it")
	}
}
