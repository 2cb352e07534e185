package harness

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock"

	"github.com/redis/go-redis/v9"
)

// libNames are the three library contenders, in the order libSet returns them.
var libNames = []string{"ours", "redsync default", "redsync fail-fast"}

// newLib builds library contender k (see libNames) on the given addresses.
func newLib(k int, addrs []string, prefix, suffix string) (*contender, error) {
	c := &contender{name: libNames[k] + suffix, lib: libNames[k]}
	switch k {
	case 0:
		o, err := newOurs(addrs)
		if err != nil {
			return nil, err
		}
		c.impl, c.prefix = o, prefix+":ours:"
	case 1:
		c.impl, c.prefix = newRsync(addrs, false), prefix+":rs:"
	default:
		c.impl, c.prefix = newRsync(addrs, true), prefix+":rsff:"
	}
	return c, nil
}

// libSet builds the three library contenders of a scenario on the given addresses.
func libSet(addrs []string, prefix, suffix string) ([]*contender, error) {
	cts := make([]*contender, 0, len(libNames))
	for k := range libNames {
		c, err := newLib(k, addrs, prefix, suffix)
		if err != nil {
			closeAll(cts)
			return nil, err
		}
		cts = append(cts, c)
	}
	return cts, nil
}

func closeAll(cts []*contender) {
	for _, c := range cts {
		c.impl.close()
	}
}

// scenarioAE measures a (uncontended TryAcquire+Release, healthy nodes) and e (the two
// floors) in one interleaved run, so that every ratio between them comes from the same
// minutes of the same machine.
func (r *runner) scenarioAE(ctx context.Context) error {
	addrs := r.addrs[:5]
	cts, err := libSet(addrs, "a", "")
	if err != nil {
		return err
	}
	src, from, err := acquireLua()
	if err != nil {
		return err
	}
	unfenced, err := newOurs(addrs, redlock.WithoutFencing())
	if err != nil {
		closeAll(cts)
		return err
	}
	cts = append(cts,
		&contender{name: "floor: single node", lib: "floor", impl: newFloorSingle(addrs[0]), prefix: "e:single:"},
		&contender{name: "floor: naive 5-node fan-out", lib: "floor", impl: newFloorFanout(addrs), prefix: "e:fanout:"},
		&contender{name: "floor: quorum return, SET NX", lib: "floor", impl: newFloorQuorum(addrs, nil), prefix: "e:qset:"},
		&contender{name: "floor: quorum return, acquire.lua", lib: "floor", impl: newFloorQuorum(addrs, redis.NewScript(src)), prefix: "e:qlua:"},
		&contender{name: "ours, WithoutFencing (no token)", lib: "ours", impl: unfenced, prefix: "a:ours-nofence:"},
	)
	defer closeAll(cts)
	for _, c := range cts {
		c.warm(ctx)
	}
	r.logf("a/e: %d contenders × %s, interleaved", len(cts), r.cfg.Dur)
	sts := interleave(ctx, cts, r.cfg.Dur, r.cfg.Slice, r.cfg.MaxOps)

	ours, rs, single, fan, qset, qlua, nofence := sts[0], sts[1], sts[3], sts[4], sts[5], sts[6], sts[7]
	row := func(c *contender, st *stats) []string {
		return []string{c.name, rate(st.opsPerSec()),
			ms(st.acq.pct(50)), ms(st.acq.pct(99)), ms(st.rel.pct(50)), ms(st.rel.pct(99)),
			fmt.Sprint(st.ops), fmt.Sprint(st.acqFail + st.relFail),
			ratio(ours.opsPerSec(), st.opsPerSec()), spread(ours, st),
			fmtRatio(durRatio(ours.acq.pct(50), st.acq.pct(50)))}
	}
	w := r.out
	head := []string{"contender", "ops/s", "acquire p50", "acquire p99", "release p50", "release p99", "cycles", "errors", "ours/this ops/s", "per-round ours/this: median (IQR)", "ours/this acquire p50"}
	var ns []string
	if r.want("a") {
		fmt.Fprintf(w, "## a: uncontended TryAcquire+Release, distinct keys, 1 goroutine, 5 healthy nodes\n\n")
		rows := make([][]string, 0, len(cts))
		for i, c := range cts {
			rows = append(rows, row(c, sts[i]))
			ns = append(ns, errNote(c.name, sts[i]))
		}
		table(w, head, rows)
		fmt.Fprintf(w, "redsync's TryAcquire is `NewMutex(key).TryLockContext(ctx)` and its release `UnlockContext(ctx)`; a cycle counts when both succeed. Fencing on (the default) for ours. "+
			"The per-round column divides ours' rate by the other's slice by slice within each round (%d rounds) and gives the median and interquartile range: how far the overall ratio can be trusted on this machine.\n\n", ours.slices)
		fmt.Fprintf(w, "The price of fencing: the last row is the library with `WithoutFencing()`, which sends a plain SET NX PX instead of the acquire script and mints no token "+
			"(not what the targets measure). Against redsync default it runs at %s the ops/s with %s the acquire p50; "+
			"with fencing on, the library runs at %s of its own rate without.\n\n",
			ratio(nofence.opsPerSec(), rs.opsPerSec()), fmtRatio(durRatio(nofence.acq.pct(50), rs.acq.pct(50))), ratio(ours.opsPerSec(), nofence.opsPerSec()))
		notes(w, ns)
		ts := []Target{
			atLeast("a", "ops/s vs redsync default", ours.opsPerSec()/rs.opsPerSec(), 1.2),
			atLeast("a", "ops/s vs naive fan-out floor", ours.opsPerSec()/fan.opsPerSec(), 0.95),
			atMost("a", "acquire p50 vs redsync default", durRatio(ours.acq.pct(50), rs.acq.pct(50)), 0.8),
		}
		ts[0].Got += "; per round " + spread(ours, rs)
		ts[1].Got += "; per round " + spread(ours, fan)
		targetTable(w, ts)
		r.add(ts...)
	}
	if r.want("e") {
		fmt.Fprintf(w, "## e: floors (measured interleaved with a)\n\n")
		rows := [][]string{row(cts[3], single), row(cts[4], fan), row(cts[5], qset), row(cts[6], qlua), row(cts[0], ours), row(cts[7], nofence)}
		table(w, head, rows)
		fmt.Fprintf(w, "The single-node floor is `SET key v NX PX 8000` and a compare-and-delete script (EVALSHA) on one node. "+
			"The fan-out floor sends the same two commands to all 5 nodes from 5 goroutines and waits for all 5 replies each time: "+
			"no token, no timeouts of its own, no undo. Ours is %s of the fan-out floor's rate and %s of the single-node floor's.\n\n"+
			"Two more rows split the gap (not floors the targets name): the same fan-out returning as soon as 3 of 5 nodes agreed, "+
			"with plain SET NX PX, and with the library's own acquire script (%s: SET NX PX plus the fence counter) in its place. "+
			"The script costs %s of the SET NX rate (acquire p50 %s → %s); ours runs at %s of the scripted quorum floor, "+
			"which is what the library adds on top of the commands: goroutines, contexts, timers, the tally, the token.\n\n",
			ratio(ours.opsPerSec(), fan.opsPerSec()), ratio(ours.opsPerSec(), single.opsPerSec()),
			from, ratio(qlua.opsPerSec(), qset.opsPerSec()), ms(qset.acq.pct(50)), ms(qlua.acq.pct(50)), ratio(ours.opsPerSec(), qlua.opsPerSec()))
	}
	return nil
}
