package redisproc

import "syscall"

// sysProcAttr makes the kernel kill the server when the process that
// started it dies, so a crashed test binary leaves no redis-server behind.
// (Strictly, Pdeathsig fires when the starting OS thread exits; Go only ends
// threads whose goroutine exits while locked to them, which is rare.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
