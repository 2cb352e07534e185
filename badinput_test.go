package redlock

// Bad input to every call of the API: a clear error, and nothing sent to any node.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func nanFloat() float64 { z := 0.0; return z / z }

// TestBadInputSendsNothing checks that every rejected call leaves every node untouched.
func TestBadInputSendsNothing(t *testing.T) {
	servers, clients := miniNodes(t, 3)
	c := newTestClient(t, clients, WithNodeTimeout(2*time.Second))
	ctx := ctxT(t, 5*time.Second)
	l, err := c.TryAcquire(ctx, testKey, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(c)
	before := commandCounts(servers)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context // a nil context, as a careless caller passes it
	for _, tc := range []struct {
		name string
		call func() error
		want []error
	}{
		{"empty key", func() error { _, err := c.TryAcquire(ctx, "", time.Second); return err }, []error{ErrInvalidArgument}},
		{"reserved prefix", func() error { _, err := c.TryAcquire(ctx, FencePrefix+"x", time.Second); return err }, []error{ErrInvalidArgument}},
		{"token key prefix", func() error { _, err := c.TryAcquire(ctx, HighestTokenPrefix+"{q}", time.Second); return err }, []error{ErrInvalidArgument}},
		{"key too long", func() error { _, err := c.TryAcquire(ctx, strings.Repeat("k", MaxKeyLen+1), time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context", func() error { _, err := c.TryAcquire(nilCtx, "k", time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context, Acquire", func() error { _, err := c.Acquire(nilCtx, "k", time.Second); return err }, []error{ErrInvalidArgument}},
		{"nil context, Status", func() error { _, err := c.Status(nilCtx, "k"); return err }, []error{ErrInvalidArgument}},
		{"nil context, Do", func() error { return c.Do(nilCtx, "k", time.Second, func(context.Context, *Lock) error { return nil }) }, []error{ErrInvalidArgument}},
		{"nil context, Extend", func() error { return l.Extend(nilCtx, time.Second) }, []error{ErrInvalidArgument}},
		{"nil context, Release", func() error { return l.Release(nilCtx) }, []error{ErrInvalidArgument}},
		{"nil lock, Release", func() error { return (*Lock)(nil).Release(ctx) }, []error{ErrInvalidArgument}},
		{"nil lock, Extend", func() error { return (*Lock)(nil).Extend(ctx, time.Second) }, []error{ErrInvalidArgument}},
		{"zero ttl", func() error { _, err := c.TryAcquire(ctx, "k", 0); return err }, []error{ErrInvalidArgument}},
		{"negative ttl", func() error { _, err := c.Acquire(ctx, "k", -time.Second); return err }, []error{ErrInvalidArgument}},
		{"ttl inside the drift", func() error { _, err := c.TryAcquire(ctx, "k", 2*time.Millisecond); return err }, []error{ErrInvalidArgument}},
		{"ttl overflow", func() error { _, err := c.TryAcquire(ctx, "k", time.Duration(1<<63-1)); return err }, []error{ErrInvalidArgument}},
		{"cancelled context", func() error { _, err := c.TryAcquire(cancelled, "k", time.Second); return err }, []error{ErrNotAcquired, context.Canceled}},
		{"cancelled context, Acquire", func() error { _, err := c.Acquire(cancelled, "k", time.Second); return err }, []error{ErrNotAcquired, context.Canceled}},
		{"cancelled context, Do", func() error {
			return c.Do(cancelled, "k", time.Second, func(context.Context, *Lock) error { return nil })
		}, []error{ErrNotAcquired, context.Canceled}},
		{"extend zero ttl", func() error { return l.Extend(ctx, 0) }, []error{ErrInvalidArgument}},
		{"extend cancelled", func() error { return l.Extend(cancelled, time.Second) }, []error{ErrNotHeld, context.Canceled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("error %v does not match %v", err, w)
				}
			}
		})
	}
	if after := commandCounts(servers); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("commands sent by rejected calls: before %v, after %v", before, after)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBadNamesSayName: a semaphore, election or read/write lock refuses an empty, reserved or
// over-long name with one error that speaks of the name, led by ErrInvalidArgument once (not a
// lock key's error wrapped inside the kind's).
func TestBadNamesSayName(t *testing.T) {
	_, nodes := miniNodes(t, 1)
	c := newTestClient(t, nodes)
	long := strings.Repeat("n", MaxKeyLen+1)
	kinds := []struct {
		kind string
		err  func(name string) error
	}{
		{"semaphore", func(n string) error { return c.Semaphore(n, 2).err }},
		{"election", func(n string) error { return c.Election(n).err }},
		{"read/write lock", func(n string) error { return c.RWLock(n).err }},
	}
	for _, k := range kinds {
		for _, tc := range []struct{ name, want string }{
			{"", "redlock: invalid argument: " + k.kind + " name is empty"},
			{FencePrefix + "x", fmt.Sprintf("redlock: invalid argument: %s name %q starts with the reserved prefix %q", k.kind, FencePrefix+"x", FencePrefix)},
			{long, fmt.Sprintf("redlock: invalid argument: %s name %q is %d bytes, longer than MaxKeyLen (%d)", k.kind, quoteKey(long), len(long), MaxKeyLen)},
		} {
			err := k.err(tc.name)
			if !errors.Is(err, ErrInvalidArgument) || err.Error() != tc.want {
				t.Errorf("%s %.20q:\n got %v\nwant %s", k.kind, tc.name, err, tc.want)
			}
		}
		// A name within MaxKeyLen whose key is not: said of the name, with the longest that fits.
		name := strings.Repeat("n", MaxKeyLen-5)
		err := k.err(name)
		prefix := fmt.Sprintf("redlock: invalid argument: %s name %q is %d bytes, too long for its key", k.kind, quoteKey(name), len(name))
		if !errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("%s name of %d bytes: %v", k.kind, len(name), err)
		}
		var most int
		if _, err := fmt.Sscanf(err.Error()[strings.LastIndex(err.Error(), "at most "):], "at most %d bytes", &most); err != nil {
			t.Fatalf("%s: no longest name in %q", k.kind, err)
		}
		if k.err(strings.Repeat("n", most)) != nil || k.err(strings.Repeat("n", most+1)) == nil {
			t.Errorf("%s: the longest name said to fit is %d bytes, but %d fits: %v / %d does not: %v", k.kind, most, most, k.err(strings.Repeat("n", most)), most+1, k.err(strings.Repeat("n", most+1)))
		}
	}
}
