package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// busyEnv, when set in a process's environment, makes that process a busy loop of scenario
// starve: it spins on every CPU until its stdin closes (RunWorkerIfAsked).
const busyEnv = "REDLOCK_BENCH_BUSY"

// runBusy spins GOMAXPROCS goroutines until in ends.
func runBusy(in io.Reader) {
	for range runtime.GOMAXPROCS(0) {
		go func() {
			x := 0
			for {
				x++
			}
		}()
	}
	_, _ = io.Copy(io.Discard, in)
}

// startBusy starts n busy-loop processes (this binary re-executed); stop ends them.
func startBusy(n int) (stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	var ins []io.WriteCloser
	stop = func() {
		for _, in := range ins {
			_ = in.Close()
		}
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command(exe)
		c.Env = append(os.Environ(), busyEnv+"=1")
		in, err := c.StdinPipe()
		if err != nil {
			stop()
			return nil, err
		}
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds, ins = append(cmds, c), append(ins, in)
	}
	return stop, nil
}

// Scenario starve, renewals under CPU starvation: StarveH Do calls with a TTL of
// StarveTTL hold their locks for StarveHold while StarveBusy processes spin on every CPU
// beside the benchmark (a pod with a CPU limit, or another test suite on the same cores).
func (r *runner) scenarioStarve(ctx context.Context) error {
	stop, err := startBusy(r.cfg.StarveBusy)
	if err != nil {
		return err
	}
	r.logf("starve: %d busy-loop processes; %d concurrent Do holding %s, TTL %s", r.cfg.StarveBusy, r.cfg.StarveH, r.cfg.StarveHold, r.cfg.StarveTTL)
	x, err := r.runHeld(ctx, r.cfg.StarveH, r.cfg.StarveHold, r.cfg.StarveTTL)
	stop()
	if err != nil {
		return err
	}
	w := r.out
	fmt.Fprintf(w, "## starve: %d concurrent `Client.Do`, TTL %s, held %s, beside %d busy-loop processes (ours only)\n\n", r.cfg.StarveH, r.cfg.StarveTTL, r.cfg.StarveHold, r.cfg.StarveBusy)
	fmt.Fprintf(w, "As scenario held (renewal every third of the TTL, the cancel point a tenth before the deadline), while %d processes each spin %d goroutines for the whole run, so that the benchmark gets a share of the 2 CPUs, not all of them. "+
		"Lost = Do returned an error matching ErrLockLost, or fn's context ended before the release.\n\n", r.cfg.StarveBusy, runtime.GOMAXPROCS(0))
	var ns []string
	if x.lastErr != nil {
		ns = append(ns, fmt.Sprintf("last error: `%v`", x.lastErr))
	}
	table(w, []string{"H", "acquire phase", "held in window", "not acquired", "locks lost", "window"},
		[][]string{{fmt.Sprint(x.h), ms(x.acqTook), fmt.Sprint(x.held), fmt.Sprint(x.acqErr), fmt.Sprint(x.lost), ms(x.window)}})
	notes(w, ns)
	ts := []Target{{Scenario: "starve", Name: fmt.Sprintf("H=%d, %d busy processes: locks lost (and none left unacquired)", x.h, r.cfg.StarveBusy),
		Want: "0", Got: fmt.Sprintf("%d lost, %d not acquired", x.lost, x.acqErr), Pass: x.lost == 0 && x.acqErr == 0}}
	targetTable(w, ts)
	r.add(ts...)
	return nil
}

// starveDefaults are the scenario's figures: 2 000 Do with a TTL of 1.5 s held for 6 s, two
// busy-loop processes.
var starveDefaults = struct {
	h         int
	ttl, hold time.Duration
	busy      int
}{2000, 1500 * time.Millisecond, 6 * time.Second, 2}
