//go:build !unix

package main

// exec on systems without process groups and POSIX signals: not available.

import (
	"context"
	"errors"
)

// runExec is not available here: exec relies on process groups and POSIX signals.
func runExec(context.Context, *env, []string) error {
	return errors.New("exec: not supported on this operating system (it needs process groups and POSIX signals)")
}

// runElect is not available here either: it runs its command as exec does.
func runElect(context.Context, *env, []string) error {
	return errors.New("elect: not supported on this operating system (it needs process groups and POSIX signals)")
}
