// Package pgtest starts throwaway PostgreSQL servers for tests and demos.
//
// Each server is a fresh cluster made by initdb in a new temporary directory, run by the
// postgres binary as a child process on a free 127.0.0.1 port, with its Unix socket in that
// directory, trust authentication, and durability switched off (fsync=off) for speed. When the
// process runs as root, initdb and postgres run as an unprivileged user (PostgreSQL refuses to
// run as root): the system account "postgres" when it exists, else "nobody", or the user named
// by $REDLOCK_PG_USER. Close stops the server by its PID (SIGINT, a fast shutdown) and removes
// the directory. A test binary killed outright cannot do that; its servers die with it (a
// parent-death signal) and the next Launch removes their directories. Nothing is shared with a
// PostgreSQL already running on the machine.
//
// The core API (Find, Launch, Server) does not need package testing; testing.go wraps it for
// tests (Require, Start, Server.NewDatabaseT).
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// Environment variables that change where binaries come from and who runs them.
const (
	// BinDirEnv names a directory holding initdb, postgres and createdb, tried first.
	BinDirEnv = "REDLOCK_PG_BIN"
	// UserEnv names the OS user that runs the server when the caller is root.
	UserEnv = "REDLOCK_PG_USER"
)

// Superuser is the name of the database superuser of every server (trust authentication).
const Superuser = "postgres"

const (
	startAttempts = 5                     // fresh ports tried by Launch
	pollInterval  = 20 * time.Millisecond // readiness poll
	stopGrace     = 10 * time.Second      // SIGINT to SIGQUIT, then SIGKILL
	logTailBytes  = 2048                  // log shown when start-up fails
	dbNameMax     = 63                    // PostgreSQL's identifier length
	readyTimeout  = 30 * time.Second      // start-up bound when ctx has none
)

// binaries are the programs a server needs, all from one directory.
var binaries = []string{"initdb", "postgres", "createdb"}

// Find returns the directory that holds initdb, postgres and createdb: $REDLOCK_PG_BIN when
// set, else the directory of initdb found on PATH (following symbolic links, since Debian links
// only some programs into /usr/bin), else the newest /usr/lib/postgresql/*/bin (Debian's
// postgresql package, whose server programs are not on PATH).
func Find() (string, error) {
	var tried []string
	try := func(dir string) bool {
		tried = append(tried, dir)
		for _, b := range binaries {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if try(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("pgtest: $%s=%s does not hold %s", BinDirEnv, dir, strings.Join(binaries, ", "))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && try(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if try(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if try(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server programs (%s) found; tried %s, $PATH and /usr/lib/postgresql/*/bin",
		strings.Join(binaries, ", "), strings.Join(tried, ", "))
}

// versionOf reads NN from /usr/lib/postgresql/NN/bin.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Config says how a server is started. The zero value is ready to use.
type Config struct {
	// BinDir holds initdb, postgres and createdb; "" means Find.
	BinDir string
	// User is the OS user that runs initdb and postgres when the caller is root; "" means
	// $REDLOCK_PG_USER, else "postgres" when that account exists, else "nobody". Ignored when
	// the caller is not root: the server then runs as the caller.
	User string
	// Durable keeps PostgreSQL's own durability settings (fsync, synchronous_commit and
	// full_page_writes on), so that a commit survives a crash of the server; without it they
	// are off, which is faster and enough for tests that never crash the server.
	Durable bool
}

// Server is a running PostgreSQL server started by Launch. Its methods are safe for concurrent
// use.
type Server struct {
	// Host is always 127.0.0.1.
	Host string
	// Port is the server's TCP port on Host.
	Port int

	bin     string
	dir     string // the temporary directory: data/, the socket, postgres.log
	cred    *syscall.Credential
	durable bool

	cmd  *exec.Cmd
	done chan struct{} // closed once the postgres process has been reaped

	mu     sync.Mutex
	dbSeq  int
	closed bool
	err    error
}

// Launch runs initdb into a new temporary directory and starts postgres on a free loopback
// port, trying fresh ports if one is taken before the server binds it. It returns once the
// server accepts connections, or with an error (and nothing left behind) when ctx ends first or
// the server cannot start; the error carries the end of the server's log. ctx bounds only the
// start-up.
func Launch(ctx context.Context, cfg Config) (*Server, error) {
	bin := cfg.BinDir
	if bin == "" {
		var err error
		if bin, err = Find(); err != nil {
			return nil, err
		}
	}
	cred, err := credential(cfg.User)
	if err != nil {
		return nil, err
	}
	sweep(os.TempDir())
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgtest: create temp dir: %w", err)
	}
	s := &Server{Host: "127.0.0.1", bin: bin, dir: dir, cred: cred, durable: cfg.Durable}
	if cred != nil {
		// MkdirTemp made the directory 0700 for root; hand it to the server's user.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown %s: %w", dir, err)
		}
	}
	if err := s.initdb(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for range startAttempts {
		if err = s.start(ctx, 0); err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortBusy) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// dirPrefix starts the name of every server's temporary directory.
const dirPrefix = "pgtest-"

// sweep removes the directories of servers whose process died without a Close, which happens
// when a test binary is killed (its servers then die with it, by their parent-death signal):
// directories named dirPrefix… under tmp whose data/postmaster.pid names a process that no
// longer exists. A directory without that file may belong to a server still in initdb and is
// left alone.
func sweep(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(b), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// credential returns the user and group to run PostgreSQL as, or nil when not root.
func credential(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	candidates := []string{name}
	if name == "" {
		candidates = []string{os.Getenv(UserEnv), "postgres", "nobody"}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		u, err := user.Lookup(c)
		if err != nil {
			if name != "" || c == os.Getenv(UserEnv) {
				return nil, fmt.Errorf("pgtest: user %q to run PostgreSQL as: %w", c, err)
			}
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			return nil, fmt.Errorf("pgtest: user %q (uid %s) cannot run PostgreSQL", c, u.Uid)
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgtest: running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

// command builds a command of the server's bin directory that runs as the server's user and
// dies with the process that started it.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "PGTZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

func (s *Server) initdb(ctx context.Context) error {
	cmd := s.command(ctx, "initdb", "--pgdata", s.dataDir(), "--username", Superuser, "--auth", "trust",
		"--encoding", "UTF8", "--locale", "C", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, tail(out))
	}
	return nil
}

var errPortBusy = errors.New("port is in use")

// start runs postgres on port (a fresh one when port is 0) and waits until it is ready.
func (s *Server) start(ctx context.Context, port int) error {
	if port == 0 {
		var err error
		if port, err = testutil.FreePort(); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: open log: %w", err)
	}
	args := []string{
		"-D", s.dataDir(),
		"-p", strconv.Itoa(port),
		"-k", s.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=100",
		"-c", "shared_buffers=32MB",
		"-c", "logging_collector=off",
	}
	if !s.durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	// Not CommandContext: ctx bounds the start-up only, Close stops the server.
	cmd := s.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.Port = cmd, done, port
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		log, _ := os.ReadFile(s.logPath())
		if bytes.Contains(log, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errPortBusy, err)
		}
		return fmt.Errorf("pgtest: postgres on port %d did not become ready: %w\nlog:\n%s", port, err, tail(log))
	}
	return nil
}

// waitReady polls postmaster.pid until the server writes "ready" as its status (line 8) for
// our process and port, the process exits or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readyTimeout)
		defer cancel()
	}
	pidFile := filepath.Join(s.dataDir(), "postmaster.pid")
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(s.cmd.Process.Pid) &&
				strings.TrimSpace(lines[3]) == strconv.Itoa(s.Port) && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New("postgres exited during start-up")
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// kill ends the process at once and waits for it.
func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// DSN returns a URL for database db on the server, as the superuser, without TLS, e.g.
// postgres://postgres@127.0.0.1:PORT/db?sslmode=disable. It suits pgx and libpq.
func (s *Server) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates a new, empty database named name (a plain identifier: lower-case
// letters, digits and '_', starting with a letter, at most 63 bytes) with the createdb program,
// and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("pgtest: invalid database name %q", name)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "createdb"),
		"--host", s.Host, "--port", strconv.Itoa(s.Port), "--username", Superuser, name)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGCONNECT_TIMEOUT=10")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pgtest: createdb %s: %w\n%s", name, err, tail(out))
	}
	return s.DSN(name), nil
}

// NewDatabase creates a database with a unique name that starts with prefix (cut down to a
// plain identifier) and returns its name and DSN.
func (s *Server) NewDatabase(ctx context.Context, prefix string) (name, dsn string, err error) {
	s.mu.Lock()
	s.dbSeq++
	n := s.dbSeq
	s.mu.Unlock()
	name = dbName(prefix, n)
	dsn, err = s.CreateDatabase(ctx, name)
	return name, dsn, err
}

// dbName makes a plain identifier from prefix and n.
func dbName(prefix string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(prefix) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	suffix := "_" + strconv.Itoa(n)
	base := b.String()
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = "db_" + base
	}
	if len(base)+len(suffix) > dbNameMax {
		base = base[:dbNameMax-len(suffix)]
	}
	return base + suffix
}

func validName(name string) bool {
	if name == "" || len(name) > dbNameMax || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// Restart stops the server and starts it again on the same port and data directory. With
// crash, the postmaster gets SIGKILL and every backend SIGKILL after it (a crash: the next
// start replays the WAL); otherwise SIGINT (a fast shutdown). It returns once the server
// accepts connections again, or ctx ends.
func (s *Server) Restart(ctx context.Context, crash bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("pgtest: restart after Close")
	}
	sig := os.Signal(syscall.SIGINT)
	if crash {
		sig = syscall.SIGQUIT
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: signal postgres: %w", err)
	}
	select {
	case <-s.done:
	case <-time.After(stopGrace):
		s.kill()
	}
	return s.start(ctx, s.Port)
}

// PID returns the process id of the postmaster, or 0 after Close.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	return s.cmd.Process.Pid
}

// Close stops the server with SIGINT (a fast shutdown: sessions are ended, no checkpoint wait
// for clients), escalating to SIGQUIT and SIGKILL if it is still running after 10 seconds,
// waits until the process has been reaped, and removes the temporary directory. It is
// idempotent: later calls return the first call's result.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.err
	}
	s.closed = true
	var errs []error
	if err := s.stop(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgtest: remove %s: %w", s.dir, err))
	}
	s.err = errors.Join(errs...)
	return s.err
}

// stop signals the postmaster, escalating from SIGINT to SIGQUIT to SIGKILL, until it has
// been reaped.
func (s *Server) stop() error {
	var errs []error
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL} {
		if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("pgtest: signal postgres: %w", err))
		}
		timer := time.NewTimer(stopGrace)
		select {
		case <-s.done:
			timer.Stop()
			return errors.Join(errs...)
		case <-timer.C:
		}
	}
	<-s.done // SIGKILL cannot be ignored
	return errors.Join(errs...)
}

// tail returns the last bytes of a log or an output.
func tail(b []byte) string {
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	return s
}
