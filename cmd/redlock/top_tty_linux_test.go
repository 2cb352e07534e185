package main

// Tests of redlock top's live view on a pseudo-terminal.

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/testutil"
)

// lastFrame returns the last complete screen top drew on the terminal: the text between
// the last cursor-home and the clear-to-end-of-screen after it, "" before the first.
func lastFrame(out string) string {
	end := strings.LastIndex(out, "\x1b[J")
	if end < 0 {
		return ""
	}
	start := strings.LastIndex(out[:end], "\x1b[H")
	if start < 0 {
		return ""
	}
	return out[start+len("\x1b[H") : end]
}

// TestRealTopOnTerminal runs top on a pseudo-terminal as an operator would: it redraws the
// screen in place, a lock taken meanwhile appears with its holder, disappears once
// released, and Ctrl-C ends top with exit status 0. The password in the node URLs never
// shows, and the key's control characters show as escapes.
func TestRealTopOnTerminal(t *testing.T) {
	t.Parallel()
	_, nodes, clients := startAuthCluster(t, 3)
	lc, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()

	ptmx, pts := openPTY(t)
	defer ptmx.Close()
	ws := struct{ row, col, x, y uint16 }{row: 40, col: 200}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, pts.Fd(), syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws))); errno != 0 {
		t.Fatalf("TIOCSWINSZ: %v", errno)
	}
	cmd := exec.Command(redlockBin(t), "top", "--interval", "100ms", "--nodes", nodes)
	term := startOnTerminal(t, cmd, ptmx, pts)
	out, done := &term.out, term.done

	frames := func() int { return strings.Count(out.String(), "\x1b[H") }
	testutil.WaitFor(t, 15*time.Second, "an empty screen", func() bool {
		f := lastFrame(out.String())
		return strings.Contains(f, "redlock top") && strings.Contains(f, "(no locks held)")
	})
	const key = "pty\x1b[31mlock"
	l, err := lc.TryAcquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the lock on the screen", func() bool {
		f := lastFrame(out.String())
		return strings.Contains(f, `"pty\x1b[31mlock"`) && strings.Contains(f, l.ID()[:8]) && strings.Contains(f, "held")
	})
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	released := frames()
	testutil.WaitFor(t, 15*time.Second, "the lock to leave the screen", func() bool {
		return frames() > released+1 && strings.Contains(lastFrame(out.String()), "(no locks held)")
	})

	if _, err := ptmx.WriteString("\x03"); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("top did not exit on Ctrl-C; terminal output %q", out.String())
	}
	term.drain()
	code := cmd.ProcessState.ExitCode()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	screen := out.String()
	if code != 0 {
		t.Errorf("exit status %d after Ctrl-C, want 0; terminal output %q", code, screen)
	}
	if strings.Contains(screen, topTestPassword) || strings.Contains(screen, "redlock:") || strings.Contains(screen, "\x1b[31m") {
		t.Errorf("the terminal shows the password, an error or the key's raw escape: %q", screen)
	}
}
