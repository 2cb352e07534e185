package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// workerConfig is what one worker process is told on its command line.
type workerConfig struct {
	nodes       []string      // redis:// URLs of the lock's nodes
	dsn         string        // the ledger
	id          string        // the worker's name, e.g. w1
	job         string        // the lock key of the job
	ttl         time.Duration // lock TTL; Do renews it every ttl/3
	batch       int           // settlements paid per lock holding
	pauseBefore int           // wait for a line on stdin before the n-th payment attempt; 0: never
	noFence     bool          // --unsafe-no-fence
	randomKeys  bool          // --unsafe-random-idempotency-key
}

// writeTimeout bounds one payment transaction.
const writeTimeout = 10 * time.Second

// runWorker is the nightly reconcile job: while settlements are due, take the job's lock with
// Do and pay up to a batch of them, each with a fenced write carrying the lock's token. It
// prints one line per step to out; the test and the demo wait for these lines.
func runWorker(ctx context.Context, cfg workerConfig, stdin io.Reader, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, cfg.id+": "+format+"\n", args...) }

	nodes := make([]redis.UniversalClient, 0, len(cfg.nodes))
	for _, u := range cfg.nodes {
		opts, err := redis.ParseURL(u)
		if err != nil {
			return fmt.Errorf("node %q: %w", u, err)
		}
		rc := redis.NewClient(opts)
		defer rc.Close()
		nodes = append(nodes, rc)
	}
	locks, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithRetryDelay(25*time.Millisecond))
	if err != nil {
		return err
	}
	defer locks.Close()
	db, err := sql.Open("pgx", cfg.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	p := &payer{db: db, worker: cfg.id, fenced: !cfg.noFence, stableKeys: !cfg.randomKeys}
	lines := bufio.NewReader(stdin)
	attempts := 0

	for {
		finished := false
		err := locks.Do(ctx, cfg.job, cfg.ttl, func(ctx context.Context, l *redlock.Lock) error {
			tok := l.Token()
			due, err := dueSettlements(ctx, db, cfg.batch)
			if err != nil {
				return err
			}
			if len(due) == 0 {
				finished = true
				return nil
			}
			for _, id := range due {
				// Stop early when Do says the lock is going. This is only an optimisation: a
				// pause can strike after this check, and only the fence makes that safe.
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				attempts++
				say("holding token %d, paying settlement %s", tok, id)
				if attempts == cfg.pauseBefore {
					say("waiting on stdin before paying settlement %s with token %d", id, tok)
					if _, err := lines.ReadString('\n'); err != nil {
						return fmt.Errorf("waiting on stdin: %w", err)
					}
					say("resumed, paying settlement %s with token %d", id, tok)
				}
				// A payment that has started is not cut short when the lock is lost: like a
				// packet already on the wire, it reaches the database, and the fence decides.
				// (Passing ctx here would also be safe; the demo leaves it out to show that the
				// fence alone is enough.)
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
				outcome, err := p.pay(wctx, id, tok)
				cancel()
				switch outcome {
				case outcomePaid, outcomeAlreadyPaid:
					say("settlement %s: %s with token %d", id, outcome, tok)
				case outcomeStaleToken, outcomeDuplicate:
					say("settlement %s: %s with token %d, stopped by the %s: %v", id, outcome, tok, layer(outcome), err)
					if outcome == outcomeStaleToken {
						return err // a newer holder owns the job: stop this batch
					}
				default:
					return fmt.Errorf("pay settlement %s: %w", id, err)
				}
			}
			return nil
		})
		switch {
		case err == nil && finished:
			say("nothing left to pay; exiting")
			return nil
		case err == nil:
		case errors.Is(err, redlock.ErrStaleToken):
			say("fenced out by a newer holder; starting over with a new lock")
		case errors.Is(err, redlock.ErrLockLost):
			say("lost the lock (%v); starting over", firstLine(err))
		default:
			return err
		}
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
