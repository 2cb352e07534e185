//go:build unix && !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// foregroundTTY reports that the terminal is not handed to the command on this system.
func foregroundTTY() (int, bool) { return 0, false }

// restoreForeground does nothing on this system.
func restoreForeground(int) {}
