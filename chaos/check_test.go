package chaos

// Tests of the history checkers, the store and judging, on hand-made histories.

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

const ms1 = time.Millisecond

func hold(id, client int, tok redlock.Token, asked, granted, until, end time.Duration) Hold {
	return Hold{ID: id, Client: client, Key: "k", Token: tok, LockID: string(rune('a' + id)), Asked: asked, Granted: granted,
		Until: until, End: end}
}

func TestOverlaps(t *testing.T) {
	h := &History{Keys: []string{"k"}, Holds: []Hold{
		hold(0, 0, 10, 0, 10*ms1, 100*ms1, 50*ms1),
		hold(1, 1, 11, 0, 50*ms1, 150*ms1, 90*ms1),         // starts exactly when 0 ends: no overlap
		hold(2, 2, 12, 0, 80*ms1, 180*ms1, 300*ms1),        // overlaps 1, while 1 is valid
		hold(3, 0, 13, 100*ms1, 200*ms1, 300*ms1, 250*ms1), // inside 2, after 2's deadline
	}}
	got := Overlaps(h)
	want := []Overlap{
		{Key: "k", A: 1, B: 2, From: 80 * ms1, To: 90 * ms1, BothValid: true},
		{Key: "k", A: 2, B: 3, From: 200 * ms1, To: 250 * ms1, BothValid: false},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if n := Violations(got); n != 1 {
		t.Fatalf("violations %d, want 1: holds 1, 2 and 3 are one chain", n)
	}
	if n := Violations(append(got, Overlap{A: 7, B: 8})); n != 2 {
		t.Fatalf("violations %d, want 2", n)
	}
}

func TestCheckTokens(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds []Hold
		want  string // claims broken, in order
	}{
		{"increasing", []Hold{hold(0, 0, 10, 0, 1*ms1, 0, 2*ms1), hold(1, 1, 11, 3*ms1, 4*ms1, 0, 5*ms1)}, ""},
		{"duplicate", []Hold{hold(0, 0, 10, 0, 1*ms1, 0, 2*ms1), hold(1, 1, 10, 3*ms1, 4*ms1, 0, 5*ms1)}, "UO"},
		{"backwards", []Hold{hold(0, 0, 10, 0, 1*ms1, 0, 2*ms1), hold(1, 1, 9, 3*ms1, 4*ms1, 0, 5*ms1)}, "O"},
		// B asked before A was granted: the acquisitions were concurrent, O says nothing.
		{"concurrent", []Hold{hold(0, 0, 10, 0, 5*ms1, 0, 6*ms1), hold(1, 1, 9, 3*ms1, 7*ms1, 0, 8*ms1)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got strings.Builder
			for _, p := range CheckTokens(&History{Keys: []string{"k"}, Holds: tc.holds}) {
				got.WriteString(p.Claim)
			}
			if got.String() != tc.want {
				t.Fatalf("claims broken %q, want %q", got.String(), tc.want)
			}
		})
	}
}

// newUnfencedRegister returns a register that accepts every write, as a store that knows
// nothing about tokens does: the control experiment of the stale-write checkers.
func newUnfencedRegister(rec *Recorder) *Register {
	g := NewRegister(rec)
	g.fenced = false
	return g
}

// storeHistory writes tokens to a register in order, one hold per distinct (client, token)
// as given, and returns the history with the store's contents.
func storeHistory(t *testing.T, g func(*Recorder) *Register, writes ...WriteReq) *History {
	t.Helper()
	rec := NewRecorder(History{Keys: []string{"k"}, Clients: 2})
	reg := g(rec)
	for _, w := range writes {
		w.Key = "k"
		reg.Write(w)
	}
	reg.Close()
	return rec.Finish(reg.Contents())
}

func TestStaleWriteCheckers(t *testing.T) {
	writes := []WriteReq{
		{Client: 0, Hold: 0, Token: 5},
		{Client: 0, Hold: 0, Token: 5}, // the same holder again: fine
		{Client: 1, Hold: 1, Token: 7},
		{Client: 0, Hold: 0, Token: 5}, // stale
		{Client: 1, Hold: 2, Token: 7}, // another hold with the same token: a duplicate token
	}
	fenced := storeHistory(t, NewRegister, writes...)
	if got := StaleAccepted(fenced); len(got) != 1 || got[0] != 4 {
		t.Errorf("fenced store: stale accepted %v, want [4] (the duplicate token slips through the ≥ rule)", got)
	}
	if got := StaleRejected(fenced); got != 1 {
		t.Errorf("fenced store: %d rejected, want 1", got)
	}
	if got := CheckLinearizable(fenced, DefaultLinTimeout); got != LinOK {
		t.Errorf("fenced store: porcupine %s, want ok", got)
	}
	if got := LostWrites(fenced); len(got) != 0 {
		t.Errorf("fenced store: lost %v", got)
	}

	// The control: a store that ignores tokens accepts the stale write, and both checkers
	// see it.
	unfenced := storeHistory(t, newUnfencedRegister, writes...)
	if got := StaleAccepted(unfenced); !slices.Equal(got, []int{3, 4}) {
		t.Errorf("unfenced store: stale accepted %v, want [3 4]", got)
	}
	if got := CheckLinearizable(unfenced, DefaultLinTimeout); got != LinIllegal {
		t.Errorf("unfenced store: porcupine %s, want illegal", got)
	}
}

func TestLostWrites(t *testing.T) {
	h := storeHistory(t, NewRegister, WriteReq{Client: 0, Hold: 0, Token: 5}, WriteReq{Client: 1, Hold: 1, Token: 6})
	h.Stored["k"] = h.Stored["k"][:1] // the store lost the second write
	if got := LostWrites(h); !slices.Equal(got, []int{1}) {
		t.Fatalf("lost %v, want [1]", got)
	}
	// The final read of the highest token no longer matches either: porcupine objects too
	// when the store forgets a token it admitted.
	h.Highest["k"] = 5
	if got := CheckLinearizable(h, DefaultLinTimeout); got != LinIllegal {
		t.Fatalf("porcupine %s, want illegal", got)
	}
}

// TestLinearizabilityUnknownIsNoPass makes the porcupine check time out, on a model whose
// step blocks until porcupine gives up, and checks that the verdict is "unknown" and that a
// run with that verdict fails its expectation.
func TestLinearizabilityUnknownIsNoPass(t *testing.T) {
	h := storeHistory(t, NewRegister, WriteReq{Client: 0, Hold: 0, Token: 5}, WriteReq{Client: 1, Hold: 1, Token: 6})
	stuck := registerModel
	stuck.Step = nil
	stuck.StepContext = func(ctx context.Context, _, _, _ any) (bool, any) {
		<-ctx.Done() // porcupine cancels it at the timeout
		return false, nil
	}
	if got := checkLinearizable(stuck, registerOps(h), 50*time.Millisecond); got != LinUnknown {
		t.Fatalf("verdict %q, want %q", got, LinUnknown)
	}
	v := Check(h, DefaultLinTimeout)
	v.Linearizable = LinUnknown
	problems := Expect{}.judge(h, v)
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "unknown") }) {
		t.Fatalf("problems %q, want one about the unknown verdict", problems)
	}
	// And the real model on the same history passes.
	if got := checkLinearizable(registerModel, registerOps(h), time.Minute); got != LinOK {
		t.Fatalf("verdict %q, want ok", got)
	}
}

func TestExpectJudge(t *testing.T) {
	h := &History{Keys: []string{"k"}, Faults: []Fault{{Kind: "node down", At: 10 * ms1, End: 20 * ms1}},
		Holds: []Hold{hold(0, 0, 10, 0, 15*ms1, 100*ms1, 30*ms1)}}
	v := Check(h, DefaultLinTimeout)
	if p := (Expect{LiveDuringFault: "node down"}).judge(h, v); len(p) != 0 {
		t.Errorf("problems %q, want none", p)
	}
	if p := (Expect{Violation: true, Rejections: true}).judge(h, v); len(p) != 2 {
		t.Errorf("problems %q, want two: no violation observed, no rejection", p)
	}
	v.Overlaps = []Overlap{{A: 0, B: 0}}
	if p := (Expect{}).judge(h, v); len(p) != 1 || !strings.Contains(p[0], "overlapping") {
		t.Errorf("problems %q, want one about the overlap", p)
	}
}

func TestRegister(t *testing.T) {
	rec := NewRecorder(History{Keys: []string{"k"}})
	g := NewRegister(rec)
	first, again, lower := g.Write(WriteReq{Key: "k", Token: 5}), g.Write(WriteReq{Key: "k", Token: 5}), g.Write(WriteReq{Key: "k", Token: 4})
	if !first || !again || lower {
		t.Fatal("≥ rule not applied: want 5 accepted twice, 4 refused")
	}
	// A delayed write is applied only after its release condition.
	released := make(chan struct{})
	id, res := g.SendDelayed(WriteReq{Key: "k", Token: 3}, time.Millisecond, func(ctx context.Context) {
		select {
		case <-released:
		case <-ctx.Done():
		}
	})
	if !g.Write(WriteReq{Key: "k", Token: 9}) {
		t.Fatal("write 9 refused")
	}
	close(released)
	if ok := <-res; ok {
		t.Fatal("the delayed write with token 3 was accepted after token 9")
	}
	g.Ack(id)
	// One that is never released is dropped by Close.
	_, res = g.SendDelayed(WriteReq{Key: "k", Token: 10}, time.Hour, nil)
	g.Close()
	if _, ok := <-res; ok {
		t.Fatal("a write still in flight at Close was delivered")
	}
	h := rec.Finish(g.Contents())
	if got := h.Stored["k"]; !slices.Equal(got, []int{0, 1, 4}) {
		t.Fatalf("stored %v, want writes 0, 1 and 4", got)
	}
	if w := h.Writes[3]; !w.Delayed || w.Accepted || w.Applied < 0 || w.Acked < w.Applied || !w.Stale() {
		t.Fatalf("delayed write recorded as %+v", w)
	}
	if w := h.Writes[5]; w.Applied != -1 {
		t.Fatalf("dropped write recorded as applied: %+v", w)
	}
}

// transfer writes one transfer of amount from key a (token ta, hold ha) to key b through g.
func transfer(g *Register, client int, a string, ta redlock.Token, ha int, b string, tb redlock.Token, hb int, amount int64) bool {
	return g.WriteAll([]WriteReq{
		{Client: client, Hold: ha, Key: a, Token: ta, Delta: -amount},
		{Client: client, Hold: hb, Key: b, Token: tb, Delta: amount},
	})
}

// transferHistory plays the story of multi-key-transfer-pause on a register: client 0
// holds A (token 10) and B (token 20) and moves 5 from A to B; client 1 takes A and C
// (tokens 11 and 30) and moves 7 from C to A; client 0, resuming, moves 3 from B to A
// with its old tokens. Its A leg is stale.
func transferHistory(t *testing.T, g func(*Recorder) *Register) *History {
	t.Helper()
	rec := NewRecorder(History{Keys: []string{"A", "B", "C"}, Clients: 2})
	reg := g(rec)
	if !transfer(reg, 0, "A", 10, 0, "B", 20, 1, 5) {
		t.Fatal("the first transfer was refused")
	}
	if !transfer(reg, 1, "C", 30, 3, "A", 11, 2, 7) {
		t.Fatal("the second transfer was refused")
	}
	transfer(reg, 0, "B", 20, 1, "A", 10, 0, 3)
	reg.Close()
	return rec.Finish(reg.Contents())
}

func TestRegisterWriteAll(t *testing.T) {
	h := transferHistory(t, NewRegister)
	if got := len(h.Writes); got != 6 {
		t.Fatalf("%d writes recorded, want 6 (two legs per transfer)", got)
	}
	for i := 0; i < 6; i += 2 {
		if want := []int{i, i + 1}; !slices.Equal(h.Writes[i].Legs, want) || !slices.Equal(h.Writes[i+1].Legs, want) {
			t.Errorf("writes %d and %d linked as %v and %v, want %v", i, i+1, h.Writes[i].Legs, h.Writes[i+1].Legs, want)
		}
	}
	// The stale transfer is refused whole: its A leg (token 10 < 11) as stale, its B leg,
	// whose token 20 is the highest of B, as vetoed; neither is applied.
	bLeg, aLeg := h.Writes[4], h.Writes[5]
	if bLeg.Accepted || !bLeg.Vetoed || bLeg.Stale() || aLeg.Accepted || aLeg.Vetoed || !aLeg.Stale() {
		t.Fatalf("stale transfer recorded as B %+v, A %+v", bLeg, aLeg)
	}
	if want := map[string]int64{"A": 2, "B": 5, "C": -7}; !maps.Equal(h.Balances, want) {
		t.Fatalf("balances %v, want %v", h.Balances, want)
	}
	if want := map[string][]int{"A": {0, 3}, "B": {1}, "C": {2}}; !maps.EqualFunc(h.Stored, want, slices.Equal) {
		t.Fatalf("stored %v, want %v", h.Stored, want)
	}
	v := Check(h, DefaultLinTimeout)
	if v.StaleRejected != 1 || len(v.StaleAccepted) != 0 || v.Linearizable != LinOK || len(v.Conservation) != 0 ||
		v.Transfers != 3 || v.TransfersRefused != 1 {
		t.Fatalf("verdict %+v", v)
	}
}

// TestConservationChecker: the same story on a store that decides the legs of a transfer
// one at a time, as two separate fenced writes would (the README's two IncrBy calls): the
// resumed holder's B leg is admitted, its A leg refused, and 3 vanish. Each leg is right by
// its own key's rule, so porcupine and the stale-write checkers pass; only the conservation
// check sees it.
func TestConservationChecker(t *testing.T) {
	apart := func(rec *Recorder) *Register {
		g := NewRegister(rec)
		g.apart = true
		return g
	}
	h := transferHistory(t, apart)
	v := Check(h, DefaultLinTimeout)
	if v.Linearizable != LinOK || len(v.StaleAccepted) != 0 {
		t.Fatalf("per-key checks: porcupine %s, stale accepted %v", v.Linearizable, v.StaleAccepted)
	}
	joined := strings.Join(v.Conservation, "; ")
	if !strings.Contains(joined, "half applied") || !strings.Contains(joined, "add up to -3") {
		t.Fatalf("conservation %q, want the half-applied transfer and the 3 destroyed", v.Conservation)
	}
	if p := (Expect{}).judge(h, v); !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, "money not conserved") }) {
		t.Fatalf("problems %q, want the money", p)
	}
	// A balance that does not match the writes the store holds is caught too.
	h = transferHistory(t, NewRegister)
	h.Balances["B"]++
	if c := CheckConservation(h); len(c) != 2 {
		t.Fatalf("conservation %q, want B's balance and the sum", c)
	}
}

// TestMultiKeyHolds: a lock over two keys is one acquisition with a hold per key; the
// per-key checkers see each key's hold, the judge counts the section once with the writes
// of all its keys, and the timeline draws each hold in its key's rows.
func TestMultiKeyHolds(t *testing.T) {
	rec := NewRecorder(History{Keys: []string{"A", "B", "C"}, Clients: 2, Nodes: 1})
	at := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	ids := rec.BeginHolds([]Hold{
		{Client: 0, Key: "A", Token: 10, LockID: "p", Role: "paused", Asked: 0, Granted: at(1), Until: at(100)},
		{Client: 0, Key: "B", Token: 20, LockID: "p", Role: "paused", Asked: 0, Granted: at(1), Until: at(100)},
	})
	if !slices.Equal(ids, []int{0, 1}) {
		t.Fatalf("ids %v", ids)
	}
	reg := NewRegister(rec)
	transfer(reg, 0, "A", 10, 0, "B", 20, 1, 5)
	taker := rec.BeginHolds([]Hold{
		{Client: 1, Key: "C", Token: 30, LockID: "t", Asked: at(150), Granted: at(160), Until: at(260)},
		{Client: 1, Key: "A", Token: 11, LockID: "t", Asked: at(150), Granted: at(160), Until: at(260)},
	})
	transfer(reg, 1, "C", 30, taker[0], "A", 11, taker[1], 7)
	rec.EndHold(taker[0], at(200))
	rec.EndHold(taker[1], at(200))
	transfer(reg, 0, "B", 20, 1, "A", 10, 0, 3) // the resumed holder
	rec.EndHold(0, at(300))
	rec.EndHold(1, at(300))
	reg.Close()
	h := rec.Finish(reg.Contents())
	h.Duration = at(400)
	if !slices.Equal(h.Holds[0].Set, []int{0, 1}) || !slices.Equal(h.Holds[3].Set, []int{2, 3}) {
		t.Fatalf("sets %v and %v", h.Holds[0].Set, h.Holds[3].Set)
	}
	v := Check(h, DefaultLinTimeout)
	if v.Acquisitions != 2 || v.PerClientMin != 1 || v.PerClientMax != 1 {
		t.Fatalf("acquisitions %d, per client %d..%d; want 2 and 1 each", v.Acquisitions, v.PerClientMin, v.PerClientMax)
	}
	// Only A was held twice at once, by the paused holder past its deadline.
	if want := []Overlap{{Key: "A", A: 0, B: 3, From: at(160), To: at(200)}}; !slices.Equal(v.Overlaps, want) {
		t.Fatalf("overlaps %+v, want %+v", v.Overlaps, want)
	}
	if p := (Expect{Violation: true, Rejections: true, Lost: "paused"}).judge(h, v); len(p) != 0 {
		t.Fatalf("problems %q", p)
	}
	// The paused section's refused write is its A leg (hold 0) and its vetoed B leg (hold
	// 1): as one section it is fenced off, whichever of its holds is asked about.
	if p := (Expect{Violation: true, Kept: "paused"}).judge(h, v); len(p) != 1 || !strings.Contains(p[0], "lost its lock") {
		t.Fatalf("problems %q, want the paused section reported once as lost", p)
	}
	checkTimeline(t, &Result{History: h, Verdict: v})
}

// TestMostAtOnce: the semaphore check counts the sections that overlap in time, whatever
// their keys, an open one running to the end.
func TestMostAtOnce(t *testing.T) {
	h := &History{Holds: []Hold{
		{ID: 0, Key: "p0", Granted: 0, End: 10},
		{ID: 1, Key: "p1", Granted: 5, End: 15},
		{ID: 2, Key: "p0", Granted: 10, End: 20}, // starts as 0 ends: not at once
		{ID: 3, Key: "p1", Granted: 18, Open: true},
	}}
	if got := mostAtOnce(h); got != 2 {
		t.Errorf("mostAtOnce = %d, want 2", got)
	}
	h.Holds = append(h.Holds, Hold{ID: 4, Key: "p0", Granted: 12, End: 13})
	if got := mostAtOnce(h); got != 3 {
		t.Errorf("mostAtOnce = %d, want 3", got)
	}
	if p := (Expect{Permits: 2}).judge(h, Verdict{Acquisitions: 1, Linearizable: LinOK}); len(p) != 1 || !strings.Contains(p[0], "3 critical sections at once") {
		t.Errorf("judge with 3 holders of 2 permits: %v", p)
	}
	if p := (Expect{Violation: true, Permits: 3}).judge(h, Verdict{Acquisitions: 1, Linearizable: LinOK, Overlaps: []Overlap{{}}}); len(p) != 1 || !strings.Contains(p[0], "not reproduced") {
		t.Errorf("judge expecting more than 3: %v", p)
	}
}
