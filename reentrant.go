package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reentrancy without thread identity. Go has no goroutine identity to say "this caller holds
// the lock already", so the holder travels in the context: [Client.Do] marks its function's
// context with its lock, and [Lock.Context] marks any context. An acquire (TryAcquire,
// Acquire, Do and their Multi forms) whose context carries a lock of the same Client that
// holds every key asked for joins that hold: it gets a Lock with the same holder id and
// tokens, at once and without a network call. The joined Lock's Release ends only the
// nested hold; its Extend extends the hold it joined. A context that carries no such lock
// (an unrelated goroutine, another request) acquires as before and waits for the holder.

// heldCtxKey is the context key of the locks a context was marked with.
type heldCtxKey struct{}

// heldChain is one mark: a lock, and the marks of the parent context.
type heldChain struct {
	l      *Lock
	parent *heldChain
}

// ErrOutlived means a nested (joined) hold was released, extended or finished after the
// hold it joined had been released: the keys were no longer held for it. It matches
// ErrNotHeld.
var ErrOutlived error = outlivedError{}

type outlivedError struct{}

func (outlivedError) Error() string {
	return "redlock: nested hold outlived the hold it joined (released first)"
}
func (outlivedError) Is(target error) bool { return target == ErrNotHeld }

// Context returns a copy of ctx that carries the lock: an acquire of the lock's keys by the
// same Client with that context (or one derived from it) joins this hold instead of waiting
// for it (see the package documentation on reentrancy). [Client.Do] and [Client.DoMulti]
// give their function a context marked this way. A context carries the lock only while it
// is held: after a Release, or once its validity deadline has passed, an acquire with the
// context acquires anew. The mark is a context value: it does not cancel anything. It
// panics when ctx is nil, as context.WithValue does.
func (l *Lock) Context(ctx context.Context) context.Context {
	parent, _ := ctx.Value(heldCtxKey{}).(*heldChain)
	return context.WithValue(ctx, heldCtxKey{}, &heldChain{l: l, parent: parent})
}

// root is the hold a lock joined, or the lock itself.
func (l *Lock) root() *Lock {
	for l.outer != nil {
		l = l.outer
	}
	return l
}

// join returns a joined Lock when ctx carries a held lock of c that has every key of set,
// nil when it carries none (the caller acquires as usual), and an error matching
// ErrInvalidArgument when the context's locks hold some of the keys but no one of them
// holds all: acquiring would wait for the caller's own hold.
func (c *Client) join(ctx context.Context, set lockKeys) (*Lock, error) {
	chain, _ := ctx.Value(heldCtxKey{}).(*heldChain)
	var partial *Lock
	for ; chain != nil; chain = chain.parent {
		r := chain.l.root()
		if r.c != c || r.reader != nil || r.isReleased() || !c.cfg.clock.Now().Before(r.Until()) {
			continue // a reader's hold is never joined: it holds no key
		}
		tokens := make([]Token, 0, len(set.keys))
		for _, k := range set.keys {
			for j, rk := range r.set.keys {
				if rk == k {
					tokens = append(tokens, r.tokens[j])
					break
				}
			}
		}
		switch {
		case len(tokens) == len(set.keys):
			return &Lock{c: c, set: set, key: set.keys[0], id: r.id, ttl: r.ttl, token: tokens[0],
				tokens: tokens, outer: r}, nil
		case len(tokens) > 0 && partial == nil:
			partial = r
		}
	}
	if partial != nil {
		return nil, invalidf("keys %s are partly held by the context's lock on %s: acquiring them would wait for that hold", set, partial.set)
	}
	return nil, nil
}

// releaseJoined ends a nested hold: nothing is sent. It fails with ErrReleased when this
// nested hold ended already, and with ErrOutlived when the hold it joined was released
// first.
func (l *Lock) releaseJoined() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("%w: release %s: already released", ErrReleased, l.set)
	}
	l.released = true
	if l.outer.isReleased() {
		return fmt.Errorf("%w: release %s", ErrOutlived, l.set)
	}
	return nil
}

// extendJoined extends the hold that l joined.
func (l *Lock) extendJoined(ctx context.Context, ttl time.Duration) error {
	switch {
	case l.isReleased():
		return fmt.Errorf("%w: extend %s after release", ErrReleased, l.set)
	case l.outer.isReleased():
		return fmt.Errorf("%w: extend %s", ErrOutlived, l.set)
	}
	return l.outer.Extend(ctx, ttl)
}

// doJoined runs a Do's function under a joined hold: the outer hold is renewed by its own
// Do (if it has one), so this only runs fn and ends the nested hold. A loss of the outer
// hold reaches fn through ctx, which descends from the outer Do's function context.
func doJoined(ctx context.Context, l *Lock, fn func(context.Context, *Lock) error) (err error) {
	defer func() {
		p := recover()
		rerr := l.releaseJoined()
		if p != nil {
			panic(p)
		}
		if cause := context.Cause(ctx); errors.Is(cause, ErrLockLost) {
			err = errors.Join(cause, err)
		} else if rerr != nil {
			err = errors.Join(rerr, err)
		}
	}()
	return fn(l.Context(ctx), l)
}
