package model

import (
	"strings"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, cfg := range []Config{
		{Name: "smoke", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{SlotLayout, 1, 0}, {SlotLayout, 1, 0}}, Expiry: true},
		{Name: "smoke", N: 3, Q: 2, Keys: 1, Clients: []ClientConfig{{SlotLayout, 1, 0}, {SlotLayout, 1, 0}}, Lose: true, Expiry: true},
		{Name: "amn", N: 5, Q: 3, Keys: 1, Clients: []ClientConfig{{SlotLayout, 1, 0}, {SlotLayout, 1, 0}}, Amnesia: 1, MaxStates: 2000000},
	} {
		r := Check(cfg)
		t.Logf("states %d depth %d %v trunc %v viol %q\n%s", r.States, r.Depth, r.Elapsed, r.Truncated, r.Violation, strings.Join(r.Trace, "\n"))
	}
}
