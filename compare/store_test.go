package compare

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/chaos"
)

// TestStoreCounts: an older holder writing after a newer one is stale; the plain twin takes
// it and loses the newer holder's work, the fenced twin refuses it and loses nothing.
func TestStoreCounts(t *testing.T) {
	st := newStore(chaos.NewRecorder(chaos.History{}))
	a := st.read("k")                    // hold 0, granted at 1, token 5
	st.write(0, 0, "k", 1, 5, a, 1)      // k = 1
	st.write(0, 0, "k", 1, 5, a, 2)      // k = 2
	b := st.read("k")                    // hold 1, granted at 2, token 6, reads 2
	st.write(1, 1, "k", 2, 6, b, 1)      // k = 3
	if st.write(0, 0, "k", 1, 5, a, 3) { // hold 0 again, after hold 1 wrote: stale
		t.Error("the fenced twin accepted token 5 after token 6")
	}
	got := st.counts()
	want := storeCounts{Writes: 4, Stale: 1, StaleFenced: 0, Refused: 1, LostPlain: 1, LostFenced: 0}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if st.plain["k"] != 3 || st.fenced["k"] != 3 {
		t.Errorf("plain %d, fenced %d; want 3 and 3 (plain: the stale write's 0+3; fenced: hold 1's 2+1)", st.plain["k"], st.fenced["k"])
	}
}

// TestStoreTokenReused: a newer holder given the same token as an older one (a single
// node's counter after a failover lost increments) lets the older holder's stale write
// through the fenced twin too.
func TestStoreTokenReused(t *testing.T) {
	st := newStore(chaos.NewRecorder(chaos.History{}))
	a := st.read("k")
	st.write(0, 0, "k", 1, 7, a, 1)
	b := st.read("k")
	st.write(1, 1, "k", 2, 7, b, 1)
	if !st.write(0, 0, "k", 1, 7, a, 2) {
		t.Error("the fenced twin refused an equal token")
	}
	got := st.counts()
	if got.Stale != 1 || got.StaleFenced != 1 || got.LostFenced != 1 || got.LostPlain != 1 {
		t.Errorf("counts %+v, want 1 stale write accepted by both twins, each losing one write", got)
	}
}

// TestStoreInOrder: sections one after another lose nothing and nothing is stale.
func TestStoreInOrder(t *testing.T) {
	st := newStore(chaos.NewRecorder(chaos.History{}))
	for h := range 4 {
		b := st.read("k")
		for seq := 1; seq <= 3; seq++ {
			st.write(h%2, h, "k", time.Duration(h), uint64(h+1), b, seq)
		}
	}
	if got := st.counts(); got != (storeCounts{Writes: 12}) {
		t.Errorf("counts %+v, want 12 writes and nothing else", got)
	}
	if st.plain["k"] != 12 {
		t.Errorf("value %d, want 12", st.plain["k"])
	}
}
