package testutil

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records how a helper ended a test. Fatalf and Skipf end the calling goroutine, as
// testing.T's do, so the helper under test runs on a goroutine of its own (see run).
type fakeTB struct {
	testing.TB
	failed, skipped string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeTB on a new goroutine and returns the fakeTB once fn has ended.
func run(fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestSkipOrFail(t *testing.T) {
	const env = "REDLOCK_TESTUTIL_REQUIRE"
	call := func(tb testing.TB) { SkipOrFail(tb, env, "thing not found", "a thing", "apt-get install thing") }

	t.Setenv(env, "")
	f := run(call)
	if f.failed != "" || !strings.Contains(f.skipped, "thing not found") || !strings.Contains(f.skipped, "apt-get install thing") ||
		!strings.Contains(f.skipped, env+"=1") {
		t.Errorf("with %s unset: failed %q, skipped %q; want a skip naming the thing, the install and %s=1", env, f.failed, f.skipped, env)
	}
	for _, v := range []string{"0", "true"} {
		t.Setenv(env, v)
		if f := run(call); f.failed != "" || f.skipped == "" {
			t.Errorf("with %s=%s: failed %q, skipped %q; want a skip", env, v, f.failed, f.skipped)
		}
	}
	t.Setenv(env, "1")
	f = run(call)
	if want := "thing not found and " + env + "=1: apt-get install thing"; f.skipped != "" || f.failed != want {
		t.Errorf("with %s=1: failed %q, skipped %q; want the failure %q", env, f.failed, f.skipped, want)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	f := run(func(tb testing.TB) { WaitFor(tb, 10*time.Second, "three calls", func() bool { n++; return n == 3 }) })
	if f.failed != "" || n != 3 {
		t.Errorf("condition true on the third call: failed %q after %d calls; want no failure after 3", f.failed, n)
	}
	start := time.Now()
	f = run(func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "nothing", func() bool { return false }) })
	if want := "timed out after 20ms waiting for nothing"; f.failed != want {
		t.Errorf("condition never true: failed %q, want %q", f.failed, want)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("gave up after %v, before the 20ms timeout", waited)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("FreePorts(5) = %v: port %d twice", ports, p)
		}
		seen[p] = true
	}
	// Each port was released: it can be bound again (unless another process took it meanwhile,
	// which on a loopback port in a test is rare enough to report).
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d from FreePorts cannot be bound: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); len(got) != 8*100*2 || strings.Count(got, "ab") != 800 {
		t.Fatalf("after 800 concurrent writes of %q: %d bytes, %d copies", "ab", len(got), strings.Count(got, "ab"))
	}
}
