//go:build unix

package main

// Tests of exec's descriptions of failures, from the library's typed errors.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"github.com/quorumlock/redlock"
)

// TestExecMessagesFromTypedErrors checks that exec's descriptions of a lost lock and of a
// failed acquire come from the library's error fields, not from its message text.
func TestExecMessagesFromTypedErrors(t *testing.T) {
	extend := &redlock.QuorumError{Op: "extend", Key: "k", Quorum: 3, Agreed: 2, Total: 5,
		Nodes: &multierror.Error{Errors: []error{
			&redlock.NodeError{Node: 0, Addr: "127.0.0.1:7000", Err: errors.New("no reply within the node timeout")},
			&redlock.NodeError{Node: 4, Err: errors.New("key absent")},
		}}}
	detail := "extend: 2 of 5 nodes agreed, quorum is 3; node 0 (127.0.0.1:7000): no reply within the node timeout; node 4: key absent"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&redlock.LockLostError{Keys: []string{"k"}, Refused: true, Cause: extend}, "the keys are gone from a quorum of nodes: " + detail},
		{&redlock.LockLostError{Keys: []string{"k"}, Margin: 3e9, Late: redlock.LateRenewalFailed, Cause: extend},
			"no renewal confirmed 3s before the validity deadline; the last renewal: " + detail},
		{&redlock.LockLostError{Keys: []string{"k"}, Margin: 3e9, Late: redlock.LateRenewerLate, Cause: errors.New("late")},
			"no renewal tried in the 3s before the validity deadline (redlock was paused or starved of CPU)"},
		{&redlock.LockLostError{Keys: []string{"k"}, Margin: 3e9, Late: redlock.LateRenewalUnconfirmed, Cause: errors.New("unconfirmed")},
			"no renewal confirmed 3s before the validity deadline"},
		{fmt.Errorf("%w: late", redlock.ErrLockLost), "no renewal was confirmed in time"},
	} {
		if got := lostDetail(fmt.Errorf("do: %w", tc.err)); got != tc.want {
			t.Errorf("lostDetail(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}

	acquire := &redlock.QuorumError{Op: "acquire", Key: "a", Keys: []string{"a", "b"}, Quorum: 2, Agreed: 1, Total: 3,
		Cause: context.Canceled}
	if got, want := attemptDetail(acquire), "acquire: 1 of 3 nodes agreed, quorum is 2: context canceled"; got != want {
		t.Errorf("attemptDetail = %q, want %q", got, want)
	}
	// The vote is the library's own rendering (QuorumError.Detail), on one line and without
	// the library's "redlock: " prefixes, also those inside a cause or a node's error.
	nested := &redlock.QuorumError{Op: "acquire", Key: "a", Quorum: 2, Agreed: 0, Total: 3,
		Cause: fmt.Errorf("gave up: %w", redlock.ErrNotAcquired),
		Nodes: &multierror.Error{Errors: []error{
			&redlock.NodeError{Node: 1, Addr: "127.0.0.1:7001", Err: fmt.Errorf("dial failed\nagain: %w", redlock.ErrClosed)},
		}}}
	want := "acquire: 0 of 3 nodes agreed, quorum is 2: gave up: lock not acquired; node 1 (127.0.0.1:7001): dial failed; again: " +
		strings.TrimPrefix(redlock.ErrClosed.Error(), "redlock: ")
	if got := attemptDetail(nested); got != want {
		t.Errorf("attemptDetail = %q, want %q", got, want)
	}
	plain := fmt.Errorf("%w: %w", redlock.ErrNotAcquired, context.DeadlineExceeded)
	if got, want := attemptDetail(plain), "lock not acquired: context deadline exceeded"; got != want {
		t.Errorf("attemptDetail without a QuorumError = %q, want %q", got, want)
	}
}
