package main

// redlock lab: runs the chaos lab's scenarios (package chaos) on real redis-server
// processes, prints their progress and summary, and writes the report files.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/quorumlock/redlock/chaos"
)

const labAbout = `
Runs the chaos lab: the known ways a Redlock lock fails, reproduced on real redis-server
processes, with what fencing does about each. Every run of a scenario starts 5 redis-server
nodes on free loopback ports (redis-server must be on PATH; in sentinel-failover one node is a
Sentinel group: a master, a replica and three Sentinels), puts a fault proxy between every
client and every node, lets the clients loop on Do (DoMulti for transfers) while writing to a
fenced store, injects the scenario's faults, and checks the recorded history: overlapping
critical sections, token uniqueness and order, stale writes accepted or refused by the store
(and a porcupine check of the store's history), lost writes, and money conserved by transfers.

Prints a summary table and writes to --out: report.md (a table per scenario), report.html
(one self-contained page with a timeline per scenario) and histories.json (every run's
recorded history and findings). The exit code is 1 if a scenario did not behave as
expected.

redlock lab --compare [flags] runs the comparison instead (module compare/, docs/choosing.md):
Redlock beside one Redis with Sentinel failover, PostgreSQL (an advisory lock, a lock table)
and etcd, healthy and under the same faults, with its program redlock-compare; the flags
after --compare are its own (--compare -h lists them).

Scenarios:
%s`

const (
	labDefaultRuns = 3
	labMaxRuns     = 1000
	labOutDefault  = "lab-report"
)

// labArgs is lab's parsed and checked command line.
type labArgs struct {
	scenarios []*chaos.Scenario
	runs      int
	seed      uint64
	out       string
	prof      chaos.Profile
}

// runLab is the lab command: it runs the chosen scenarios, prints their progress and
// summary, and writes the report files.
func runLab(ctx context.Context, e *env, args []string) error {
	if isCompare(args) {
		return runCompare(ctx, e, args[1:])
	}
	a, err := parseLab(e, args)
	if err != nil {
		return err
	}
	if err := labReady(a.out); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "redlock lab: %d scenarios × %d runs, profile %s (TTL %v), seed %d\n", len(a.scenarios), a.runs, a.prof.Name, a.prof.TTL, a.seed)
	rep, err := chaos.RunLab(ctx, chaos.LabOptions{Scenarios: a.scenarios, Runs: a.runs, Seed: a.seed, Profile: a.prof,
		Progress: labProgress(e.stdout)})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("lab: interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("lab: %w", err)
	}

	fmt.Fprintln(e.stdout)
	if err := rep.WriteSummary(e.stdout); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	files, err := writeLabFiles(a.out, rep)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	fmt.Fprintf(e.stdout, "\nreport: %s\n", strings.Join(files, ", "))
	if !rep.OK() {
		var bad []string
		for _, s := range rep.Sections {
			if s.Summarize().Failed > 0 {
				bad = append(bad, s.Scenario.Name)
			}
		}
		return fmt.Errorf("lab: %d scenarios did not behave as expected: %s (details in %s)",
			len(bad), strings.Join(bad, ", "), filepath.Join(a.out, "report.md"))
	}
	return nil
}

// parseLab parses and checks lab's command line; its help lists the scenarios.
func parseLab(e *env, args []string) (labArgs, error) {
	var list strings.Builder
	for _, s := range chaos.Scenarios() {
		fmt.Fprintf(&list, "  %-24s %s\n", s.Name, s.Summary)
	}
	fs := newFlagSet("lab", "[--scenario NAME] [--runs N] [--seed S] [--out DIR] [--quick] | --compare [redlock-compare flags]", fmt.Sprintf(labAbout, list.String()))
	scenario := fs.String("scenario", "all", "run only the scenario `NAME` (or a comma-separated list of names)")
	runs := new(int)
	intVar(fs, runs, "runs", labDefaultRuns, "`N` runs of each scenario")
	seed := new(uint64)
	*seed = 1
	fs.Var((*uint64Flag)(seed), "seed", "`S`, the seed of the scripts' random choices (which client, which nodes); run i uses seed S+i")
	out := fs.String("out", labOutDefault, "`DIR` to write the report to, created if missing")
	quick := fs.Bool("quick", false, "the tests' profile: TTL 1s and short phases (default: the full profile, TTL 2s)")
	if err := parseFlags(fs, e, args); err != nil {
		return labArgs{}, err
	}
	if *runs < 1 || *runs > labMaxRuns {
		return labArgs{}, usageErrorf("lab: --runs %d is outside [1, %d]", *runs, labMaxRuns)
	}
	scs, err := selectScenarios(*scenario)
	if err != nil {
		return labArgs{}, err
	}
	if strings.TrimSpace(*out) == "" {
		return labArgs{}, usageErrorf("lab: --out is empty")
	}
	a := labArgs{scenarios: scs, runs: *runs, seed: *seed, out: *out, prof: chaos.Full}
	if *quick {
		a.prof = chaos.Quick
	}
	return a, nil
}

// labReady checks what the lab needs before spending minutes on the runs: redis-server on
// PATH, and an output directory (created if missing) that the report can be written to.
func labReady(out string) error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("lab: redis-server not found on PATH; the lab runs real nodes (on Debian: apt-get install -y redis-server)")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	probe, err := os.CreateTemp(out, ".redlock-lab-probe-*")
	if err != nil {
		return fmt.Errorf("lab: --out %s is not writable: %w", out, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// labProgress returns the lab's progress report: one line on w per finished run, with its
// counts and whether it behaved as its scenario expects.
func labProgress(w io.Writer) func(r *chaos.Result) {
	return func(r *chaos.Result) {
		v := r.Verdict
		verdict := "as expected"
		if !r.OK() {
			verdict = "UNEXPECTED: " + strings.Join(r.Problems, "; ")
		}
		fmt.Fprintf(w, "  %-24s run %d (seed %d): %4d acquisitions, %d ME violations, %d stale writes rejected, %d accepted, porcupine %s: %s\n",
			r.Scenario, r.Run, r.Seed, v.Acquisitions, v.Violations, v.StaleRejected, len(v.StaleAccepted), v.Linearizable, verdict)
	}
}

// selectScenarios turns --scenario into scenarios: "all", one name, or a comma-separated
// list.
func selectScenarios(spec string) ([]*chaos.Scenario, error) {
	if strings.TrimSpace(spec) == "all" {
		return chaos.Scenarios(), nil
	}
	var out []*chaos.Scenario
	seen := map[string]bool{}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		s, ok := chaos.Lookup(name)
		if !ok {
			return nil, usageErrorf("lab: unknown scenario %q; scenarios: all, %s", name, strings.Join(chaos.Names(), ", "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// writeLabFiles writes report.md, report.html and histories.json into dir and returns their
// paths.
func writeLabFiles(dir string, rep *chaos.Report) ([]string, error) {
	var paths []string
	write := func(name string, f func(*os.File) error) error {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := fh.Close(); err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}
	err := errors.Join(
		write("report.md", func(f *os.File) error { return rep.WriteMarkdown(f) }),
		write("report.html", func(f *os.File) error { return rep.WriteHTML(f) }),
		write("histories.json", func(f *os.File) error {
			type run struct {
				Scenario string         `json:"scenario"`
				Run      int            `json:"run"`
				Seed     uint64         `json:"seed"`
				Problems []string       `json:"problems"`
				Verdict  chaos.Verdict  `json:"verdict"`
				History  *chaos.History `json:"history"`
			}
			var all []run
			for _, s := range rep.Sections {
				for _, r := range s.Runs {
					all = append(all, run{r.Scenario, r.Run, r.Seed, r.Problems, r.Verdict, r.History})
				}
			}
			return json.NewEncoder(f).Encode(map[string]any{"profile": rep.Profile.Name, "seed": rep.Seed,
				"started": rep.Started.Format(time.RFC3339), "runs": all})
		}),
	)
	return paths, err
}
