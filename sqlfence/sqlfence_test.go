package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// countingExecer records the statements it is asked to run.
type countingExecer struct {
	calls int
	rows  int64
}

func (c *countingExecer) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	c.calls++
	return result{rows: c.rows}, nil
}

type result struct {
	rows int64
	err  error
}

func (r result) LastInsertId() (int64, error) { return 0, errors.New("not supported") }
func (r result) RowsAffected() (int64, error) { return r.rows, r.err }

func TestRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	db := &countingExecer{rows: 1}
	var nilDB *sql.DB
	table, err := NewTable("fences")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"nil db", func() error { _, err := Exec(ctx, nil, "r", 1, "UPDATE t SET x = 1"); return err }},
		{"typed nil db", func() error { _, err := Exec(ctx, nilDB, "r", 1, "UPDATE t SET x = 1"); return err }},
		{"empty resource", func() error { _, err := Exec(ctx, db, "", 1, "UPDATE t SET x = 1"); return err }},
		{"zero token", func() error { _, err := Exec(ctx, db, "r", 0, "UPDATE t SET x = 1"); return err }},
		{"token above BIGINT", func() error { _, err := Exec(ctx, db, "r", MaxToken+1, "UPDATE t SET x = 1"); return err }},
		{"empty query", func() error { _, err := Exec(ctx, db, "r", 1, ""); return err }},
		{"nil result", func() error { return Check(nil, "r", 1) }},
		{"bad table name", func() error { _, err := NewTable("fences; DROP TABLE x"); return err }},
		{"quoted table name", func() error { _, err := NewTable(`"Fences"`); return err }},
		{"create, nil db", func() error { return table.Create(ctx, nil) }},
		{"admit, nil tx", func() error { return table.Admit(ctx, nil, "r", 1) }},
		{"admit, zero token", func() error { return table.Admit(ctx, nil, "r", 0) }},
		{"in tx, nil db", func() error {
			return table.InTx(ctx, nil, "r", 1, func(context.Context, *sql.Tx) error { return nil })
		}},
		{"in tx, empty resource", func() error {
			return table.InTx(ctx, nilDB, "", 1, func(context.Context, *sql.Tx) error { return nil })
		}},
		{"highest, nil querier", func() error { _, err := table.Highest(ctx, nil, "r"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, redlock.ErrInvalidArgument) {
				t.Fatalf("error %v; want ErrInvalidArgument", err)
			}
			if !strings.HasPrefix(err.Error(), "sqlfence: ") {
				t.Fatalf("error %q does not start with \"sqlfence: \"", err)
			}
		})
	}
	if db.calls != 0 {
		t.Fatalf("rejected calls ran %d statements", db.calls)
	}
	if _, err := NewTable("ledger.fences"); err != nil {
		t.Fatalf("schema-qualified name: %v", err)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(result{rows: 2}, "r", 5); err != nil {
		t.Fatalf("two rows: %v", err)
	}
	err := Check(result{rows: 0}, "settlement S-1", 5)
	var se *redlock.StaleTokenError
	if !errors.Is(err, redlock.ErrStaleToken) || !errors.As(err, &se) || se.Resource != "settlement S-1" || se.Got != 5 || se.Highest != 0 {
		t.Fatalf("zero rows: %v; want a StaleTokenError for settlement S-1, got 5", err)
	}
	// Zero rows may be a missing row as well as a newer holder: the message says both.
	if msg := err.Error(); !strings.Contains(msg, "does not exist") || !strings.Contains(msg, "higher token") {
		t.Fatalf("zero rows: %q does not name both causes", msg)
	}
	boom := errors.New("boom")
	if err := Check(result{err: boom}, "r", 5); !errors.Is(err, boom) || errors.Is(err, redlock.ErrStaleToken) {
		t.Fatalf("driver error: %v; want it wrapped, not stale", err)
	}
	if p, err := Param(MaxToken); err != nil || p != int64(MaxToken) {
		t.Fatalf("Param(MaxToken) = %d, %v", p, err)
	}
}

// openDB opens a fresh database on s with pgx's database/sql driver.
func openDB(t *testing.T, s *pgtest.Server) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", s.NewDatabaseT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db Execer, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// wantStale fails unless err is a *redlock.StaleTokenError with the given fields.
func wantStale(t *testing.T, err error, resource string, got, highest redlock.Token) {
	t.Helper()
	var se *redlock.StaleTokenError
	if !errors.Is(err, redlock.ErrStaleToken) || !errors.As(err, &se) {
		t.Fatalf("error %v; want a *redlock.StaleTokenError", err)
	}
	if se.Resource != resource || se.Got != got || se.Highest != highest {
		t.Fatalf("stale error %+v; want resource %q, got %d, highest %d", *se, resource, got, highest)
	}
}

// TestPostgres runs the fenced writes on a real PostgreSQL server, one database per subtest.
func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t)

	// RowFence: the documented conditional UPDATE. Equal and higher tokens are admitted, a
	// lower one changes nothing and is reported stale; a missing row is stale too.
	t.Run("RowFence", func(t *testing.T) {
		db := openDB(t, srv)
		ctx := t.Context()
		mustExec(t, db, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0)`)
		mustExec(t, db, `INSERT INTO accounts (id, balance) VALUES ('acct-7', 0)`)
		const credit = `UPDATE accounts SET balance = balance + $2, fence_token = $1 WHERE id = $3 AND fence_token <= $1`
		for _, s := range []struct {
			tok     redlock.Token
			amount  int
			stale   bool
			balance int
		}{
			{5, 100, false, 100},
			{5, 50, false, 150}, // the same holder again
			{9, 1, false, 151},
			{7, 1000, true, 151}, // a paused holder comes back
			{redlock.Token(1) << 60, 2, false, 153},
		} {
			_, err := Exec(ctx, db, "account acct-7", s.tok, credit, s.amount, "acct-7")
			if s.stale {
				wantStale(t, err, "account acct-7", s.tok, 0)
			} else if err != nil {
				t.Fatalf("token %d: %v", s.tok, err)
			}
			var balance int
			if err := db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 'acct-7'`).Scan(&balance); err != nil {
				t.Fatal(err)
			}
			if balance != s.balance {
				t.Fatalf("after token %d: balance %d; want %d", s.tok, balance, s.balance)
			}
		}
		_, err := Exec(ctx, db, "account nobody", 99, credit, 1, "nobody")
		wantStale(t, err, "account nobody", 99, 0)
		// A driver error is passed through, not mistaken for a refusal.
		_, err = Exec(ctx, db, "account acct-7", 99, `UPDATE no_such_table SET x = $1`)
		if err == nil || errors.Is(err, redlock.ErrStaleToken) || !strings.HasPrefix(err.Error(), "sqlfence: ") {
			t.Fatalf("bad statement: %v; want the driver's error", err)
		}
	})

	// RowFenceConcurrent: goroutines credit one row with random tokens, each in a transaction
	// that also appends its token to a log after the fenced UPDATE. The fenced row is locked
	// until commit, so the log's order is the commit order of admitted writes, and the model
	// (the ≥ rule) says their tokens never decrease.
	t.Run("RowFenceConcurrent", func(t *testing.T) {
		db := openDB(t, srv)
		mustExec(t, db, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0)`)
		mustExec(t, db, `INSERT INTO accounts (id, balance) VALUES ('acct-7', 0)`)
		mustExec(t, db, `CREATE TABLE writes (seq bigserial PRIMARY KEY, token bigint NOT NULL)`)
		write := func(ctx context.Context, tok redlock.Token) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := Exec(ctx, tx, "account acct-7", tok,
				`UPDATE accounts SET balance = balance + 1, fence_token = $1 WHERE id = $2 AND fence_token <= $1`, "acct-7"); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO writes (token) VALUES ($1)`, int64(tok)); err != nil {
				return err
			}
			return tx.Commit()
		}
		admitted := checkConcurrent(t, db, write, `SELECT fence_token FROM accounts WHERE id = 'acct-7'`)
		var balance int
		if err := db.QueryRowContext(t.Context(), `SELECT balance FROM accounts`).Scan(&balance); err != nil || balance != admitted {
			t.Fatalf("balance %d, %v; want %d admitted credits", balance, err, admitted)
		}
	})

	// Table: Admit's first insert, equal and higher tokens, a refusal that names the highest
	// token, and InTx's guarantees: fn does not run when refused, and a failing fn rolls the
	// token back with its writes (token and data live in one transaction).
	t.Run("Table", func(t *testing.T) {
		db := openDB(t, srv)
		ctx := t.Context()
		table, err := NewTable("fences")
		if err != nil {
			t.Fatal(err)
		}
		if err := table.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := table.Create(ctx, db); err != nil {
			t.Fatalf("Create twice: %v", err)
		}
		mustExec(t, db, `CREATE TABLE payouts (settlement text PRIMARY KEY, token bigint NOT NULL)`)
		pay := func(tok redlock.Token, settlement string) error {
			return table.InTx(ctx, db, "ledger", tok, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO payouts VALUES ($1, $2)`, settlement, int64(tok))
				return err
			})
		}
		if h, err := table.Highest(ctx, db, "ledger"); err != nil || h != 0 {
			t.Fatalf("Highest before any write = %d, %v; want 0", h, err)
		}
		for _, s := range []struct {
			tok        redlock.Token
			settlement string
		}{{4, "S-1"}, {4, "S-2"}, {6, "S-3"}} {
			if err := pay(s.tok, s.settlement); err != nil {
				t.Fatalf("pay %s with %d: %v", s.settlement, s.tok, err)
			}
		}
		ran := false
		err = table.InTx(ctx, db, "ledger", 5, func(context.Context, *sql.Tx) error { ran = true; return nil })
		wantStale(t, err, "ledger", 5, 6)
		if ran {
			t.Fatal("InTx ran fn after a refusal")
		}
		boom := errors.New("payment provider down")
		err = table.InTx(ctx, db, "ledger", 8, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO payouts VALUES ('S-4', 8)`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx with a failing fn: %v; want fn's error", err)
		}
		if h, err := table.Highest(ctx, db, "ledger"); err != nil || h != 6 {
			t.Fatalf("Highest after a rolled-back admission = %d, %v; want 6", h, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM payouts`).Scan(&n); err != nil || n != 3 {
			t.Fatalf("%d payouts, %v; want 3 (S-4 rolled back)", n, err)
		}
		// A panic in fn rolls back and reaches the caller.
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("panic in fn did not reach the caller")
				}
			}()
			_ = table.InTx(ctx, db, "ledger", 9, func(context.Context, *sql.Tx) error { panic("boom") })
		}()
		if h, err := table.Highest(ctx, db, "ledger"); err != nil || h != 6 {
			t.Fatalf("Highest after a panic = %d, %v; want 6", h, err)
		}
		// Resources are independent.
		if err := pay(1, "other:S-1"); err == nil {
			t.Fatal("token 1 admitted for ledger after 6")
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := table.Admit(ctx, tx, "other-ledger", 1); err != nil {
			t.Fatalf("token 1 for another resource: %v", err)
		}
		if h, err := table.Highest(ctx, tx, "other-ledger"); err != nil || h != 1 {
			t.Fatalf("Highest inside the transaction = %d, %v; want 1", h, err)
		}
	})

	// WaiterRefusedAfterCommit pins the interleaving that a read-then-write fence gets wrong,
	// for both shapes: B admits token 20 and keeps its transaction open; A, with token 15,
	// arrives and blocks on B's row lock; B commits; A must then be refused, because
	// PostgreSQL re-checks the WHERE condition on the row B committed. An implementation that
	// read the token first would have read the old one and now overwrite 20 with 15.
	t.Run("WaiterRefusedAfterCommit", func(t *testing.T) {
		db := openDB(t, srv)
		ctx := t.Context()
		table, err := NewTable("fences")
		if err != nil {
			t.Fatal(err)
		}
		if err := table.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `CREATE TABLE accounts (id text PRIMARY KEY, fence_token bigint NOT NULL DEFAULT 0)`)
		mustExec(t, db, `INSERT INTO accounts (id) VALUES ('acct-7')`)
		if err := table.InTx(ctx, db, "ledger", 10, func(context.Context, *sql.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		const claim = `UPDATE accounts SET fence_token = $1 WHERE id = $2 AND fence_token <= $1`
		for _, shape := range []struct {
			name  string
			admit func(tx *sql.Tx, tok redlock.Token) error
			stale func(t *testing.T, err error)
		}{
			{"Table.Admit", func(tx *sql.Tx, tok redlock.Token) error { return table.Admit(ctx, tx, "ledger", tok) },
				func(t *testing.T, err error) { wantStale(t, err, "ledger", 15, 20) }},
			{"Exec", func(tx *sql.Tx, tok redlock.Token) error {
				_, err := Exec(ctx, tx, "acct-7", tok, claim, "acct-7")
				return err
			},
				func(t *testing.T, err error) { wantStale(t, err, "acct-7", 15, 0) }},
		} {
			t.Run(shape.name, func(t *testing.T) {
				txB, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer txB.Rollback()
				if err := shape.admit(txB, 20); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					txA, err := db.BeginTx(ctx, nil)
					if err != nil {
						done <- err
						return
					}
					defer txA.Rollback()
					err = shape.admit(txA, 15)
					if err == nil {
						err = txA.Commit()
					}
					done <- err
				}()
				waitForLockWaiter(t, db)
				if err := txB.Commit(); err != nil {
					t.Fatal(err)
				}
				shape.stale(t, <-done)
			})
		}
	})

	// TableConcurrent: the model check of RowFenceConcurrent, through Table.InTx.
	t.Run("TableConcurrent", func(t *testing.T) {
		db := openDB(t, srv)
		table, err := NewTable("fences")
		if err != nil {
			t.Fatal(err)
		}
		if err := table.Create(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `CREATE TABLE writes (seq bigserial PRIMARY KEY, token bigint NOT NULL)`)
		write := func(ctx context.Context, tok redlock.Token) error {
			return table.InTx(ctx, db, "ledger", tok, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO writes (token) VALUES ($1)`, int64(tok))
				return err
			})
		}
		checkConcurrent(t, db, write, `SELECT token FROM fences WHERE resource = 'ledger'`)
	})
}

// waitForLockWaiter polls until a session of db's database waits for a lock.
func waitForLockWaiter(t *testing.T, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session started waiting for the row lock")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// checkConcurrent runs fenced writes with random tokens from several goroutines, then checks
// the log table "writes" against the ≥ rule: in commit order the admitted tokens never
// decrease, there is one log row per admitted write, every refused token is below the highest
// admitted one, and the fence (read by fenceQuery) holds the highest admitted token. It returns
// the number of admitted writes.
func checkConcurrent(t *testing.T, db *sql.DB, write func(context.Context, redlock.Token) error, fenceQuery string) int {
	t.Helper()
	const workers, writes, tokenRange = 8, 25, 30
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type outcome struct {
		tok      redlock.Token
		admitted bool
	}
	outcomes := make(chan outcome, workers*writes)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range writes {
				tok := redlock.Token(1 + rng.IntN(tokenRange))
				err := write(ctx, tok)
				switch {
				case err == nil:
					outcomes <- outcome{tok, true}
				case errors.Is(err, redlock.ErrStaleToken):
					outcomes <- outcome{tok, false}
				default:
					errs <- fmt.Errorf("token %d: %w", tok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(outcomes)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	admitted, refused := 0, []redlock.Token{}
	var maxAdmitted redlock.Token
	for o := range outcomes {
		if o.admitted {
			admitted++
			maxAdmitted = max(maxAdmitted, o.tok)
		} else {
			refused = append(refused, o.tok)
		}
	}
	if admitted == 0 || len(refused) == 0 {
		t.Fatalf("%d admitted, %d refused; want some of each", admitted, len(refused))
	}
	for _, tok := range refused {
		if tok >= maxAdmitted {
			t.Fatalf("token %d refused although the highest admitted is %d", tok, maxAdmitted)
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT token FROM writes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var logged int
	var prev int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < prev {
			t.Fatalf("write %d committed token %d after %d", logged+1, tok, prev)
		}
		prev = tok
		logged++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if logged != admitted {
		t.Fatalf("%d writes logged, %d admitted", logged, admitted)
	}
	var fence int64
	if err := db.QueryRowContext(ctx, fenceQuery).Scan(&fence); err != nil {
		t.Fatal(err)
	}
	if fence != int64(maxAdmitted) {
		t.Fatalf("fence holds %d; want the highest admitted token %d", fence, maxAdmitted)
	}
	return admitted
}

// FuzzParam: Param accepts exactly the tokens 1 to MaxToken, as the same int64, and refuses
// the others with ErrInvalidArgument; it never panics.
func FuzzParam(f *testing.F) {
	for _, s := range []uint64{0, 1, uint64(MaxToken), uint64(MaxToken) + 1, math.MaxUint64, 1796125193379247} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n uint64) {
		p, err := Param(redlock.Token(n))
		switch {
		case n >= 1 && n <= uint64(MaxToken):
			if err != nil || uint64(p) != n {
				t.Fatalf("Param(%d) = %d, %v", n, p, err)
			}
		case !errors.Is(err, redlock.ErrInvalidArgument):
			t.Fatalf("Param(%d) = %d, %v; want ErrInvalidArgument", n, p, err)
		}
	})
}
