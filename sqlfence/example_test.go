package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/sqlfence"
)

// A fenced UPDATE under a lock: the row changes only when its fence_token is not above the
// lock's token, in the same statement. It needs a PostgreSQL database, so it is compiled,
// not run; sqlfence_test.go runs the same calls on a server it starts.
func ExampleExec() {
	var db *sql.DB // sql.Open("pgx", ...) in your program
	var c *redlock.Client
	ctx := context.Background()
	err := c.Do(ctx, "settlement:S-1", 30*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		_, err := sqlfence.Exec(ctx, db, "settlement S-1", l.Token(),
			`UPDATE settlements SET state = 'paid', fence_token = $1 WHERE id = 'S-1' AND fence_token <= $1`)
		if errors.Is(err, redlock.ErrStaleToken) {
			return nil // a newer holder has written: this one stops
		}
		return err
	})
	_ = err
}
