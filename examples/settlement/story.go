package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
)

// scenario is one run of the incident: three workers, one paused past its TTL while it holds
// the lock, resumed after another has taken over.
type scenario struct {
	name  string
	title string
	flags []string // extra flags for every worker
}

var scenarios = []scenario{
	{"fenced", "both defences on: the fencing token stops the paused worker", nil},
	{"no-fence", "fencing deliberately off: the idempotency key stops the duplicate",
		[]string{"--unsafe-no-fence"}},
	{"no-defences", "fencing off and a fresh idempotency key per attempt: the incident, a settlement paid twice",
		[]string{"--unsafe-no-fence", "--unsafe-random-idempotency-key"}},
}

// storyConfig is what a story needs from its surroundings.
type storyConfig struct {
	bin   string   // the program to run as a worker: bin worker …
	nodes []string // redis:// URLs of the lock's nodes
	dsn   string   // the ledger, already set up
	job   string   // the lock key
	ttl   time.Duration
	batch int
	log   io.Writer // every worker line, as it comes
}

// storyResult is what the story observed from the outside.
type storyResult struct {
	paused           string        // the worker that was stopped
	pausedToken      redlock.Token // its token
	pausedSettlement string        // the settlement it was about to pay
	takeoverTokens   []redlock.Token
	output           map[string][]string // each worker's lines
}

var (
	waitingLine = regexp.MustCompile(`^(\w+): waiting on stdin before paying settlement (\S+) with token (\d+)$`)
	holdingLine = regexp.MustCompile(`^\w+: holding token (\d+), paying settlement \S+$`)
)

// runStory plays one scenario:
//  1. w1 starts alone, takes the lock, pays one settlement and stops before the second at a
//     line it waits for on stdin, so the moment of the pause is exact;
//  2. w1 is paused with SIGSTOP (checked in /proc), its lock renewer frozen with it, and only
//     then given the line it waits for;
//  3. w2 and w3 start; once w1's keys expire one of them takes the lock with a larger token,
//     and together they pay everything that is due, then exit;
//  4. w1 is resumed with SIGCONT and sends its late payment with its old token. What stops it
//     (or not) is recorded in payout_attempts; it then starts over, finds nothing due, exits.
//
// Every wait is on something observable (a line, a process state, an exit), bounded by ctx.
func runStory(ctx context.Context, cfg storyConfig, sc scenario) (res storyResult, err error) {
	res.output = map[string][]string{}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
			res.output[p.name] = p.lines()
		}
	}()
	start := func(name string, extra ...string) (*proc, error) {
		args := []string{"worker", "--worker-id", name, "--nodes", strings.Join(cfg.nodes, ","),
			"--dsn", cfg.dsn, "--job", cfg.job, "--ttl", cfg.ttl.String(), "--batch", strconv.Itoa(cfg.batch)}
		args = append(append(args, sc.flags...), extra...)
		p, err := startProc(name, cfg.bin, args, cfg.log)
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}

	w1, err := start("w1", "--pause-before", "2") // pays one settlement, waits before the second
	if err != nil {
		return res, err
	}
	m, err := w1.waitLine(ctx, waitingLine)
	if err != nil {
		return res, fmt.Errorf("w1 never reached its pause point: %w", err)
	}
	res.paused, res.pausedSettlement = m[1], m[2]
	tok, _ := strconv.ParseUint(m[3], 10, 64)
	res.pausedToken = redlock.Token(tok)

	if err := w1.signal(syscall.SIGSTOP); err != nil {
		return res, err
	}
	if err := w1.waitStopped(ctx); err != nil {
		return res, err
	}
	fmt.Fprintf(cfg.log, "story: w1 holds token %d and is paused (SIGSTOP) before paying %s\n", res.pausedToken, res.pausedSettlement)
	if _, err := io.WriteString(w1.stdin, "go\n"); err != nil {
		return res, fmt.Errorf("w1 stdin: %w", err)
	}

	var others []*proc
	for _, name := range []string{"w2", "w3"} {
		p, err := start(name)
		if err != nil {
			return res, err
		}
		others = append(others, p)
	}
	for _, p := range others {
		if err := p.waitExit(ctx); err != nil {
			return res, err
		}
		for _, line := range p.lines() {
			if m := holdingLine.FindStringSubmatch(line); m != nil {
				t, _ := strconv.ParseUint(m[1], 10, 64)
				res.takeoverTokens = append(res.takeoverTokens, redlock.Token(t))
			}
		}
	}
	fmt.Fprintf(cfg.log, "story: w2 and w3 are done; resuming w1 (SIGCONT) with its old token %d\n", res.pausedToken)
	if err := w1.signal(syscall.SIGCONT); err != nil {
		return res, err
	}
	if err := w1.waitExit(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// proc is a worker process whose output lines are collected as they come.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	out     []string
	changed chan struct{} // closed and replaced when a line arrives or the output ends
	eof     bool

	readDone chan struct{}
	exited   chan struct{}
	exitErr  error
}

// startProc starts bin with args, its stdout and stderr merged into one pipe that a goroutine
// reads line by line (copying each line to log, prefixed), and a goroutine that waits for it.
func startProc(name, bin string, args []string, log io.Writer) (*proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w.Close() // the child has its own copy
	p := &proc{name: name, cmd: cmd, stdin: stdin, changed: make(chan struct{}),
		readDone: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.readDone)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(log, "  | %s\n", line)
			p.mu.Lock()
			p.out = append(p.out, line)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.eof = true
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.out...)
}

// waitLine waits for an output line matching re and returns its submatches.
func (p *proc) waitLine(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	for i := 0; ; {
		p.mu.Lock()
		lines, eof, changed := p.out[i:], p.eof, p.changed
		p.mu.Unlock()
		for _, line := range lines {
			if m := re.FindStringSubmatch(line); m != nil {
				return m, nil
			}
		}
		i += len(lines)
		if eof {
			return nil, fmt.Errorf("%s ended its output without a line matching %q", p.name, re)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no line matching %q: %w", p.name, re, ctx.Err())
		}
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: send %v: %w", p.name, sig, err)
	}
	return nil
}

// waitStopped polls /proc until the process is in the stopped state (T).
func (p *proc) waitStopped(ctx context.Context) error {
	path := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		// The state follows the command name, which is in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i:]), ") T") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not stop: %w", p.name, ctx.Err())
		case <-p.exited:
			return fmt.Errorf("%s exited instead of stopping: %v", p.name, p.exitErr)
		case <-time.After(2 * time.Millisecond): // polling interval
		}
	}
}

// waitExit waits until the process has exited and its output is read, and returns an error
// unless it exited with status 0.
func (p *proc) waitExit(ctx context.Context) error {
	select {
	case <-p.exited:
	case <-ctx.Done():
		return fmt.Errorf("%s still running: %w", p.name, ctx.Err())
	}
	<-p.readDone
	if p.exitErr != nil {
		return fmt.Errorf("%s failed: %w\n%s", p.name, p.exitErr, strings.Join(p.lines(), "\n"))
	}
	return nil
}

// stop ends the process if it is still running (resuming it first, in case it is stopped)
// and waits for both of its goroutines.
func (p *proc) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	<-p.readDone
	_ = p.stdin.Close()
}

// errStory is returned by the demo when an outcome differs from the scenario's promise.
var errStory = errors.New("the ledger is not what the scenario promises")
