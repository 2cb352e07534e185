//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
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
	lost := fmt.Errorf("%w: renewal trouble: %w", redlock.ErrLockLost, extend)
	want := "the last renewal: extend: 2 of 5 nodes agreed, quorum is 3; node 0 (127.0.0.1:7000): no reply within the node timeout; node 4: key absent"
	if got := lostDetail(lost); got != want {
		t.Errorf("lostDetail = %q, want %q", got, want)
	}
	if got := lostDetail(fmt.Errorf("%w: late", redlock.ErrLockLost)); got != "no renewal was confirmed in time" {
		t.Errorf("lostDetail without a QuorumError = %q", got)
	}

	acquire := &redlock.QuorumError{Op: "acquire", Key: "a", Keys: []string{"a", "b"}, Quorum: 2, Agreed: 1, Total: 3,
		Cause: context.Canceled}
	if got, want := attemptDetail(acquire), "acquire: 1 of 3 nodes agreed, quorum is 2: context canceled"; got != want {
		t.Errorf("attemptDetail = %q, want %q", got, want)
	}
	plain := fmt.Errorf("%w: %w", redlock.ErrNotAcquired, context.DeadlineExceeded)
	if got, want := attemptDetail(plain), "lock not acquired: context deadline exceeded"; got != want {
		t.Errorf("attemptDetail without a QuorumError = %q, want %q", got, want)
	}
}
