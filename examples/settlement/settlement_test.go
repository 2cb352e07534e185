package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// buildWorker starts building this program into a temporary directory, with -race when the
// test has it, and returns a function that waits for the build and returns the binary's path.
// The build runs while the test starts its servers; a cleanup waits for it in any case.
func buildWorker(t *testing.T) func() string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		root := os.Getenv("GOROOT") // go test sets it for the test binary
		if root == "" {
			t.Fatal("the go command is not on PATH and GOROOT is not set")
		}
		goBin = filepath.Join(root, "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "settlement")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(t.Context(), goBin, append(args, ".")...)
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	var r *result
	wait := func() result {
		if r == nil {
			v := <-done
			r = &v
		}
		return *r
	}
	t.Cleanup(func() { wait() })
	return func() string {
		t.Helper()
		if r := wait(); r.err != nil {
			t.Fatalf("go build: %v\n%s", r.err, r.out)
		}
		return bin
	}
}

type payout struct {
	worker string
	token  redlock.Token
	amount int64
}

type attempt struct {
	worker, settlement, outcome, detail string
	token                               redlock.Token
}

// ledger is what the database says after a story.
type ledger struct {
	amount   map[string]int64    // seeded amount per settlement
	status   map[string]string   // due or paid
	fence    map[string]int64    // settlements.fence_token
	payouts  map[string][]payout // per settlement, in insertion order
	attempts []attempt
}

func readLedger(t *testing.T, db *sql.DB) ledger {
	t.Helper()
	ctx := t.Context()
	l := ledger{amount: map[string]int64{}, status: map[string]string{}, fence: map[string]int64{}, payouts: map[string][]payout{}}
	query := func(q string, scan func(*sql.Rows) error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	query(`SELECT id, amount_cents, status, fence_token FROM settlements`, func(r *sql.Rows) error {
		var id, status string
		var amount, fence int64
		err := r.Scan(&id, &amount, &status, &fence)
		l.amount[id], l.status[id], l.fence[id] = amount, status, fence
		return err
	})
	query(`SELECT settlement_id, worker, token, amount_cents FROM payouts ORDER BY id`, func(r *sql.Rows) error {
		var id string
		var p payout
		err := r.Scan(&id, &p.worker, &p.token, &p.amount)
		l.payouts[id] = append(l.payouts[id], p)
		return err
	})
	query(`SELECT worker, token, settlement_id, outcome, detail FROM payout_attempts ORDER BY id`, func(r *sql.Rows) error {
		var a attempt
		err := r.Scan(&a.worker, &a.token, &a.settlement, &a.outcome, &a.detail)
		l.attempts = append(l.attempts, a)
		return err
	})
	if len(l.amount) != storySettlements {
		t.Fatalf("%d settlements in the ledger; want %d", len(l.amount), storySettlements)
	}
	return l
}

// lateAttempts returns the attempts the paused worker made with its old token on the settlement
// it was paused before: its late write.
func (l ledger) lateAttempts(res storyResult) []attempt {
	var out []attempt
	for _, a := range l.attempts {
		if a.worker == res.paused && a.token == res.pausedToken && a.settlement == res.pausedSettlement {
			out = append(out, a)
		}
	}
	return out
}

func (l ledger) count(outcome string) int {
	n := 0
	for _, a := range l.attempts {
		if a.outcome == outcome {
			n++
		}
	}
	return n
}

// wantPaidExactlyOnce fails unless every settlement has one payout of its amount and is paid.
func (l ledger) wantPaidExactlyOnce(t *testing.T) {
	t.Helper()
	for id, amount := range l.amount {
		ps := l.payouts[id]
		if len(ps) != 1 || ps[0].amount != amount || l.status[id] != "paid" {
			t.Errorf("settlement %s (%d cents, %s): payouts %+v; want exactly one of %d cents", id, amount, l.status[id], ps, amount)
		}
	}
}

// TestSettlement plays the incident with real processes: three worker processes of this
// program, three real redis-server nodes for the lock, a real PostgreSQL ledger. In each
// scenario w1 takes the lock, pays S-0001, and is stopped with SIGSTOP just before paying
// S-0002; its lock expires; w2 and w3 take over with larger tokens and pay everything; then w1
// is resumed and sends its late payment of S-0002 with its old token. The scenarios differ in
// the defences the workers use, and the ledger shows which layer stopped the late payment.
func TestSettlement(t *testing.T) {
	built := buildWorker(t)
	nodes := redisproc.StartT(t, 3, redisproc.Config{})
	pg := pgtest.Start(t)
	bin := built()

	play := func(t *testing.T, sc scenario) (storyResult, ledger) {
		t.Helper()
		dsn := pg.NewDatabaseT(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := setupLedger(t.Context(), db, storySettlements); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), storyTimeout)
		defer cancel()
		log := &testutil.SyncBuffer{}
		res, err := runStory(ctx, storyConfig{bin: bin, nodes: nodes.URLs(), dsn: dsn, job: "settlement:test:" + sc.name,
			ttl: storyTTL, batch: storyBatch, log: log}, sc)
		t.Logf("story %s:\n%s", sc.name, log.String())
		if err != nil {
			t.Fatal(err)
		}
		// The pause point is exact: w1 paid S-0001 and stopped before S-0002.
		if res.paused != "w1" || res.pausedSettlement != "S-0002" || res.pausedToken == 0 {
			t.Fatalf("paused %q before %q with token %d; want w1 before S-0002", res.paused, res.pausedSettlement, res.pausedToken)
		}
		// The lock passed on while w1 was stopped, to holders with larger tokens.
		if len(res.takeoverTokens) == 0 {
			t.Fatal("nobody took over from w1")
		}
		for _, tok := range res.takeoverTokens {
			if tok <= res.pausedToken {
				t.Fatalf("a takeover holder had token %d, not above w1's %d", tok, res.pausedToken)
			}
		}
		return res, readLedger(t, db)
	}

	t.Run("FencingStopsThePausedWorker", func(t *testing.T) {
		res, l := play(t, scenarios[0])
		l.wantPaidExactlyOnce(t)
		// w1's late write reached the database and the fencing check refused it: the attempt
		// is recorded, with the stale-token outcome, and the payout is the newer holder's.
		late := l.lateAttempts(res)
		if len(late) != 1 || late[0].outcome != outcomeStaleToken || !strings.Contains(late[0].detail, "stale fencing token") {
			t.Fatalf("w1's late attempts on %s: %+v; want one refused with %s", res.pausedSettlement, late, outcomeStaleToken)
		}
		p := l.payouts[res.pausedSettlement]
		if len(p) != 1 || p[0].worker == "w1" || p[0].token <= res.pausedToken {
			t.Fatalf("payout of %s: %+v; want one by the new holder, with a token above %d", res.pausedSettlement, p, res.pausedToken)
		}
		if l.fence[res.pausedSettlement] <= int64(res.pausedToken) {
			t.Fatalf("fence_token of %s is %d; want it above w1's %d", res.pausedSettlement, l.fence[res.pausedSettlement], res.pausedToken)
		}
		// Fencing stopped it first: the idempotency key never had to act.
		if n := l.count(outcomeDuplicate); n != 0 {
			t.Fatalf("%d attempts stopped by the idempotency key; want 0 with fencing on", n)
		}
		if !containsLine(res.output["w1"], "settlement S-0002: stale_token") {
			t.Fatalf("w1 did not report its refusal:\n%s", strings.Join(res.output["w1"], "\n"))
		}
	})

	t.Run("IdempotencyKeyStopsTheDuplicate", func(t *testing.T) {
		res, l := play(t, scenarios[1])
		l.wantPaidExactlyOnce(t)
		late := l.lateAttempts(res)
		if len(late) != 1 || late[0].outcome != outcomeDuplicate || !strings.Contains(late[0].detail, "23505") {
			t.Fatalf("w1's late attempts on %s: %+v; want one refused with %s (unique violation)", res.pausedSettlement, late, outcomeDuplicate)
		}
		if n := l.count(outcomeStaleToken); n != 0 {
			t.Fatalf("%d attempts refused by fencing, which was off", n)
		}
		if p := l.payouts[res.pausedSettlement]; len(p) != 1 || p[0].worker == "w1" {
			t.Fatalf("payout of %s: %+v; want one by the new holder", res.pausedSettlement, p)
		}
	})

	// The control experiment: with both defences off the incident happens, so the checks above
	// can fail and are not passing by luck.
	t.Run("WithoutEitherLayerASettlementIsPaidTwice", func(t *testing.T) {
		res, l := play(t, scenarios[2])
		p := l.payouts[res.pausedSettlement]
		if len(p) != 2 || p[0].token <= res.pausedToken || p[1].worker != "w1" || p[1].token != res.pausedToken {
			t.Fatalf("payouts of %s: %+v; want the new holder's, then w1's late duplicate", res.pausedSettlement, p)
		}
		late := l.lateAttempts(res)
		if len(late) != 1 || late[0].outcome != outcomePaid {
			t.Fatalf("w1's late attempts: %+v; want one that paid", late)
		}
		for id := range l.amount {
			if n := len(l.payouts[id]); n < 1 || n > 2 {
				t.Errorf("settlement %s paid %d times", id, n)
			}
		}
	})
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestUsage: with no arguments the program explains itself and succeeds; an unknown command
// fails.
func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), nil, nil, &out); err != nil || !strings.Contains(out.String(), "settlement demo") {
		t.Fatalf("run() = %v, %q", err, out.String())
	}
	if err := run(t.Context(), []string{"frobnicate"}, nil, &out); err == nil {
		t.Fatal("unknown command accepted")
	}
	if err := run(t.Context(), []string{"worker", "--worker-id", "w1"}, nil, &out); err == nil {
		t.Fatal("worker without --nodes and --dsn accepted")
	}
}
