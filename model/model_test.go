package model

import (
	"os"
	"strings"
	"testing"
)

// large runs the bigger bounds (REDLOCK_MODEL_LARGE=1); the default keeps go test ./model/
// under a minute on two cores.
var large = os.Getenv("REDLOCK_MODEL_LARGE") == "1"

func two(l1, l2 Layout, acq int) []ClientConfig {
	return []ClientConfig{{Layout: l1, Acquisitions: acq}, {Layout: l2, Acquisitions: acq}}
}

// realConfigs are run with the real rules: none may find a counterexample.
func realConfigs() []Config {
	cs := []Config{
		{Name: "N3 Q2 mutual exclusion, slot+slot", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Exclusion: true},
	}
	if large {
		cs = append(cs,
			Config{Name: "N3 Q2 slot+key, expiry, timeouts", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true, Lose: true},
			Config{Name: "N3 Q2 two keys of one slot, slot+slot, expiry", N: 3, Q: 2, Keys: 2, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true},
			Config{Name: "N3 Q3 (f=1) amnesia 1, constant seeds, slot+key", N: 3, Q: 3, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Amnesia: 1, Expiry: true},
			Config{Name: "N3 Q2 upgrade step 1: old+key, constant seeds", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, KeyLayout, 1), Expiry: true, Lose: true},
			Config{Name: "N3 Q2 upgrade step 2: key+slot, two keys, constant seeds", N: 3, Q: 2, Keys: 2, Clients: two(KeyLayout, SlotLayout, 1), Expiry: true},
			Config{Name: "N3 Q2 old+slot, clock advancing", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, SlotLayout, 1), Expiry: true, Seeds: FreshSeeds},
			Config{Name: "N3 Q2 amnesia 1, clock advancing, slot+slot", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1, Seeds: FreshSeeds},
		)
	}
	if large {
		cs = append(cs,
			Config{Name: "N3 Q2 mutual exclusion, extend+heal", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{SlotLayout, 1, 1}, {SlotLayout, 1, 1}}, Expiry: true, Exclusion: true, MaxStates: 20000000},
			Config{Name: "N3 Q2 slot+key, 2 acquisitions each, resend", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, KeyLayout, 2), Expiry: true, Resends: 1},
			Config{Name: "N5 Q4 (f=1) amnesia 1, constant seeds, slot+slot", N: 5, Q: 4, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1},
			Config{Name: "N5 Q3 slot+key, expiry", N: 5, Q: 3, Keys: 1, Clients: two(SlotLayout, KeyLayout, 1), Expiry: true},
			Config{Name: "N3 Q2 three clients slot/slot/key", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{SlotLayout, 1, 0}, {SlotLayout, 1, 0}, {KeyLayout, 1, 0}}, Expiry: true},
		)
	}
	return cs
}

func TestModelRealRules(t *testing.T) {
	for _, cfg := range realConfigs() {
		t.Run(cfg.Name, func(t *testing.T) {
			r := Check(cfg)
			t.Logf("%s: %d states, depth %d, %v, truncated %v", cfg.Name, r.States, r.Depth, r.Elapsed, r.Truncated)
			if r.Violation != "" {
				t.Fatalf("counterexample with the real rules: %s\n%s", r.Violation, strings.Join(r.Trace, "\n"))
			}
			if r.Truncated || r.States < 1000 {
				t.Fatalf("search incomplete or trivial: %d states", r.States)
			}
		})
	}
}

// TestModelFindsMutations: each broken rule must give a counterexample; a checker that
// cannot fail proves nothing.
func TestModelFindsMutations(t *testing.T) {
	cs := []struct {
		cfg  Config
		want string
	}{
		{Config{Name: "constant seeds, amnesia, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1}, "claim U"},
		{Config{Name: "raise without key-still-ours", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Mutation: RaiseNotOurs}, "claim"},
		{Config{Name: "amnesia with f=1 assumed, quorum not raised, N3 Q2", N: 3, Q: 2, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1, Exclusion: true, Seeds: FreshSeeds}, "mutual exclusion"},
		{Config{Name: "old+slot, frozen clock", N: 3, Q: 2, Keys: 1, Clients: two(OldClient, SlotLayout, 1)}, "claim"},
		{Config{Name: "raise lowers a counter above the target, two keys of one slot", N: 3, Q: 2, Keys: 2, Clients: two(SlotLayout, SlotLayout, 1), Expiry: true, Mutation: RaiseLowers}, "claim"},
	}
	if large {
		cs = append(cs, struct {
			cfg  Config
			want string
		}{Config{Name: "constant seeds, amnesia, N5 Q3", N: 5, Q: 3, Keys: 1, Clients: two(SlotLayout, SlotLayout, 1), Amnesia: 1}, "claim U"})
	}
	for _, c := range cs {
		t.Run(c.cfg.Name, func(t *testing.T) {
			r := Check(c.cfg)
			t.Logf("%s: %d states, %v, trace of %d steps:\n%s", c.cfg.Name, r.States, r.Elapsed, len(r.Trace)-1, strings.Join(r.Trace, "\n"))
			if !strings.Contains(r.Violation, c.want) {
				t.Fatalf("want a counterexample to %q, got %q (%d states, truncated %v)", c.want, r.Violation, r.States, r.Truncated)
			}
		})
	}
}
