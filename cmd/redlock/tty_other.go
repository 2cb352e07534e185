//go:build unix && !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// The terminal on systems without the job-control calls exec uses: never handed to the
// command, never treated as one by top.

// foregroundTTY reports that the terminal is not handed to the command on this system.
func foregroundTTY() (int, bool) { return 0, false }

// restoreForeground does nothing on this system.
func restoreForeground(int) {}

// terminalSize reports that stdout is not treated as a terminal on this system.
func terminalSize(int) (rows, cols int, ok bool) { return 0, 0, false }
