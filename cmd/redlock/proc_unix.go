//go:build unix

package main

// Signals for exec on every Unix: which ones are forwarded, sending them to a process group,
// their names and numbers, and a finished command's exit status as a shell reports it.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// forwardedSignals are the signals that exec passes on to the command's process group
// instead of acting on them itself. SIGKILL and SIGSTOP cannot be caught; SIGTSTP, SIGTTIN
// and SIGTTOU keep their job-control meaning for redlock itself.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// signalGroup sends sig to every process of the process group pgid. A group that no longer
// exists is not an error.
func signalGroup(pgid int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("cannot send %v", sig)
	}
	if err := syscall.Kill(-pgid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// signalNames maps the signals a user is likely to meet to their usual names.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1",
	syscall.SIGUSR2: "SIGUSR2", syscall.SIGBUS: "SIGBUS",
}

// signalName returns "SIGTERM" for syscall.SIGTERM, or "signal N" for a signal without a
// well-known name.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n, ok := signalNames[s]; ok {
			return n
		}
		return fmt.Sprintf("signal %d", int(s))
	}
	return sig.String()
}

// signalNumber returns the number of sig, 0 if it has none.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// exitStatus returns the exit status a shell would report for a finished process (128+N
// when signal N killed it) and a phrase that says what happened.
func exitStatus(st *os.ProcessState) (int, string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "was killed by " + signalName(ws.Signal())
	}
	return st.ExitCode(), fmt.Sprintf("exited with status %d", st.ExitCode())
}
