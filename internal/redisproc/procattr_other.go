//go:build unix && !linux

package redisproc

import "syscall"

// sysProcAttr puts the server in its own process group so that terminal
// signals aimed at the test binary do not reach it half-way; without
// Pdeathsig outside Linux, Close must be called to stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
