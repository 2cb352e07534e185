package compare

// The comparison on real servers: the quick profile (healthy runs and the pause fault) on
// every backend, as CI runs it once. What it asserts is what the pause must do to each
// recipe, whatever the machine: a lock with a TTL or a lease is taken over while its holder
// is stopped, the holder's late write is stale, a store without tokens takes it and one that
// checks tokens refuses it; a session-held advisory lock is not taken over at all.

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRealQuickEveryBackend(t *testing.T) {
	requireServers(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Profile: Quick, Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Perf) != len(BackendNames()) {
		t.Fatalf("%d healthy measurements for %d backends", len(rep.Perf), len(BackendNames()))
	}
	for _, p := range rep.Perf {
		for _, row := range []PerfRow{p.Uncontended, p.Contended} {
			if row.Acquisitions == 0 || row.Errors != 0 || row.P50 <= 0 || row.P99 < row.P50 {
				t.Errorf("%s healthy with %d clients: %+v", p.Backend, row.Clients, row)
			}
		}
	}
	pause := Quick.plan().faultFor
	for _, r := range rep.results("pause") {
		c := r.Store
		if r.Backend == "pg-advisory" {
			// The stopped holder's session lives on: nobody else gets the lock until it
			// wakes, finishes and releases.
			if r.Overlaps != 0 || c.Stale != 0 || r.Recovery < pause {
				t.Errorf("pg-advisory under the pause: %d overlaps, %d stale writes, another client after %v (want none, none, ≥ %v)",
					r.Overlaps, c.Stale, r.Recovery, pause)
			}
			continue
		}
		if r.Overlaps == 0 || r.BothValid != 0 || r.Recovery <= 0 || r.Recovery >= pause {
			t.Errorf("%s under the pause: %d overlaps (%d within both validities), another client after %v; want a takeover within the pause and none within both validities",
				r.Backend, r.Overlaps, r.BothValid, r.Recovery)
		}
		if c.Stale == 0 || c.LostPlain == 0 || c.StaleFenced != 0 || c.LostFenced != 0 {
			t.Errorf("%s under the pause: store %+v; want the paused holder's stale write taken and a write lost without tokens, refused and nothing lost with them", r.Backend, c)
		}
	}
	var md, page bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, n := range BackendNames() {
		if !strings.Contains(md.String(), "| "+n+" |") {
			t.Errorf("the Markdown report has no row for %s", n)
		}
		if !strings.Contains(page.String(), `data-backend="`+n+`"><h3>`+n+`</h3><p>`) {
			t.Errorf("the HTML report has no timeline for %s", n)
		}
	}
	if got := strings.Count(page.String(), `<svg xmlns="http://www.w3.org/2000/svg" class="timeline"`); got != len(BackendNames()) {
		t.Errorf("the HTML report draws %d timelines, want one per backend (%d)", got, len(BackendNames()))
	}
}
