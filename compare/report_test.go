package compare

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestJainAndQuantile(t *testing.T) {
	if j := jain([]int{5, 5, 5, 5}); j != 1 {
		t.Errorf("jain of equal counts %v, want 1", j)
	}
	if j := jain([]int{8, 0, 0, 0}); j != 0.25 {
		t.Errorf("jain of one client taking all %v, want 1/4", j)
	}
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(d, 0.5); q != 5 {
		t.Errorf("p50 %v, want 5", q)
	}
	if q := quantile(d, 0.99); q != 10 {
		t.Errorf("p99 %v, want 10", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("p50 of nothing %v", q)
	}
}

// TestPromiseVerdicts: a promise of exclusion breaks on an overlap within both validities
// and not on one past the first holder's validity; a promise of fencing breaks on a stale
// write the fenced store took; a warning reports the failure it warns of as seen.
func TestPromiseVerdicts(t *testing.T) {
	past := &FaultResult{Fault: "pause", Applicable: true, Overlaps: 3}
	within := &FaultResult{Fault: "restart-empty", Applicable: true, Overlaps: 1, BothValid: 1}
	if ok, _ := exclusive([]*FaultResult{past}); !ok {
		t.Error("an overlap past the first holder's validity broke the exclusion promise")
	}
	if ok, why := exclusive([]*FaultResult{past, within}); ok || !strings.Contains(why, "restart-empty") {
		t.Errorf("an overlap within both validities kept it: %v %q", ok, why)
	}
	na := &FaultResult{Fault: "restart-empty", Applicable: false, BothValid: 9}
	if ok, _ := exclusive([]*FaultResult{na}); !ok {
		t.Error("a run that did not apply counted")
	}
	through := &FaultResult{Fault: "primary", Applicable: true, Store: storeCounts{StaleFenced: 2}}
	if ok, why := fenced([]*FaultResult{past, through}); ok || !strings.Contains(why, "2 stale writes") {
		t.Errorf("stale writes accepted despite tokens kept the fencing promise: %v %q", ok, why)
	}
	rep := &Report{Backends: []string{"sentinel", "redlock"}, Faults: []*FaultResult{
		{Backend: "sentinel", Fault: "restart-empty", Applicable: true, BothValid: 1},
		{Backend: "redlock", Fault: "restart-empty", Applicable: true},
	}}
	rows := rep.promiseTable().rows
	if len(rows) != 2 || !strings.Contains(rows[0][3], "the failure warned of happened") || !strings.HasPrefix(rows[1][3], "kept") {
		t.Errorf("promise rows %q", rows)
	}
	if strings.Contains(rows[1][3], "Seen in these runs") {
		t.Errorf("a clean run is said to have shown something: %q", rows[1][3])
	}
	// etcd's promise is about fencing only: kept, and the overlap and the lost write of its
	// partition run still shown beside it, so that "kept" does not read as all clear.
	rep = &Report{Backends: []string{"etcd"}, Faults: []*FaultResult{
		{Backend: "etcd", Fault: "pause", Applicable: true, Overlaps: 1},
		{Backend: "etcd", Fault: "partition", Applicable: true, Overlaps: 1, BothValid: 1, Store: storeCounts{LostFenced: 1}},
	}}
	row := rep.promiseTable().rows[0][3]
	if want := "kept: the checking store refused every stale write in every run. Seen in these runs: partition: 1 overlaps within both validities, 1 writes lost with tokens"; row != want {
		t.Errorf("etcd's verdict %q, want %q", row, want)
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, o := range map[string]Options{
		"unknown backend": {Backends: []string{"zookeeper"}, Profile: Quick},
		"no backend":      {Backends: []string{}, Profile: Quick},
		"unknown fault":   {Faults: []string{"meteor"}, Profile: Quick},
		"TTL not seconds": {Profile: Profile{Name: "x", TTL: 1500 * time.Millisecond, Clients: 3, PerfFor: time.Second, Contenders: 8}},
		"one client":      {Profile: Profile{Name: "x", TTL: 2 * time.Second, Clients: 1, PerfFor: time.Second, Contenders: 8}},
		"backend twice":   {Backends: []string{"etcd", "etcd"}, Profile: Quick},
		"fault twice":     {Faults: []string{"pause", "pause"}, Profile: Quick},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("%s: Check accepted %+v", name, o)
		}
		if _, err := Run(ctx, o); err == nil {
			t.Errorf("%s: Run accepted %+v", name, o)
		}
	}
	if err := (Options{Faults: []string{}, Profile: Quick}).Check(); err != nil {
		t.Errorf("no faults (the healthy runs only): %v", err)
	}
	if _, err := Run(ctx, Options{Backends: []string{}, Profile: Quick}); !errors.Is(err, errNoBackends) {
		t.Errorf("no backend: %v", err)
	}
}

// TestClockStepSetAside: a run during which the machine's wall clock stepped does not count
// against a promise, and the report says why.
func TestClockStepSetAside(t *testing.T) {
	jumped := &FaultResult{Backend: "redlock", Fault: "primary", Applicable: true, Overlaps: 1, BothValid: 1, ClockStep: 8 * time.Second}
	if ok, _ := exclusive([]*FaultResult{jumped}); !ok {
		t.Error("a run with an 8 s clock step broke the exclusion promise")
	}
	rep := &Report{Backends: []string{"redlock"}, Faults: []*FaultResult{jumped}}
	if row := rep.promiseTable().rows[0]; !strings.Contains(row[3], "1 run(s) set aside") {
		t.Errorf("promise row %q does not say a run was set aside", row)
	}
	if row := rep.faultTable("primary").rows[0]; !strings.Contains(row[len(row)-1], "WALL CLOCK STEPPED +8.00 s") {
		t.Errorf("fault row %q does not flag the step", row)
	}
	small := &FaultResult{Applicable: true, BothValid: 1, ClockStep: 3 * time.Millisecond}
	if ok, _ := exclusive([]*FaultResult{small}); ok {
		t.Error("a 3 ms drift set a real overlap aside")
	}
}
