package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// Settings of the demo and the test: short TTLs so that a paused worker's lock expires fast.
const (
	storyTTL         = time.Second
	storyBatch       = 3
	storySettlements = 8
	storyTimeout     = 90 * time.Second
)

// cmdDemo starts three redis-server nodes and a PostgreSQL server of its own (temporary
// directories, free loopback ports; nothing already running is touched), plays every scenario
// on a fresh database with this same program as the worker, prints the ledger after each, and
// fails if an outcome is not the one the scenario promises.
func cmdDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	fmt.Fprintln(out, "demo: starting 3 redis-server nodes and a PostgreSQL server on loopback…")
	nodes, err := redisproc.Start(ctx, 3, redisproc.Config{})
	if err != nil {
		return fmt.Errorf("%w\n(the demo needs redis-server: apt-get install -y redis-server)", err)
	}
	defer nodes.Close()
	pg, err := pgtest.Launch(ctx, pgtest.Config{})
	if err != nil {
		return fmt.Errorf("%w\n(the demo needs the PostgreSQL server programs: apt-get install -y postgresql)", err)
	}
	defer pg.Close()

	var failed []string
	for i, sc := range scenarios {
		fmt.Fprintf(out, "\n=== scenario %d, %s: %s\n", i+1, sc.name, sc.title)
		if err := demoScenario(ctx, out, self, nodes.URLs(), pg, sc); err != nil {
			fmt.Fprintf(out, "demo: scenario %s: %v\n", sc.name, err)
			failed = append(failed, sc.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %v", errStory, failed)
	}
	fmt.Fprintln(out, "\ndemo: every scenario ended as promised.")
	return nil
}

func demoScenario(ctx context.Context, out io.Writer, self string, nodes []string, pg *pgtest.Server, sc scenario) error {
	_, dsn, err := pg.NewDatabase(ctx, "settlement_"+sc.name)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := setupLedger(ctx, db, storySettlements); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, storyTimeout)
	defer cancel()
	res, err := runStory(sctx, storyConfig{bin: self, nodes: nodes, dsn: dsn, job: "settlement:reconcile:" + sc.name,
		ttl: storyTTL, batch: storyBatch, log: out}, sc)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	wrong, err := report(ctx, db, out)
	if err != nil {
		return err
	}
	// The outcome of the paused worker's late payment, and whether the ledger is right.
	var outcome string
	err = db.QueryRowContext(ctx, `SELECT outcome FROM payout_attempts WHERE worker = $1 AND settlement_id = $2 AND token = $3
		ORDER BY id DESC LIMIT 1`, res.paused, res.pausedSettlement, int64(res.pausedToken)).Scan(&outcome)
	if err != nil {
		return fmt.Errorf("the paused worker's attempt: %w", err)
	}
	want, wantWrong := map[string]string{"fenced": outcomeStaleToken, "no-fence": outcomeDuplicate, "no-defences": outcomePaid}[sc.name], 0
	if sc.name == "no-defences" {
		wantWrong = -1 // at least one settlement paid twice
	}
	fmt.Fprintf(out, "\n%s's late payment of %s with token %d: %s (%s)\n", res.paused, res.pausedSettlement, res.pausedToken, outcome, layer(outcome))
	switch {
	case outcome != want:
		return fmt.Errorf("%w: the late payment ended %s, want %s", errStory, outcome, want)
	case wantWrong == 0 && wrong != 0:
		return fmt.Errorf("%w: %d settlements not paid exactly once", errStory, wrong)
	case wantWrong < 0 && wrong == 0:
		return errors.New("expected the incident (a double payment) and saw none")
	}
	return nil
}
