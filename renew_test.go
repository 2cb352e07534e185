package redlock

import (
	"testing"
	"time"
)

// TestRenewerLag: the renewer remembers how late its timed waits ended (the most of its
// recent wakes, fading by an eighth per wake), and a kick, which is not a timed wait, adds
// nothing.
func TestRenewerLag(t *testing.T) {
	var r renewer
	t0 := time.Unix(1000, 0)
	r.noteLag(t0.Add(30*time.Millisecond), t0) // woke 30 ms after the time asked
	if r.lag != 30*time.Millisecond {
		t.Fatalf("lag %v after a wake 30 ms late", r.lag)
	}
	r.noteLag(t0.Add(time.Second), time.Time{}) // a kick
	if want := 30 * time.Millisecond * 7 / 8; r.lag != want {
		t.Fatalf("lag %v after a kick, want %v", r.lag, want)
	}
	r.noteLag(t0.Add(2*time.Second+100*time.Millisecond), t0.Add(2*time.Second))
	if r.lag != 100*time.Millisecond {
		t.Fatalf("lag %v after a wake 100 ms late, want the larger", r.lag)
	}
	for range 100 {
		r.noteLag(t0, t0) // on time
	}
	if r.lag > time.Millisecond {
		t.Fatalf("lag %v after 100 wakes on time: it does not fade", r.lag)
	}
}
