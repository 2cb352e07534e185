package chaos

// The sampler: reads every key's state on every node directly, not through the fault
// proxies, for the timeline's node rows, and notes the fence counters when a script asks.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// NoteCounters notes every node's fence counter for the key and what it holds there, read
// directly from the nodes.
func (r *Run) NoteCounters(ctx context.Context, what string) {
	st, err := r.status.Status(ctx, r.keys[0])
	if err != nil {
		r.rec.Note("%s: status: %v", what, err)
		return
	}
	var b strings.Builder
	for _, ns := range st.Nodes {
		switch {
		case ns.Err != nil:
			fmt.Fprintf(&b, " node %d: no answer;", ns.Node)
		default:
			fmt.Fprintf(&b, " node %d: counter %d;", ns.Node, ns.Counter)
		}
	}
	r.rec.Note("%s:%s", what, strings.TrimSuffix(b.String(), ";"))
}

// sample reads every key's state on every node, directly (not through the proxies), every
// SampleEvery, and records the spans of time during which it did not change.
func (r *Run) sample(ctx context.Context) {
	type cur struct {
		span NodeSpan
		ok   bool
	}
	open := make([][]cur, len(r.keys))
	for k := range open {
		open[k] = make([]cur, len(r.nodes))
	}
	flush := func(now time.Duration) {
		for k := range open {
			for n := range open[k] {
				if c := open[k][n]; c.ok && now > c.span.From {
					c.span.To = now
					r.rec.addSpan(c.span)
				}
			}
		}
	}
	tick := time.NewTicker(r.Profile.SampleEvery)
	defer tick.Stop()
	for {
		for k, key := range r.keys {
			st, err := r.status.Status(ctx, key)
			if err != nil {
				flush(r.rec.Now())
				return
			}
			now := r.rec.Now()
			for n, ns := range st.Nodes {
				s := NodeSpan{Key: key, Node: n, From: now, LockID: ns.Holder, Down: ns.Err != nil}
				c := &open[k][n]
				if c.ok && c.span.LockID == s.LockID && c.span.Down == s.Down {
					continue
				}
				if c.ok {
					c.span.To = now
					r.rec.addSpan(c.span)
				}
				*c = cur{span: s, ok: true}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			flush(r.rec.Now())
			return
		}
	}
}
