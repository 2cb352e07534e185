package redlock

import "sync"

// releaseWaiters lets the Acquire calls of one Client that wait for a key take turns as
// soon as another Lock of the same Client releases that key, instead of sleeping out their
// retry delay while the lock sits free. A release wakes the longest-waiting Acquire only,
// so waiters in one process are served about first come, first served, rather than all
// rushing at once and splitting the vote. Waiters for a lock held by another process still
// rely on the randomised retry delay. An entry lives only while someone waits on its key.
type releaseWaiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{} // per key, the waiters' wake-up channels, oldest first
}

// wait registers a waiter for key at the back of its queue. It returns the channel closed
// when a release by this client picks this waiter, and the function to call when the
// waiter stops waiting.
func (w *releaseWaiters) wait(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[key] = append(w.m[key], ch)
	w.mu.Unlock()
	return ch, func() { w.leave(key, ch) }
}

func (w *releaseWaiters) leave(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.m[key]
	for i, c := range q {
		if c == ch {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(w.m, key)
	} else {
		w.m[key] = q
	}
}

// released wakes the longest-waiting waiter for key, if any.
func (w *releaseWaiters) released(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.m[key]
	if len(q) == 0 {
		return
	}
	close(q[0])
	if len(q) == 1 {
		delete(w.m, key)
	} else {
		w.m[key] = q[1:]
	}
}
