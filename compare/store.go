package compare

import (
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/chaos"
)

// store is the data the holders protect with the lock: per key, a counter that each
// critical section reads when it begins and then writes forward, base+1, base+2, … (a
// read-modify-write, as a balance or a ledger position is updated). Two twins receive the
// same writes in the same order under one mutex: plain accepts every write (a store that
// ignores tokens), fenced accepts a write only when its token is at least the highest it has
// admitted for the key (the ≥ rule of docs/design.md §8). One run thus measures a store with
// tokens and one without under exactly the same schedule.
//
// A write is stale when, as it is applied, the store has already applied a write of a
// critical section of the same key that was granted later than the writer's own: an older
// holder writing over a newer one. This does not look at tokens, so it judges every
// backend's tokens alike. A write is lost, in a twin, when the twin accepted it and the
// final value does not account for it: lost = accepted − final value.
type store struct {
	rec *chaos.Recorder

	mu      sync.Mutex
	plain   map[string]int64
	fenced  map[string]int64
	highest map[string]uint64
	newest  map[string]time.Duration // the latest grant among the holds whose writes were applied
	writes  []chaos.Write
	stale   []bool // per write
}

func newStore(rec *chaos.Recorder) *store {
	return &store{rec: rec, plain: map[string]int64{}, fenced: map[string]int64{}, highest: map[string]uint64{},
		newest: map[string]time.Duration{}}
}

// base is what a critical section reads as it begins: the key's value in each twin.
type base struct{ plain, fenced int64 }

func (s *store) read(key string) base {
	s.mu.Lock()
	defer s.mu.Unlock()
	return base{s.plain[key], s.fenced[key]}
}

// write applies the seq-th write (from 1) of hold hold, granted at granted, with token tok,
// to both twins, and reports whether the fenced twin accepted it.
func (s *store) write(client, hold int, key string, granted time.Duration, tok uint64, b base, seq int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.rec.Now()
	stale := granted < s.newest[key]
	s.newest[key] = max(s.newest[key], granted)
	s.plain[key] = b.plain + int64(seq)
	hi := s.highest[key]
	ok := tok >= hi
	if ok {
		s.fenced[key] = b.fenced + int64(seq)
		s.highest[key] = tok
	}
	s.writes = append(s.writes, chaos.Write{ID: len(s.writes), Client: client, Hold: hold, Key: key,
		Token: redlock.Token(tok), Seq: seq, Sent: now, Applied: now, Acked: now, Accepted: ok, Order: len(s.writes),
		Highest: redlock.Token(hi)})
	s.stale = append(s.stale, stale)
	return ok
}

// storeCounts is what the store saw in one run.
type storeCounts struct {
	Writes          int `json:"writes"`
	Stale           int `json:"stale"`             // stale writes; the plain twin accepted every one
	StaleFenced     int `json:"stale_fenced"`      // stale writes the fenced twin accepted all the same
	Refused         int `json:"refused"`           // writes the fenced twin refused
	LostPlain       int `json:"lost_plain"`        // accepted by the plain twin, missing from its value
	LostFenced      int `json:"lost_fenced"`       // the same in the fenced twin
	RefusedNotStale int `json:"refused_not_stale"` // refused although not stale: a token out of order
}

func (s *store) counts() storeCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c storeCounts
	accPlain, accFenced := map[string]int64{}, map[string]int64{}
	for i, w := range s.writes {
		c.Writes++
		accPlain[w.Key]++
		if w.Accepted {
			accFenced[w.Key]++
		} else {
			c.Refused++
			if !s.stale[i] {
				c.RefusedNotStale++
			}
		}
		if s.stale[i] {
			c.Stale++
			if w.Accepted {
				c.StaleFenced++
			}
		}
	}
	for k, n := range accPlain {
		c.LostPlain += int(n - s.plain[k])
	}
	for k, n := range accFenced {
		c.LostFenced += int(n - s.fenced[k])
	}
	return c
}

// history returns the writes as the chaos lab's timelines draw them.
func (s *store) history() []chaos.Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chaos.Write(nil), s.writes...)
}
