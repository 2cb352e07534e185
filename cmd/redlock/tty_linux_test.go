package main

// Pseudo-terminal helpers, and tests of exec on a terminal: its command as the foreground
// job, and killed with redlock.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/internal/testutil"
)

// openPTY returns the controller and the terminal side of a new pseudo-terminal.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlockpt: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("ptsname: %v", errno)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}

// terminal is a command running as a shell's foreground job on a pseudo-terminal: all it
// writes on the terminal is collected in out, and done is closed once it has exited.
type terminal struct {
	out  testutil.SyncBuffer
	done chan struct{}
	wg   sync.WaitGroup
}

// startOnTerminal starts cmd in a new session with pts as its controlling terminal and its
// stdin, stdout and stderr (what a shell does for a foreground job), closes pts on our side,
// and reads ptmx until every process has closed the terminal. At the end of the test the
// command is killed if it still runs, ptmx is closed and the reader waited for.
func startOnTerminal(t *testing.T, cmd *exec.Cmd, ptmx, pts *os.File) *terminal {
	t.Helper()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pts.Close()
	term := &terminal{done: make(chan struct{})}
	term.wg.Go(func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			_, _ = term.out.Write(buf[:n])
			if err != nil { // EIO once every process has closed the terminal
				return
			}
		}
	})
	go func() {
		_ = cmd.Wait()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			_ = cmd.Process.Kill()
			<-term.done
		}
		_ = ptmx.Close()
		term.wg.Wait()
	})
	return term
}

// drain waits until the terminal's output has been read to its end.
func (term *terminal) drain() { term.wg.Wait() }

// TestRealExecOnTerminal runs exec as a shell runs a foreground job on a terminal: the command
// can read the terminal (it is not stopped by SIGTTIN for being in a background process
// group), and Ctrl-C on the terminal reaches it.
func TestRealExecOnTerminal(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	for _, tc := range []struct {
		name  string
		input string // typed once the command printed "ready"
		want  string // in the terminal's output afterwards
		code  int
	}{
		{"reads the terminal", "hello\n", "got hello", 0},
		{"Ctrl-C reaches the command", "\x03", "", 128 + int(syscall.SIGINT)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptmx, pts := openPTY(t)
			defer ptmx.Close()
			cmd := exec.Command(redlockBin(t), "exec", "--nodes", nodes, "tty-"+strconv.Itoa(tc.code), "--",
				"sh", "-c", `echo ready; read line; echo "got $line"`)
			term := startOnTerminal(t, cmd, ptmx, pts)
			out, done := &term.out, term.done

			testutil.WaitFor(t, 15*time.Second, "the command's ready line", func() bool { return strings.Contains(out.String(), "ready") })
			if _, err := ptmx.WriteString(tc.input); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("exec did not exit; terminal output %q", out.String())
			}
			code := cmd.ProcessState.ExitCode()
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			term.drain() // the terminal is closed: all output has been read
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Errorf("exit code %d, want %d; terminal output %q, want %q in it", code, tc.code, out.String(), tc.want)
			}
			if strings.Contains(out.String(), "redlock:") {
				t.Errorf("redlock wrote on the terminal: %q", out.String())
			}
		})
	}
}

// TestRealExecKilledRedlockKillsCommand kills redlock with SIGKILL, which it cannot catch: the
// kernel must kill the command too, since nothing renews its lock any more.
func TestRealExecKilledRedlockKillsCommand(t *testing.T) {
	t.Parallel()
	_, nodes := startCluster(t, 3)
	dir := t.TempDir()
	killLeftovers(t, dir)
	p := startBin(t, nil, "exec", "--nodes", nodes, "pdeathsig", "--", "sh", "-c",
		childScript(`echo $$ > "$D/pid"; while :; do sleep 0.01; done`), "sh", dir)
	testutil.WaitFor(t, 15*time.Second, "the command to start", func() bool { return readTrim(filepath.Join(dir, "pid")) != "" })
	pid, err := strconv.Atoi(readTrim(filepath.Join(dir, "pid")))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	testutil.WaitFor(t, 10*time.Second, "the command to die with redlock", func() bool { return !processRuns(pid) })
}
