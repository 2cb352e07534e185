package redlock

import (
	"errors"
	"fmt"
	"testing"
)

func TestQuorumSize(t *testing.T) {
	for _, tc := range []struct {
		n, f, want int
		wantErr    bool
	}{
		{1, 0, 1, false}, {2, 0, 2, false}, {3, 0, 2, false}, {4, 0, 3, false},
		{5, 0, 3, false}, {5, 1, 4, false}, {5, 2, 4, false}, {5, 3, 5, false}, {5, 4, 5, false}, {5, 5, 0, true},
		{7, 0, 4, false}, {7, 1, 5, false}, {3, 1, 3, false}, {3, 2, 3, false}, {3, 3, 0, true},
		{0, 0, 0, true}, {5, -1, 0, true},
	} {
		t.Run(fmt.Sprintf("n=%d,f=%d", tc.n, tc.f), func(t *testing.T) {
			q, err := quorumSize(tc.n, tc.f)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("got %d, %v; want ErrInvalidArgument", q, err)
				}
				return
			}
			if err != nil || q != tc.want {
				t.Fatalf("got %d, %v; want %d", q, err, tc.want)
			}
			// The defining property: any two quorums share at least f+1 nodes, and q is the
			// smallest size with that property.
			if 2*q-tc.n < tc.f+1 {
				t.Fatalf("2q-n = %d < f+1 = %d", 2*q-tc.n, tc.f+1)
			}
			if 2*(q-1)-tc.n >= tc.f+1 {
				t.Fatalf("q-1 = %d would do", q-1)
			}
		})
	}
}

// tallyInput is one input to an acquireTally in the table below.
type tallyInput struct {
	kind string // "ok" (our key set, counter val), "held", "fail", "raise-ok", "raise-no"
	node int
	val  int64
}

func TestAcquireTally(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, q      int
		events    []tallyInput
		want      verdict
		token     int64
		wantRaise []int // nodes raised over the whole run
	}{
		{name: "fast path after 3 equal counters", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 7}, {"ok", 3, 7}, {"ok", 4, 7}}, want: won, token: 7},
		{name: "waits while a quorum is possible", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 7}, {"held", 1, 0}, {"ok", 2, 7}}, want: undecided},
		{name: "impossible after 3 refusals", n: 5, q: 3,
			events: []tallyInput{{"held", 0, 0}, {"fail", 1, 0}, {"held", 2, 0}}, want: lost},
		{name: "fast path takes the value a quorum shares, not the max", n: 5, q: 3,
			events: []tallyInput{{"ok", 1, 8}, {"ok", 2, 8}, {"ok", 3, 8}, {"ok", 0, 9}}, want: won, token: 8},
		{name: "slow path starts once |S| reaches q without a shared value", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 9}, {"ok", 1, 8}, {"ok", 2, 8}, {"ok", 3, 8}, {"raise-ok", 3, 0},
				{"raise-ok", 1, 0}}, want: won, token: 9, wantRaise: []int{1, 2, 3}},
		{name: "slow path raises the lagging nodes to the max", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 9}, {"ok", 1, 8}, {"ok", 2, 5}, {"raise-ok", 1, 0}, {"raise-ok", 2, 0}},
			want:   won, token: 9, wantRaise: []int{1, 2}},
		{name: "slow path fails when raises are refused", n: 3, q: 2,
			events: []tallyInput{{"ok", 0, 9}, {"ok", 1, 8}, {"raise-no", 1, 0}, {"held", 2, 0}},
			want:   lost, wantRaise: []int{1}},
		{name: "late reply equal to the target joins M", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 9}, {"ok", 1, 8}, {"ok", 2, 5}, {"ok", 3, 9}, {"raise-ok", 2, 0}},
			want:   won, token: 9, wantRaise: []int{1, 2}},
		{name: "late reply below the target is raised", n: 5, q: 3,
			events: []tallyInput{{"ok", 0, 9}, {"ok", 1, 8}, {"ok", 2, 5}, {"raise-no", 1, 0}, {"raise-no", 2, 0},
				{"ok", 3, 4}, {"raise-ok", 3, 0}, {"ok", 4, 9}},
			want: won, token: 9, wantRaise: []int{1, 2, 3}},
		{name: "amnesia quorum of 4", n: 5, q: 4,
			events: []tallyInput{{"ok", 0, 3}, {"ok", 1, 3}, {"ok", 2, 3}, {"held", 3, 0}}, want: undecided},
		{name: "single node", n: 1, q: 1, events: []tallyInput{{"ok", 0, 42}}, want: won, token: 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tally := newAcquireTally(tc.n, tc.q)
			var raised []int
			var v verdict
			var tok int64
			for _, e := range tc.events {
				switch e.kind {
				case "ok":
					if tally.acquired(e.node, e.val) {
						raised = append(raised, e.node)
					}
				case "held":
					tally.refused(e.node)
				case "fail":
					tally.failed(e.node)
				case "raise-ok":
					tally.raiseDone(e.node, true)
				case "raise-no":
					tally.raiseDone(e.node, false)
				}
				var r []int
				v, tok, r = tally.decide()
				raised = append(raised, r...)
				if v != undecided {
					break
				}
			}
			if v != tc.want || tok != tc.token {
				t.Fatalf("verdict %v token %d, want %v token %d", v, tok, tc.want, tc.token)
			}
			if fmt.Sprint(raised) != fmt.Sprint(tc.wantRaise) && !(len(raised) == 0 && len(tc.wantRaise) == 0) {
				t.Fatalf("raised %v, want %v", raised, tc.wantRaise)
			}
			if v == won && tally.agreed() < tc.q {
				t.Fatalf("won with only %d agreeing nodes", tally.agreed())
			}
		})
	}
}
