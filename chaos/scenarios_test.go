package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// TestScenarios runs every scenario of the lab once on real redis-server processes with the
// Quick profile (REDLOCK_CHAOS_LONG=1: three runs each with the Full profile) and asserts
// what the scenario expects: where mutual exclusion is claimed, no overlap; where it is
// expected to break, that the run did observe the break; and everywhere, no stale write
// accepted, unique and ordered tokens, a linearizable store history and no lost write.
func TestScenarios(t *testing.T) {
	redisproc.Require(t)
	prof, runs := Quick, 1
	if long() {
		prof, runs = Full, 3
	}
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			for run := range runs {
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
				res, err := s.Run(ctx, prof, run, uint64(run+1))
				cancel()
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				v := res.Verdict
				t.Logf("run %d: %d acquisitions (%.1f/s, p99 wait %v), %d overlaps, %d stale writes rejected, %d accepted, porcupine %s, biggest token step %d",
					run, v.Acquisitions, v.AcqPerSec, v.WaitP99.Round(time.Millisecond), len(v.Overlaps), v.StaleRejected,
					len(v.StaleAccepted), v.Linearizable, v.BiggestJump)
				for _, o := range v.Overlaps {
					a, b := res.History.Holds[o.A], res.History.Holds[o.B]
					t.Logf("  overlap %v..%v: client %d (token %d) and client %d (token %d), both valid: %v",
						o.From.Round(time.Millisecond), o.To.Round(time.Millisecond), a.Client, a.Token, b.Client, b.Token, o.BothValid)
				}
				for _, p := range res.Problems {
					t.Errorf("run %d: %s", run, p)
				}
				checkTimeline(t, res)
				if t.Failed() || testing.Verbose() {
					for _, n := range res.History.Notes {
						t.Log(n)
					}
				}
			}
		})
	}
}
