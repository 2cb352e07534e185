// Package sqlfence makes fenced writes to PostgreSQL with database/sql: writes that a store
// admits only when they carry a fencing token ([redlock.Token]) at least as high as the highest
// one it has admitted for the same resource, so that a holder whose lock expired while it was
// paused cannot overwrite the work of a later holder. See docs/fencing.md for the reasoning.
//
// There are two shapes, both with the check and the write in one statement or one transaction,
// never a read followed by a separate write.
//
// A fence column on the row you write: [Exec] runs one conditional statement, with the token as
// $1, and maps "no row changed" to a [*redlock.StaleTokenError]:
//
//	UPDATE settlements SET status = 'paid', fence_token = $1 WHERE id = $2 AND fence_token <= $1
//
// A fence table with one row per resource ([Table]), when a transaction writes many rows or
// tables under one lock: [Table.Admit] raises the resource's token inside your transaction, or
// refuses, and the row lock it takes keeps later writers out until you commit.
//
// The package uses database/sql only; any PostgreSQL driver works (the tests use pgx's stdlib
// driver). Statements are PostgreSQL's ($n placeholders, INSERT … ON CONFLICT). Errors of its
// own start with "sqlfence: "; bad arguments match [redlock.ErrInvalidArgument] and send
// nothing; refusals match [redlock.ErrStaleToken].
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"

	"github.com/quorumlock/redlock"
)

// MaxToken is the largest token a PostgreSQL BIGINT column holds. Tokens minted by redlock are
// about 1.8e15 today, far below it; larger tokens are rejected as invalid arguments.
const MaxToken = redlock.Token(math.MaxInt64)

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs a query that returns at most one row: *sql.DB, *sql.Tx and *sql.Conn satisfy it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Exec runs query, a fenced statement that changes at least one row when the token is admitted
// and none when it is not, with tok as $1 (a BIGINT) and args as $2, $3, …. The usual form is
//
//	UPDATE t SET …, fence_token = $1 WHERE id = $2 AND fence_token <= $1
//
// so that the comparison (≥: the same holder may write many times) and the write are one
// atomic statement. Exec returns the statement's result, or:
//   - a *redlock.StaleTokenError (errors.Is(err, redlock.ErrStaleToken)) naming resource, with
//     Highest 0 (the statement cannot tell it), when no row changed. That also happens when the
//     row does not exist: create rows with fence_token 0 before fencing them, or use [Table];
//   - an error matching redlock.ErrInvalidArgument, with nothing sent, for a nil db, an empty
//     resource or query, a zero token or one above [MaxToken];
//   - the driver's error, prefixed "sqlfence: ", which wraps ctx.Err() when ctx ended first.
//
// resource only labels the error, e.g. "settlement S-1". Run Exec inside the transaction that
// makes the rest of the change (db a *sql.Tx) when there is more than one statement, so that
// the token and the data commit together. Exec is as safe for concurrent use as db is.
func Exec(ctx context.Context, db Execer, resource string, tok redlock.Token, query string, args ...any) (sql.Result, error) {
	p, err := checkArgs(resource, tok)
	if err != nil {
		return nil, err
	}
	if isNil(db) {
		return nil, invalidf("db is nil")
	}
	if query == "" {
		return nil, invalidf("query is empty")
	}
	res, err := db.ExecContext(ctx, query, append([]any{p}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlfence: fenced write to %s: %w", resource, err)
	}
	if err := Check(res, resource, tok); err != nil {
		return nil, err
	}
	return res, nil
}

// Check maps the result of a fenced statement that you ran yourself: nil when it changed at
// least one row, a *redlock.StaleTokenError (Highest 0) naming resource and tok when it changed
// none, and the driver's error, prefixed "sqlfence: ", when the driver cannot count rows. A nil
// res is an invalid argument. Check sends nothing.
func Check(res sql.Result, resource string, tok redlock.Token) error {
	if res == nil {
		return invalidf("result is nil")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: fenced write to %s: rows affected: %w", resource, err)
	}
	if n == 0 {
		return &redlock.StaleTokenError{Resource: resource, Got: tok}
	}
	return nil
}

// Param returns tok as the int64 to bind to a BIGINT parameter, or an error matching
// redlock.ErrInvalidArgument for 0 or a token above [MaxToken].
func Param(tok redlock.Token) (int64, error) {
	if tok == 0 {
		return 0, invalidf("token 0: tokens start at 1, and a Client made WithoutFencing mints none")
	}
	if tok > MaxToken {
		return 0, invalidf("token %d does not fit a BIGINT", tok)
	}
	return int64(tok), nil
}

func checkArgs(resource string, tok redlock.Token) (int64, error) {
	if resource == "" {
		return 0, invalidf("resource is empty")
	}
	return Param(tok)
}

// identifier is a plain SQL name, optionally qualified by a schema.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// Table is a fence table: one row per resource, holding the highest token admitted for it,
//
//	CREATE TABLE name (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))
//
// Use it when one lock protects writes to many rows or tables. [Table.Admit] raises the
// resource's token inside your transaction, or refuses; the row lock it takes is held until
// your transaction ends, so admitted transactions of one resource run one at a time and a
// lower token that was waiting is refused once the higher one commits. A Table holds no
// connection and is safe for concurrent use.
type Table struct {
	name string
}

// NewTable returns the fence table called name: a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at
// most 63 bytes), optionally schema-qualified, used without quotes (so PostgreSQL folds it to
// lower case). It sends nothing; create the table with [Table.Create] or your migrations. A bad
// name returns an error matching redlock.ErrInvalidArgument.
func NewTable(name string) (*Table, error) {
	if !identifier.MatchString(name) {
		return nil, invalidf("fence table name %q is not a plain SQL identifier", name)
	}
	return &Table{name: name}, nil
}

// Name returns the table's name as given to NewTable.
func (t *Table) Name() string { return t.name }

// Create creates the table if it does not exist (CREATE TABLE IF NOT EXISTS). Errors: the
// driver's, prefixed "sqlfence: " (wrapping ctx.Err() when ctx ended); an error matching
// redlock.ErrInvalidArgument for a nil db, with nothing sent.
func (t *Table) Create(ctx context.Context, db Execer) error {
	if isNil(db) {
		return invalidf("db is nil")
	}
	q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	resource text PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0)
)`, t.name)
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("sqlfence: create fence table %s: %w", t.name, err)
	}
	return nil
}

// Admit admits tok for resource inside tx: when tok is at least the highest token admitted
// before for resource (or there is none yet), it records tok with one INSERT … ON CONFLICT DO
// UPDATE … WHERE statement and returns nil; the new token commits or rolls back with the rest
// of tx. Call it in the transaction that makes the writes it protects, before them, and commit
// only if it returned nil; it locks the resource's row until tx ends.
//
// Errors: a *redlock.StaleTokenError (errors.Is(err, redlock.ErrStaleToken)) with Highest set
// when a higher token was admitted before: roll tx back and stop working under the lock; an
// error matching redlock.ErrInvalidArgument, with nothing sent, for a nil tx, an empty resource,
// a zero token or one above [MaxToken]; the driver's error, prefixed "sqlfence: " (wrapping
// ctx.Err() when ctx ended). Under REPEATABLE READ or SERIALIZABLE isolation a concurrent
// admission can also fail tx with a serialization error (SQLSTATE 40001), to be retried as a
// whole; READ COMMITTED, PostgreSQL's default, needs no retry.
func (t *Table) Admit(ctx context.Context, tx *sql.Tx, resource string, tok redlock.Token) error {
	p, err := checkArgs(resource, tok)
	if err != nil {
		return err
	}
	if tx == nil {
		return invalidf("tx is nil")
	}
	q := fmt.Sprintf(`INSERT INTO %[1]s AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token`, t.name)
	res, err := tx.ExecContext(ctx, q, resource, p)
	if err != nil {
		return fmt.Errorf("sqlfence: admit token %d for %q: %w", tok, resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: admit token %d for %q: rows affected: %w", tok, resource, err)
	}
	if n > 0 {
		return nil
	}
	// Refused. The row is locked by the statement above, so this reads the token that beat us.
	highest, err := t.Highest(ctx, tx, resource)
	if err != nil {
		return errors.Join(&redlock.StaleTokenError{Resource: resource, Got: tok}, err)
	}
	return &redlock.StaleTokenError{Resource: resource, Got: tok, Highest: highest}
}

// InTx runs fn in a new transaction of db that first admits tok for resource ([Table.Admit]),
// and commits if fn returns nil. It returns the refusal (a *redlock.StaleTokenError) without
// calling fn; fn's error, after rolling back, when fn fails; the commit's error, prefixed
// "sqlfence: ". A panic in fn rolls back and continues. fn must do all its writes through tx
// and with its ctx. Errors and context behaviour are otherwise those of Admit; InTx is safe
// for concurrent use.
func (t *Table) InTx(ctx context.Context, db *sql.DB, resource string, tok redlock.Token, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	if _, err := checkArgs(resource, tok); err != nil {
		return err
	}
	if db == nil || fn == nil {
		return invalidf("db or fn is nil")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := t.Admit(ctx, tx, resource, tok); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// Highest returns the highest token admitted for resource, 0 when none was. Inside a
// transaction that has admitted a token, it reads that token. Errors: the driver's, prefixed
// "sqlfence: "; an error matching redlock.ErrInvalidArgument for a nil q or an empty resource,
// with nothing sent.
func (t *Table) Highest(ctx context.Context, q Querier, resource string) (redlock.Token, error) {
	if isNil(q) {
		return 0, invalidf("querier is nil")
	}
	if resource == "" {
		return 0, invalidf("resource is empty")
	}
	var tok int64
	err := q.QueryRowContext(ctx, fmt.Sprintf(`SELECT token FROM %s WHERE resource = $1`, t.name), resource).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlfence: highest token of %q: %w", resource, err)
	}
	return redlock.Token(tok), nil
}

// isNil reports whether v is nil, including a typed nil pointer such as (*sql.DB)(nil).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// invalidError is a bad argument; it matches redlock.ErrInvalidArgument.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "sqlfence: invalid argument: " + e.msg }

// Unwrap returns redlock.ErrInvalidArgument, so that errors.Is matches it.
func (e *invalidError) Unwrap() error { return redlock.ErrInvalidArgument }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
