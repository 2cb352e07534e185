package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestServerLifecycle starts a server, uses it through pgx, creates a database, then closes it
// and checks that the process, the port and the files are gone.
func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var who string
	var port int
	if err := db.QueryRowContext(ctx, "SELECT current_user, current_setting('port')::int").Scan(&who, &port); err != nil {
		t.Fatal(err)
	}
	if who != Superuser || port != s.Port {
		t.Fatalf("connected as %q to port %d; want %q on %d", who, port, Superuser, s.Port)
	}

	dsn := s.NewDatabaseT(t)
	db2, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var name string
	if err := db2.QueryRowContext(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "testserverlifecycle_") {
		t.Fatalf("database %q; want one named after the test", name)
	}

	pid := s.PID()
	if os.Geteuid() == 0 {
		// PostgreSQL refuses root; the helper must have switched users.
		if uid := procUID(t, pid); uid == 0 {
			t.Fatalf("postmaster %d runs as root", pid)
		}
	}
	db.Close()
	db2.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("postmaster %d still exists after Close (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s left behind: %v", s.dir, err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), time.Second); err == nil {
		c.Close()
		t.Fatalf("port %d still accepts connections", s.Port)
	}
	if s.PID() != 0 {
		t.Fatalf("PID after Close = %d; want 0", s.PID())
	}
}

// procUID reads the real uid of a process from /proc.
func procUID(tb testing.TB, pid int) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				tb.Fatal(err)
			}
			return uid
		}
	}
	tb.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

// TestSweepRemovesDeadServersOnly: a directory left by a server whose process is gone is
// removed; one whose process lives, and one still without a pid file, are kept.
func TestSweepRemovesDeadServersOnly(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, pid int) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if pid > 0 {
			content := fmt.Sprintf("%d\n%s\n", pid, dir)
			if err := os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	gone := mk(dirPrefix+"dead", dead.Process.Pid)
	alive := mk(dirPrefix+"alive", os.Getpid())
	starting := mk(dirPrefix+"starting", 0)
	other := mk("someone-else", dead.Process.Pid)
	sweep(tmp)
	for dir, want := range map[string]bool{gone: false, alive: true, starting: true, other: true} {
		_, err := os.Stat(dir)
		if exists := err == nil; exists != want {
			t.Errorf("%s exists %v after sweep; want %v", filepath.Base(dir), exists, want)
		}
	}
}

// TestLaunchCancelled: a start-up cut short by its context returns the context's error.
func TestLaunchCancelled(t *testing.T) {
	bin := Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := Launch(ctx, Config{BinDir: bin})
	if err == nil {
		s.Close()
		t.Fatal("Launch with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Launch with a cancelled context: %v; want context.Canceled", err)
	}
}

// TestFindHonoursBinDirEnv: a $REDLOCK_PG_BIN without the programs is an error, not a silent
// fallback to another installation.
func TestFindHonoursBinDirEnv(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	if dir, err := Find(); err == nil {
		t.Fatalf("Find = %q with an empty $%s; want an error", dir, BinDirEnv)
	}
}

func TestDBName(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		n      int
		want   string
	}{
		{"TestSettlement/fenced", 3, "testsettlement_fenced_3"},
		{"", 1, "db__1"},
		{"9lives", 2, "db_9lives_2"},
		{strings.Repeat("x", 80), 12, strings.Repeat("x", 60) + "_12"},
	} {
		got := dbName(tc.prefix, tc.n)
		if got != tc.want || !validName(got) {
			t.Errorf("dbName(%q, %d) = %q (valid %v); want %q", tc.prefix, tc.n, got, validName(got), tc.want)
		}
	}
	for _, bad := range []string{"", "A", "x-y", "1x", strings.Repeat("x", 64), "x;drop"} {
		if validName(bad) {
			t.Errorf("validName(%q) = true", bad)
		}
	}
}

// TestRestartCrashKeepsCommits: a durable server crashed with Restart(crash) comes back on
// the same port with every committed row, and the sessions it had are gone.
func TestRestartCrashKeepsCommits(t *testing.T) {
	bin := Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := Launch(ctx, Config{BinDir: bin, Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // a session of its own, to see it end
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (41), (42)`); err != nil {
		t.Fatal(err)
	}
	port, pid := s.Port, s.PID()
	if err := s.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if s.Port != port || s.PID() == pid || s.PID() == 0 {
		t.Errorf("after the restart: port %d (was %d), pid %d (was %d)", s.Port, port, s.PID(), pid)
	}
	if err := conn.PingContext(ctx); err == nil {
		t.Error("a session of the crashed server still answers")
	}
	var n, sum int
	if err := db.QueryRowContext(ctx, `SELECT count(*), sum(v) FROM t`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 2 || sum != 83 {
		t.Errorf("after the crash: %d rows summing to %d, want the 2 committed ones (83)", n, sum)
	}
}
