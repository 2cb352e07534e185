//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

// The terminal on systems that have job control: handing it to exec's command and back,
// and its size for top.

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// foregroundTTY reports whether stdin is redlock's controlling terminal and redlock's
// process group is in its foreground, and returns the descriptor. A command started in a
// process group of its own must then be made the foreground group: otherwise it is stopped
// (SIGTTIN) as soon as it reads the terminal, and Ctrl-C would not reach it directly.
func foregroundTTY() (int, bool) {
	fd := int(os.Stdin.Fd())
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	if errno != 0 { // not a terminal, or not ours
		return 0, false
	}
	return fd, int(pgrp) == syscall.Getpgrp()
}

// restoreForeground makes redlock's process group the terminal's foreground group again,
// after the command's group had it. A background group that changes the foreground group
// gets SIGTTOU unless it ignores it, so it is ignored for the call.
func restoreForeground(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}

// terminalSize reports whether fd is a terminal, and its size in rows and columns (0 when
// the terminal does not say, as a new pseudo-terminal does not).
func terminalSize(fd int) (rows, cols int, ok bool) {
	var ws struct{ row, col, xpixel, ypixel uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0, false
	}
	return int(ws.row), int(ws.col), true
}
