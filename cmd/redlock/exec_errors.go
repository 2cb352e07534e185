//go:build unix

package main

// exec's descriptions of what went wrong: why a lock was lost and why an acquire failed,
// from the library's typed errors (the vote itself as the library renders it), and the
// error of a command that could not start.

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/quorumlock/redlock"
)

// unwrapExecErr drops the 'exec: "name": ' prefix of os/exec's errors.
func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// lostDetail says why the lock was lost (err matches redlock.ErrLockLost): the outcome of
// the failed renewal when the library reports one (a *redlock.QuorumError, in its own
// rendering), else what ErrLockLost means.
func lostDetail(err error) string {
	lle, ok := errors.AsType[*redlock.LockLostError](err)
	if !ok {
		return "no renewal was confirmed in time"
	}
	qe, hasQE := errors.AsType[*redlock.QuorumError](lle.Cause)
	switch {
	case lle.Refused && hasQE:
		return "the keys are gone from a quorum of nodes: " + bareText(qe.Detail())
	case hasQE:
		return fmt.Sprintf("no renewal confirmed %v before the validity deadline; the last renewal: %s", lle.Margin, bareText(qe.Detail()))
	case lle.Late == redlock.LateRenewerLate:
		return fmt.Sprintf("no renewal tried in the %v before the validity deadline (redlock was paused or starved of CPU)", lle.Margin)
	}
	return fmt.Sprintf("no renewal confirmed %v before the validity deadline", lle.Margin)
}

// attemptDetail describes a failed acquire as the library renders its *redlock.QuorumError
// (QuorumError.Detail: the vote, the cause, each node's error), or, when there is none (the
// acquire ended before an attempt), from the error's message; either without the library's
// "redlock: " prefixes.
func attemptDetail(err error) string {
	if qe, ok := errors.AsType[*redlock.QuorumError](err); ok {
		return bareText(qe.Detail())
	}
	return bare(err)
}
