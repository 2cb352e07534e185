// Package testutil holds the small helpers that several packages' tests and test harnesses
// share: free loopback ports, the skip-or-fail check for a missing program, a buffer safe for
// concurrent writers, and a bounded polling wait.
package testutil

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// FreePort asks the kernel for a loopback port that is unused at the moment of the call.
// Another process may take it before the caller binds it.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct loopback ports that were all unused at the moment of the call:
// it holds n listeners open at once, so the kernel cannot hand out the same port twice, and
// closes them before returning.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	ports := make([]int, 0, n)
	var err error
	for range n {
		var l net.Listener
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			break
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("find free port: %w", err)
	}
	return ports, nil
}

// FreePortT is FreePort for a test: it fails the test if no port can be found.
func FreePortT(tb testing.TB) int {
	tb.Helper()
	port, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// SkipOrFail ends a test that cannot run because something it needs is missing. When the
// environment variable env is "1" the test fails (a CI run sets it, so that a missing program
// cannot pass unnoticed); otherwise it is skipped. missing says what is missing ("redis-server
// not found on PATH"), needs what the test needs ("a real Redis"), and install how to get it.
// Both messages name env. SkipOrFail does not return: it ends the test's goroutine as
// tb.Fatalf and tb.Skipf do.
func SkipOrFail(tb testing.TB, env, missing, needs, install string) {
	tb.Helper()
	if os.Getenv(env) == "1" {
		tb.Fatalf("%s and %s=1: %s", missing, env, install)
	}
	tb.Skipf("%s; skipping a test that needs %s (%s; set %s=1 to make its absence fail the tests)", missing, needs, install, env)
}

// SyncBuffer is a bytes.Buffer whose methods are safe for concurrent use, for a process's
// output that copier goroutines write while the test reads it. The zero value is empty and
// ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns a copy of what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pollInterval is the pause between two evaluations of WaitFor's condition.
const pollInterval = time.Millisecond

// WaitFor evaluates cond every millisecond until it returns true, and fails the test, naming
// what it waited for, if it still has not after timeout. cond runs on the test's goroutine.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}
