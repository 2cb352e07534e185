// Command settlement is the nightly reconciliation job of a payments team, scaled from one
// instance to three, done right: each instance takes a Redlock lock with Do and pays due
// settlements from a PostgreSQL ledger with fenced writes (package sqlfence), backed by a unique
// idempotency key per payout. See README.md in this directory.
//
//	settlement demo                      the whole story on local redis-server and PostgreSQL
//	settlement setup  --dsn DSN          create the ledger and seed due settlements
//	settlement worker --nodes URLS --dsn DSN --worker-id ID [--ttl D] …
//	settlement report --dsn DSN          payouts per settlement and what stopped each refusal
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

const usage = `settlement: a reconciliation job that pays each settlement exactly once,
with three instances running, one of them paused past its lock's TTL.

Usage:
  settlement demo                 run the whole story on local redis-server and PostgreSQL
                                  processes it starts itself (needs redis-server and the
                                  PostgreSQL server programs installed), three scenarios
  settlement setup  --dsn DSN [--settlements N]
                                  create the ledger tables and seed N due settlements
  settlement worker --nodes URLS --dsn DSN --worker-id ID [flags]
                                  run one instance of the job (see settlement worker -h)
  settlement report --dsn DSN     payouts per settlement; refused attempts and the layer
                                  (fencing token or idempotency key) that refused them

Run the demo:  go run ./examples/settlement demo
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "settlement:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "worker":
		return cmdWorker(ctx, args[1:], stdin, stdout)
	case "setup":
		return cmdSetup(ctx, args[1:], stdout)
	case "report":
		return cmdReport(ctx, args[1:], stdout)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
}

func cmdWorker(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var cfg workerConfig
	nodes := fs.String("nodes", "", "comma-separated redis:// `URLS` of the lock's nodes (3 or 5 independent servers)")
	fs.StringVar(&cfg.dsn, "dsn", "", "PostgreSQL `DSN` of the ledger, e.g. postgres://user@127.0.0.1:5432/ledger")
	fs.StringVar(&cfg.id, "worker-id", "", "this worker's `name` in the ledger and its output")
	fs.StringVar(&cfg.job, "job", "settlement:reconcile", "the lock `key` of the job")
	fs.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lock TTL; Do renews the lock every third of it")
	fs.IntVar(&cfg.batch, "batch", 4, "settlements paid per lock holding")
	fs.IntVar(&cfg.pauseBefore, "pause-before", 0, "before the `n`-th payment attempt, print a line and wait for a line on stdin\n(a fixed point at which the demo pauses the worker with SIGSTOP); 0: never")
	fs.BoolVar(&cfg.noFence, "unsafe-no-fence", false, "UNSAFE, for the demo: pay without the fencing token check")
	fs.BoolVar(&cfg.randomKeys, "unsafe-random-idempotency-key", false, "UNSAFE, for the demo: a fresh idempotency key per attempt, which stops nothing")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes != "" {
		cfg.nodes = strings.Split(*nodes, ",")
	}
	if len(cfg.nodes) == 0 || cfg.dsn == "" || cfg.id == "" || cfg.batch < 1 {
		fs.Usage()
		return errors.New("worker needs --nodes, --dsn, --worker-id and a positive --batch")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return runWorker(ctx, cfg, stdin, stdout)
}

func openLedger(dsn string) (*sql.DB, error) {
	if dsn == "" {
		return nil, errors.New("--dsn is required")
	}
	return sql.Open("pgx", dsn)
}

func cmdSetup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dsn := fs.String("dsn", "", "PostgreSQL `DSN` of the ledger")
	n := fs.Int("settlements", 10, "number of due settlements to seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openLedger(*dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := setupLedger(ctx, db, *n); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ledger ready: %d settlements due\n", *n)
	return nil
}

func cmdReport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dsn := fs.String("dsn", "", "PostgreSQL `DSN` of the ledger")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openLedger(*dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	wrong, err := report(ctx, db, stdout)
	if err != nil {
		return err
	}
	if wrong > 0 {
		return fmt.Errorf("%d settlements not paid exactly once", wrong)
	}
	return nil
}
