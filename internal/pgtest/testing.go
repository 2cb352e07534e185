package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// RequireEnv is the environment variable that turns missing PostgreSQL programs from a skipped
// test into a failed one. .ci/run sets it to 1.
const RequireEnv = "REDLOCK_REQUIRE_POSTGRES"

// startTimeout bounds initdb and the start-up of the server in Start.
const startTimeout = 60 * time.Second

// Require returns the directory of the PostgreSQL server programs (see Find). When they are
// missing the test is skipped with a message that says how to install them, or fails if
// REDLOCK_REQUIRE_POSTGRES=1.
func Require(tb testing.TB) string {
	tb.Helper()
	dir, err := Find()
	if err == nil {
		return dir
	}
	testutil.SkipOrFail(tb, RequireEnv, err.Error(), "a real PostgreSQL server", "install PostgreSQL with apt-get install -y postgresql")
	return ""
}

// Start starts a throwaway PostgreSQL server for the test and stops it, removing its files, in
// tb.Cleanup. It skips or fails the test as Require does when the programs are missing, and
// fails the test if the server cannot start within a minute (it usually takes about two
// seconds, most of it initdb).
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Require(tb)
	ctx, cancel := context.WithTimeout(tb.Context(), startTimeout)
	defer cancel()
	s, err := Launch(ctx, Config{BinDir: bin})
	if err != nil {
		tb.Fatalf("start PostgreSQL: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return s
}

// NewDatabaseT creates a fresh database named after the test and returns its DSN, failing the
// test if it cannot. The database goes away with the server.
func (s *Server) NewDatabaseT(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	_, dsn, err := s.NewDatabase(ctx, tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	return dsn
}
