package redlock

import "sync"

// releaseWaiters lets the Acquire calls of one Client that wait for a key wake up as soon
// as another Lock of the same Client releases that key, instead of sleeping out their retry
// delay while the lock sits free. Waiters for a lock held by another process still rely on
// the randomised retry delay. An entry lives only while someone waits on its key.
type releaseWaiters struct {
	mu sync.Mutex
	m  map[string]*waitSet
}

type waitSet struct {
	ch chan struct{} // closed on release
	n  int           // waiters registered
}

// wait registers a waiter for key and returns the channel closed at the next release of
// key by this client, and the function to call when the waiter stops waiting.
func (w *releaseWaiters) wait(key string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*waitSet{}
	}
	ws := w.m[key]
	if ws == nil {
		ws = &waitSet{ch: make(chan struct{})}
		w.m[key] = ws
	}
	ws.n++
	return ws.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		ws.n--
		if ws.n == 0 && w.m[key] == ws {
			delete(w.m, key)
		}
	}
}

// released wakes every waiter for key.
func (w *releaseWaiters) released(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[key]; ws != nil {
		close(ws.ch)
		delete(w.m, key)
	}
}
