package redisproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

const (
	logName = "redis.log"

	startAttempts   = 5                      // fresh ports tried by Start
	restartAttempts = 10                     // tries on the same port by Restart
	restartBackoff  = 50 * time.Millisecond  // pause between Restart tries
	pollInterval    = 10 * time.Millisecond  // readiness probe interval
	probeTimeout    = 250 * time.Millisecond // bound of one readiness probe
	stopGrace       = 3 * time.Second        // SIGTERM to SIGKILL delay in Close
	logTailLines    = 20
	logTailBytes    = 4096
)

var (
	errPortBusy = errors.New("port is in use")
	errExited   = errors.New("redis-server exited during start-up")
)

// Node is one redis-server process of a Cluster. It keeps its port and its
// data directory across restarts. Its methods are safe for concurrent use;
// operations on one node are serialised, operations on different nodes run
// independently.
type Node struct {
	index int
	dir   string
	cfg   Config
	// sentinel, when not empty, makes the node a Sentinel: the monitor directives of its
	// configuration file, which is written on the first start (Sentinel rewrites it with
	// what it learns, and a restart keeps that).
	sentinel string
	// port and addr are chosen by the first start, before the Cluster is
	// handed out, and never change afterwards.
	port int
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when no process has been started or it was reaped
	done   chan struct{} // closed by the reaper goroutine once cmd has exited
	paused bool
	closed bool
}

// Index returns the position of the node in its Cluster, starting at 0.
func (n *Node) Index() int { return n.index }

// Addr returns the node's "127.0.0.1:PORT" address. It stays the same across
// restarts.
func (n *Node) Addr() string { return n.addr }

// PID returns the process id of the running redis-server, or 0 when the node
// is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the node's process is alive. A paused node is
// running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

// Paused reports whether the node is running and stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.runningLocked()
}

// Kill sends SIGKILL to the node's process and waits until it has exited.
// Nothing is flushed: only what the server had already written survives.
// Killing a node that is not running does nothing.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killLocked()
}

// Restart starts the node again on the same port and in the same directory,
// killing it first if it is still running. With Config.Persist the
// append-only file is replayed, so acknowledged writes survive; without it
// the node comes back empty. Restart returns once the node answers PING or
// ctx ends.
func (n *Node) Restart(ctx context.Context) error {
	return n.restart(ctx, false)
}

// RestartEmpty is like Restart but deletes the contents of the data
// directory before starting, so the node comes back empty even with
// Config.Persist. It simulates a node that lost its state. The log file is
// kept.
func (n *Node) RestartEmpty(ctx context.Context) error {
	return n.restart(ctx, true)
}

// Pause stops the node's process with SIGSTOP. The kernel still accepts TCP
// connections on its port, but the server answers nothing until Resume.
// Pausing a paused node does nothing.
func (n *Node) Pause() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return fmt.Errorf("redisproc: pause node %d: not running", n.index)
	}
	if n.paused {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("redisproc: pause node %d: %w", n.index, err)
	}
	n.paused = true
	return nil
}

// Resume continues a node stopped by Pause with SIGCONT. Resuming a node that
// is not paused does nothing.
func (n *Node) Resume() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return fmt.Errorf("redisproc: resume node %d: not running", n.index)
	}
	if !n.paused {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("redisproc: resume node %d: %w", n.index, err)
	}
	n.paused = false
	return nil
}

func (n *Node) runningLocked() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// killLocked sends SIGKILL (which also ends a stopped process) and waits for
// the reaper goroutine.
func (n *Node) killLocked() error {
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisproc: kill node %d: %w", n.index, err)
	}
	<-n.done
	n.cmd, n.done, n.paused = nil, nil, false
	return nil
}

// close stops the node for good: SIGCONT, SIGTERM, and SIGKILL if the process
// outlives stopGrace.
func (n *Node) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.cmd == nil {
		return
	}
	p := n.cmd.Process
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-n.done:
	case <-timer.C:
		_ = p.Kill()
		<-n.done
	}
	n.cmd, n.done, n.paused = nil, nil, false
}

// start runs the node for the first time, choosing a fresh free port for
// every attempt so that a port taken by someone else between the choice and
// the bind is survived.
func (n *Node) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	for range startAttempts {
		n.port, err = testutil.FreePort()
		if err != nil {
			return fmt.Errorf("redisproc: %w", err)
		}
		n.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
		err = n.spawnLocked(ctx)
		if !errors.Is(err, errPortBusy) {
			return err
		}
	}
	return err
}

func (n *Node) restart(ctx context.Context, empty bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("redisproc: restart node %d: cluster is closed", n.index)
	}
	if err := n.killLocked(); err != nil {
		return err
	}
	if empty {
		if err := n.clearDataLocked(); err != nil {
			return err
		}
	}
	var err error
	for attempt := range restartAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(restartBackoff):
			}
		}
		err = n.spawnLocked(ctx)
		if !errors.Is(err, errPortBusy) {
			return err
		}
	}
	return err
}

// clearDataLocked deletes everything in the node directory but the log.
func (n *Node) clearDataLocked() error {
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return fmt.Errorf("redisproc: clear node %d: %w", n.index, err)
	}
	for _, e := range entries {
		if e.Name() == logName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.dir, e.Name())); err != nil {
			return fmt.Errorf("redisproc: clear node %d: %w", n.index, err)
		}
	}
	return nil
}

func (n *Node) args() ([]string, error) {
	common := []string{
		"--port", strconv.Itoa(n.port),
		"--bind", "127.0.0.1",
		"--dir", n.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(n.dir, logName),
	}
	if n.sentinel != "" {
		conf := filepath.Join(n.dir, sentinelConf)
		if _, err := os.Stat(conf); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(conf, []byte(n.sentinel), 0o644); err != nil {
				return nil, fmt.Errorf("redisproc: node %d: write %s: %w", n.index, sentinelConf, err)
			}
		}
		return append([]string{conf, "--sentinel"}, common...), nil
	}
	args := append(common, "--save", "")
	if n.cfg.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return append(args, n.cfg.ExtraArgs...), nil
}

// spawnLocked starts redis-server on n.port and waits until it answers. On
// failure the process is killed and reaped, and the error carries the log
// output of this attempt; it wraps errPortBusy when the port was taken.
func (n *Node) spawnLocked(ctx context.Context) error {
	logPath := filepath.Join(n.dir, logName)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redisproc: node %d: open log: %w", n.index, err)
	}
	var logStart int64
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}

	args, err := n.args()
	if err != nil {
		_ = logf.Close()
		return err
	}
	cmd := exec.Command(n.cfg.Binary, args...)
	cmd.Dir = n.dir
	// Early errors (bad arguments) go to stderr before the log file is
	// opened; an *os.File is handed to the child directly, without copying
	// goroutines.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("redisproc: node %d: start %s: %w", n.index, n.cfg.Binary, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.cmd, n.done, n.paused = cmd, done, false

	err = waitReady(ctx, n.addr, cmd.Process.Pid, done)
	if err == nil {
		return nil
	}
	_ = n.killLocked()
	tail := logTail(logPath, logStart)
	if errors.Is(err, errForeignServer) || strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortBusy, err)
	}
	return fmt.Errorf("redisproc: node %d on %s did not become ready: %w; log:\n%s", n.index, n.addr, err, tail)
}

// waitReady polls the server until it answers PING as process pid, the
// process exits, or ctx ends.
func waitReady(ctx context.Context, addr string, pid int, done <-chan struct{}) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := probe(ctx, addr, pid)
		if err == nil || errors.Is(err, errForeignServer) {
			return err
		}
		select {
		case <-done:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// logTail returns the last lines written to the log at or after offset from.
func logTail(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		from = max(from, fi.Size()-logTailBytes)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	out := strings.Join(lines, "\n")
	if out == "" {
		return "(empty)"
	}
	return out
}
