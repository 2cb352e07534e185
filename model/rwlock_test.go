package model

import (
	"strings"
	"testing"
)

// TestModelRWLock: the read/write lock's rules keep readers and writers apart in every
// interleaving at small bounds (N = 2 with a reader and a writer, 5 960 states, in every run;
// N = 3 with a reader and a writer, and N = 2 with a reader and two writers, about 573 000
// states and 22 s each, with REDLOCK_MODEL_LARGE=1); the mutation in which a reader ignores
// the writer key and the intent finds a reader overlapping a writer at N = 3.
func TestModelRWLock(t *testing.T) {
	cfgs := []struct {
		tier tier
		cfg  RWConfig
	}{
		{cheap, RWConfig{N: 2, Q: 2, Readers: 1, Writers: 1}},
		{big, RWConfig{N: 3, Q: 2, Readers: 1, Writers: 1}},
		{big, RWConfig{N: 2, Q: 2, Readers: 1, Writers: 2}},
	}
	for _, c := range cfgs {
		if !c.tier.included() {
			continue
		}
		r := CheckRW(c.cfg)
		t.Logf("%+v: %d states", c.cfg, r.States)
		if r.Violation != "" {
			t.Fatalf("%+v: %s\n%s", c.cfg, r.Violation, strings.Join(r.Trace, "\n"))
		}
		if r.States < 1000 {
			t.Fatalf("%+v: only %d states: the search is trivial", c.cfg, r.States)
		}
	}
	r := CheckRW(RWConfig{N: 3, Q: 2, Readers: 1, Writers: 1, IgnoreWriter: true})
	t.Logf("reader ignoring the writer: %d states\n%s", r.States, strings.Join(r.Trace, "\n"))
	if !strings.Contains(r.Violation, "a reader overlaps the writer") {
		t.Fatalf("the mutation found %q, want a reader overlapping the writer", r.Violation)
	}
}
