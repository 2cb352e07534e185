package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/sqlfence"
)

// schema is the ledger. Three things in it carry the defences:
//   - settlements.fence_token, the highest fencing token admitted for the row: the first line
//     of defence. A payment first raises it with a conditional UPDATE, or is refused.
//   - payouts.idempotency_key, UNIQUE, one per settlement ("payout:" + id): the second line.
//     Even a payment that got past the lock and the fence cannot insert a second payout.
//   - payout_attempts records every attempt and which layer stopped it, so that a person (or
//     the test) can see what happened.
const schema = `
CREATE TABLE IF NOT EXISTS settlements (
	id           text PRIMARY KEY,
	amount_cents bigint NOT NULL CHECK (amount_cents > 0),
	status       text   NOT NULL DEFAULT 'due' CHECK (status IN ('due', 'paid')),
	fence_token  bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS payouts (
	id              bigserial PRIMARY KEY,
	idempotency_key text   NOT NULL UNIQUE,
	settlement_id   text   NOT NULL REFERENCES settlements (id),
	amount_cents    bigint NOT NULL,
	worker          text   NOT NULL,
	token           bigint NOT NULL,
	paid_at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS payout_attempts (
	id            bigserial PRIMARY KEY,
	worker        text   NOT NULL,
	token         bigint NOT NULL,
	settlement_id text   NOT NULL,
	outcome       text   NOT NULL,
	detail        text   NOT NULL DEFAULT '',
	at            timestamptz NOT NULL DEFAULT clock_timestamp()
);`

// The outcomes of one payment attempt, as recorded in payout_attempts.outcome.
const (
	outcomePaid        = "paid"          // a payout was made
	outcomeAlreadyPaid = "already_paid"  // the fenced claim succeeded, then the row said paid
	outcomeStaleToken  = "stale_token"   // refused by the fencing token check (first line)
	outcomeDuplicate   = "duplicate_key" // refused by the unique idempotency key (second line)
)

// layer names the defence behind an outcome, for reports.
func layer(outcome string) string {
	switch outcome {
	case outcomeStaleToken:
		return "fencing token (settlements.fence_token)"
	case outcomeDuplicate:
		return "idempotency key (payouts.idempotency_key UNIQUE)"
	case outcomeAlreadyPaid:
		return "status check made under the fence"
	}
	return "-"
}

// setupLedger creates the tables and n due settlements S-0001 … S-000n with fixed amounts. It
// can be run again: existing rows are kept.
func setupLedger(ctx context.Context, db *sql.DB, n int) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	for i := 1; i <= n; i++ {
		if _, err := db.ExecContext(ctx,
			`INSERT INTO settlements (id, amount_cents) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
			settlementID(i), amountOf(i)); err != nil {
			return fmt.Errorf("seed settlement %d: %w", i, err)
		}
	}
	return nil
}

func settlementID(i int) string { return fmt.Sprintf("S-%04d", i) }
func amountOf(i int) int64      { return int64(10_000 + 137*i) }

// dueSettlements lists up to limit settlements that are still due, in id order. It is a plain
// read: a list of candidates. Whether each one is paid is decided again under the fence.
func dueSettlements(ctx context.Context, db *sql.DB, limit int) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT id FROM settlements WHERE status = 'due' ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// payer pays settlements into the ledger.
type payer struct {
	db     *sql.DB
	worker string
	// fenced is the first line of defence; --unsafe-no-fence turns it off to show the second.
	fenced bool
	// stableKeys makes the idempotency key a function of the settlement; with
	// --unsafe-random-idempotency-key each attempt gets a fresh random key, a common mistake
	// that makes the unique constraint useless.
	stableKeys bool
}

// pay makes one payment attempt for settlement id under token tok, in one transaction:
//
//  1. Claim the row with the fenced UPDATE: admitted iff tok ≥ settlements.fence_token. This
//     locks the row until commit. Refused → stale_token, nothing written.
//  2. Decide under that lock: read status and amount again. Paid already → already_paid.
//  3. Insert the payout with its idempotency key; a unique violation → duplicate_key.
//  4. Mark the settlement paid, record the attempt, commit.
//
// It returns the outcome and, for refusals, the error that caused it (a *redlock.StaleTokenError
// or the unique violation); other errors come with an empty outcome. Refused attempts are
// recorded in their own transaction, after the rollback.
func (p *payer) pay(ctx context.Context, id string, tok redlock.Token) (string, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()

	if p.fenced {
		_, err := sqlfence.Exec(ctx, tx, "settlement "+id, tok,
			`UPDATE settlements SET fence_token = $1 WHERE id = $2 AND fence_token <= $1`, id)
		var stale *redlock.StaleTokenError
		if errors.As(err, &stale) {
			// For the message only (the decision is made): the token that beat ours.
			var highest int64
			if tx.QueryRowContext(ctx, `SELECT fence_token FROM settlements WHERE id = $1`, id).Scan(&highest) == nil {
				stale.Highest = redlock.Token(highest)
			}
			_ = tx.Rollback()
			return outcomeStaleToken, p.record(ctx, p.db, id, tok, outcomeStaleToken, stale)
		}
		if err != nil {
			return "", err
		}
	}
	var status string
	var amount int64
	if err := tx.QueryRowContext(ctx, `SELECT status, amount_cents FROM settlements WHERE id = $1`, id).Scan(&status, &amount); err != nil {
		return "", err
	}
	if p.fenced && status == "paid" {
		if err := p.record(ctx, tx, id, tok, outcomeAlreadyPaid, nil); err != nil {
			return "", err
		}
		return outcomeAlreadyPaid, tx.Commit()
	}
	// Without the fence, the worker trusts the list it read before: no status check here,
	// which is what a job that relies on its lock alone does.

	key := "payout:" + id
	if !p.stableKeys {
		key += ":" + randomHex()
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO payouts (idempotency_key, settlement_id, amount_cents, worker, token)
		VALUES ($1, $2, $3, $4, $5)`, key, id, amount, p.worker, int64(tok))
	if isUniqueViolation(err) {
		_ = tx.Rollback()
		return outcomeDuplicate, p.record(ctx, p.db, id, tok, outcomeDuplicate, err)
	}
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE settlements SET status = 'paid' WHERE id = $1`, id); err != nil {
		return "", err
	}
	if err := p.record(ctx, tx, id, tok, outcomePaid, nil); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	return outcomePaid, nil
}

// record writes one row of payout_attempts. For a refusal it returns cause, so that the
// caller gets the reason; a failure to record is joined to it.
func (p *payer) record(ctx context.Context, db sqlfence.Execer, id string, tok redlock.Token, outcome string, cause error) error {
	detail := ""
	if cause != nil {
		detail = cause.Error()
	}
	_, err := db.ExecContext(ctx, `INSERT INTO payout_attempts (worker, token, settlement_id, outcome, detail)
		VALUES ($1, $2, $3, $4, $5)`, p.worker, int64(tok), id, outcome, detail)
	if err != nil {
		err = fmt.Errorf("record attempt: %w", err)
	}
	return errors.Join(cause, err)
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func randomHex() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// report prints the ledger: payouts per settlement (flagging any paid more or less than once)
// and every attempt that a defence stopped, with the layer that stopped it. It returns the
// number of settlements not paid exactly once.
func report(ctx context.Context, db *sql.DB, w io.Writer) (int, error) {
	rows, err := db.QueryContext(ctx, `
		SELECT s.id, s.amount_cents, s.status, count(p.id), COALESCE(sum(p.amount_cents), 0),
		       COALESCE(string_agg(p.worker || '@' || p.token, ' ' ORDER BY p.id), '')
		FROM settlements s LEFT JOIN payouts p ON p.settlement_id = s.id
		GROUP BY s.id ORDER BY s.id`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "settlement\tamount\tstatus\tpayouts\tpaid by (worker@token)\t")
	wrong := 0
	for rows.Next() {
		var id, status, by string
		var amount, sum int64
		var n int
		if err := rows.Scan(&id, &amount, &status, &n, &sum, &by); err != nil {
			return 0, err
		}
		flag := ""
		if n != 1 {
			wrong++
			flag = fmt.Sprintf("  <-- paid %d times (%d cents)", n, sum)
		}
		fmt.Fprintf(tw, "%s\t%d.%02d\t%s\t%d\t%s%s\t\n", id, amount/100, amount%100, status, n, by, flag)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := tw.Flush(); err != nil {
		return 0, err
	}

	arows, err := db.QueryContext(ctx, `SELECT worker, token, settlement_id, outcome FROM payout_attempts
		WHERE outcome <> $1 ORDER BY id`, outcomePaid)
	if err != nil {
		return 0, err
	}
	defer arows.Close()
	fmt.Fprintln(w, "\nattempts that did not pay, and the layer that stopped them:")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "worker\ttoken\tsettlement\toutcome\tstopped by\t")
	none := true
	for arows.Next() {
		var worker, id, outcome string
		var tok int64
		if err := arows.Scan(&worker, &tok, &id, &outcome); err != nil {
			return 0, err
		}
		none = false
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", worker, tok, id, outcome, layer(outcome))
	}
	if err := arows.Err(); err != nil {
		return 0, err
	}
	if none {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t")
	}
	return wrong, tw.Flush()
}
