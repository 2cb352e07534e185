package chaos

import (
	"context"
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
