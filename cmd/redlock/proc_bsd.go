//go:build unix && !linux

package main

// Process groups for exec's command on the BSDs and macOS: no parent-death signal, and a
// group counts as alive while any member exists, zombies included.

import (
	"errors"
	"syscall"
)

// childSysProcAttr puts the command in a process group of its own, so that signals reach
// everything it starts; with foreground set, the group also becomes the terminal's
// foreground group (tty is the terminal's descriptor). Unlike on Linux, nothing kills the
// command if redlock itself is killed with SIGKILL.
func childSysProcAttr(foreground bool, tty int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Foreground: foreground, Ctty: tty}
}

// groupAlive reports whether the process group pgid still exists. Zombies count as alive
// here, so a group whose orphans nobody reaps is only given up on after SIGKILL.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}
