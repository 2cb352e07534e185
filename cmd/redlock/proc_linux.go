package main

// Process groups for exec's command on Linux: the kernel kills the command if redlock dies,
// and /proc tells a live group from one of zombies.

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// childSysProcAttr puts the command in a process group of its own, so that signals reach
// everything it starts, and has the kernel SIGKILL it if redlock dies without stopping it
// (kill -9, a crash): a command must not outlive the renewals that keep its lock. With
// foreground set, the group also becomes the terminal's foreground group, so that the
// command can read the terminal and gets the keyboard's signals; tty is the terminal's
// descriptor.
func childSysProcAttr(foreground bool, tty int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Foreground: foreground, Ctty: tty, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether the process group pgid still has a process that can run.
// kill(-pgid, 0) alone also succeeds for zombies, which nobody reaps when PID 1 is not an
// init (a container), so it is confirmed from /proc: a member that is not a zombie.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: assume alive, the caller's deadline still applies
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || !bytes.Equal(f[2], want) {
			continue
		}
		if s := f[0]; !bytes.Equal(s, []byte("Z")) && !bytes.Equal(s, []byte("X")) {
			return true
		}
	}
	return false
}
