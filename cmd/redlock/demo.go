package main

// redlock demo: the settlement story in three acts, on embedded nodes or real ones, showing
// what a lock and its fencing tokens prevent (double payouts, a late holder's write).

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
)

const demoAbout = `
Replays the settlement story in three acts, on 5 embedded Redis nodes unless real nodes
are named with --nodes or $REDLOCK_NODES:

  1. Three instances of a nightly reconciliation job start at once and each pays
     settlement S-1001 unless it is already paid. A mutex inside each process does not
     stop the other processes: S-1001 is paid three times. Redlock: exactly once.
  2. Holder A takes the lock for S-1002 and pauses past its TTL; holder B takes over once
     A's keys have expired, gets a larger fencing token and pays S-1002.
  3. A resumes and sends its late payout with its old token; the ledger, which keeps the
     highest token it has seen, rejects it.

Every outcome is checked; the exit code is non-zero if one of them differs.`

const (
	demoNodeCount  = 5
	demoDefaultTTL = 500 * time.Millisecond
	demoMinTTL     = 20 * time.Millisecond
	demoMaxTTL     = time.Minute
	demoInstances  = 3
	// workTTL is the TTL of every lock but A's: the instances of act 1 and holder B only
	// read the ledger, pay and release, so 2s is ample even on a loaded machine. It is kept
	// short because keys that a failed attempt could not undo (its undo timed out) block
	// the key until they expire.
	workTTL = 2 * time.Second
	// demoNodeTimeout replaces the library's 50ms default, which suits a healthy LAN but
	// not a machine busy with other work, or real nodes far away.
	demoNodeTimeout = 200 * time.Millisecond
	// actTimeout bounds every Acquire of the demo on top of the TTL it waits out.
	actTimeout = 15 * time.Second

	settlement1 = "S-1001"
	settlement2 = "S-1002"
)

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("demo", "[--nodes URLS] [--ttl D]", demoAbout)
	nodesFlag := fs.String("nodes", "", "comma-separated `URLS` of real Redis nodes, e.g. redis://10.0.0.1:6379,redis://10.0.0.2:6379\n(default: $"+nodesEnv+", else 5 embedded nodes)")
	ttl := new(time.Duration)
	durationVar(fs, ttl, "ttl", demoDefaultTTL, "TTL `D` of holder A's lock in act 2, which B must wait out")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *ttl < demoMinTTL || *ttl > demoMaxTTL {
		return usageErrorf("demo: --ttl %v is outside [%v, %v]", *ttl, demoMinTTL, demoMaxTTL)
	}

	spec, source, err := nodeSpec(e, *nodesFlag)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	ns, err := openNodes(ctx, spec, source, e.getenv(authEnv), demoNodeCount)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer ns.Close()
	// Fence counters normally live a week without use; the demo's keys are unique per run,
	// so let them go from real nodes a minute after the run.
	c, err := redlock.New(ns.clients, redlock.WithCounterIdleTTL(time.Minute), redlock.WithNodeTimeout(demoNodeTimeout))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer c.Close()

	d := &demo{out: e.stdout, c: c, ttl: *ttl, run: newRunID(), ledger: newLedger()}
	fmt.Fprintf(d.out, "redlock demo, run %s: %s, quorum %d\n", d.run, ns.describe(), c.Quorum())
	res, err := d.play(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("demo: interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("demo: %w", err)
	}
	return reportClaims(d.out, res.claims())
}

// newRunID returns a random suffix that keeps the lock keys of one run apart from every
// other run on the same real nodes.
func newRunID() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// demo holds what the three acts share.
type demo struct {
	out    io.Writer
	c      *redlock.Client
	ttl    time.Duration
	run    string
	ledger *ledger // the fenced ledger that redlock's holders write to
}

// key returns the lock key that guards a settlement in this run.
func (d *demo) key(settlement string) string {
	return "redlock-demo:" + d.run + ":" + settlement
}

// demoResult is what happened, to be compared with what the demo claims.
type demoResult struct {
	mutexPayouts   int // payouts of S-1001 with one sync.Mutex per instance
	redlockPayouts int // payouts of S-1001 under redlock
	tokenA, tokenB redlock.Token
	bAfterA        bool  // B's lock was granted only after A's validity had ended
	bPay, aPay     error // the ledger's answers to B's payout and to A's late payout
	aRelease       error // A's Release after it resumed
	final          map[string]int
}

func (d *demo) play(ctx context.Context) (*demoResult, error) {
	res := &demoResult{}
	if err := d.act1(ctx, res); err != nil {
		return nil, err
	}
	if err := d.acts2and3(ctx, res); err != nil {
		return nil, err
	}
	d.printLedger()
	res.final = map[string]int{
		settlement1: d.ledger.count(settlement1),
		settlement2: d.ledger.count(settlement2),
	}
	return res, nil
}

// act1Row is what one instance of the job did in act 1.
type act1Row struct {
	guard    string
	instance string
	token    redlock.Token // 0 under the mutex
	sawPaid  bool
	action   string
}

func (d *demo) act1(ctx context.Context, res *demoResult) error {
	fmt.Fprintf(d.out, "\nAct 1: three instances of the nightly reconciliation job start at once.\n")
	fmt.Fprintf(d.out, "Each pays settlement %s unless the ledger already shows it paid.\n\n", settlement1)

	mutexRows, mutexPayouts := d.act1Mutex()
	lockRows, err := d.act1Redlock(ctx)
	if err != nil {
		return err
	}
	res.mutexPayouts = mutexPayouts
	res.redlockPayouts = d.ledger.count(settlement1)

	tw := newTable(d.out)
	fmt.Fprintf(tw, "guard\tinstance\ttoken\tsaw %s\taction\n", settlement1)
	for _, r := range append(mutexRows, lockRows...) {
		tok := "-"
		if r.token != 0 {
			tok = r.token.String()
		}
		saw := "unpaid"
		if r.sawPaid {
			saw = "paid"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.guard, r.instance, tok, saw, r.action)
	}
	_ = tw.Flush()
	fmt.Fprintf(d.out, "\npayouts of %s: %d with a sync.Mutex in each process (each locks only its own), %d with redlock\n",
		settlement1, res.mutexPayouts, res.redlockPayouts)
	return nil
}

// act1Mutex runs the three instances, each guarded by its own sync.Mutex, as three
// processes would be. A barrier makes the race deterministic: every instance reads the
// ledger before any of them pays. It returns the rows and the number of payouts.
func (d *demo) act1Mutex() ([]act1Row, int) {
	l := newLedger() // a ledger of its own: this replay must not touch redlock's
	rows := make([]act1Row, demoInstances)
	var allRead, wg sync.WaitGroup
	allRead.Add(demoInstances)
	for i := range demoInstances {
		wg.Go(func() {
			var mu sync.Mutex // this process's own mutex: the other processes cannot see it
			mu.Lock()
			defer mu.Unlock()
			paid := l.isPaid(settlement1)
			allRead.Done()
			allRead.Wait() // the barrier: nobody pays before everybody has read
			action := "skipped (already paid)"
			if !paid {
				l.payUnfenced(settlement1)
				action = "paid " + settlement1
			}
			rows[i] = act1Row{guard: "sync.Mutex", instance: instanceName(i), sawPaid: paid, action: action}
		})
	}
	wg.Wait()
	return rows, l.count(settlement1)
}

// act1Redlock runs the three instances against one redlock key: each acquires it, checks
// the ledger, pays with its fencing token if needed and releases. Rows come back in the
// order the lock was granted (by token).
func (d *demo) act1Redlock(ctx context.Context) ([]act1Row, error) {
	ctx, cancel := context.WithTimeout(ctx, actTimeout)
	defer cancel()
	rows := make([]act1Row, demoInstances)
	errs := make([]error, demoInstances)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range demoInstances {
		wg.Go(func() {
			<-start
			name := instanceName(i)
			lk, err := d.c.Acquire(ctx, d.key(settlement1), workTTL)
			if err != nil {
				errs[i] = fmt.Errorf("%s could not acquire the lock for %s: %w", name, settlement1, err)
				return
			}
			paid := d.ledger.isPaid(settlement1)
			action := "skipped (already paid)"
			if !paid {
				action = "paid " + settlement1
				if err := d.ledger.pay(settlement1, lk.Token()); err != nil {
					action = "payout rejected: " + err.Error()
				}
			}
			if err := lk.Release(context.WithoutCancel(ctx)); err != nil {
				// Not fatal: the keys expire within workTTL and the others then get the lock.
				action += "; " + releaseOutcome(err)
			}
			rows[i] = act1Row{guard: "redlock", instance: name, token: lk.Token(), sawPaid: paid, action: action}
		})
	}
	close(start) // all three start together
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b act1Row) int { return cmpToken(a.token, b.token) })
	return rows, nil
}

func instanceName(i int) string { return fmt.Sprintf("job-%d", i+1) }

func cmpToken(a, b redlock.Token) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// act2Row is one step of acts 2 and 3.
type act2Row struct {
	holder  string
	token   redlock.Token // 0: the step involves no token
	action  string
	outcome string
}

func (d *demo) acts2and3(ctx context.Context, res *demoResult) error {
	key := d.key(settlement2)
	fmt.Fprintf(d.out, "\nAct 2: holder A pauses past its TTL, and holder B takes over.\n\n")

	actx, cancel := context.WithTimeout(ctx, actTimeout)
	defer cancel()
	a, err := d.c.Acquire(actx, key, d.ttl)
	if err != nil {
		return fmt.Errorf("holder A could not acquire the lock for %s: %w", settlement2, err)
	}
	res.tokenA = a.Token()
	rows := []act2Row{
		{"A", a.Token(), fmt.Sprintf("acquire lock for %s, ttl %v", settlement2, d.ttl),
			fmt.Sprintf("acquired, valid for %v", roundMS(time.Until(a.Until())))},
		{"A", 0, "pause (GC, stalled VM, swapped out...)", "sends nothing, still believes it holds the lock"},
	}

	// A does nothing from here on. B's Acquire retries until A's keys have expired on a
	// quorum of nodes, which the nodes do on their own, in real time. B itself takes the
	// lock for workTTL: it is not the one meant to run out of time.
	bctx, bcancel := context.WithTimeout(ctx, d.ttl+actTimeout)
	defer bcancel()
	waitFrom := time.Now()
	b, err := d.c.Acquire(bctx, key, workTTL)
	if err != nil {
		return fmt.Errorf("holder B could not acquire the lock for %s: %w", settlement2, err)
	}
	granted := time.Now()
	res.tokenB = b.Token()
	res.bAfterA = granted.After(a.Until())
	rows = append(rows, act2Row{"B", b.Token(), "acquire lock for " + settlement2,
		fmt.Sprintf("acquired after retrying for %v, once A's keys had expired", roundMS(granted.Sub(waitFrom)))})
	res.bPay = d.ledger.pay(settlement2, b.Token())
	rows = append(rows, act2Row{"B", b.Token(), "pay " + settlement2, payOutcome(res.bPay)})
	rows = append(rows, act2Row{"B", b.Token(), "release", releaseOutcome(b.Release(ctx))})
	d.printSteps(rows)

	fmt.Fprintf(d.out, "\nAct 3: A resumes and sends its late payout with its old token.\n\n")
	rows = []act2Row{{"A", 0, "resume", fmt.Sprintf("its lock ran out %v ago, but nothing told it", roundMS(time.Since(a.Until())))}}
	res.aPay = d.ledger.pay(settlement2, a.Token())
	rows = append(rows, act2Row{"A", a.Token(), "pay " + settlement2 + " (late)", payOutcome(res.aPay)})
	res.aRelease = a.Release(ctx)
	outcome := "released (unexpected: its keys should be gone)"
	switch {
	case errors.Is(res.aRelease, redlock.ErrNotHeld):
		outcome = "refused: lock not held, its keys expired"
	case res.aRelease != nil:
		outcome = "failed: " + res.aRelease.Error()
	}
	rows = append(rows, act2Row{"A", a.Token(), "release", outcome})
	d.printSteps(rows)
	return nil
}

// releaseOutcome describes the result of a Release that was expected to succeed. A failed
// one does not change the story: the keys left behind expire with their TTL.
func releaseOutcome(err error) string {
	if err == nil {
		return "released"
	}
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		return fmt.Sprintf("release not confirmed (%d of %d nodes), keys expire with their TTL", qe.Agreed, qe.Total)
	}
	return "release failed (" + err.Error() + "), keys expire with their TTL"
}

func payOutcome(err error) string {
	var stale *redlock.StaleTokenError
	switch {
	case err == nil:
		return "accepted"
	case errors.As(err, &stale):
		return fmt.Sprintf("rejected: stale token %v < %v", stale.Got, stale.Highest)
	}
	return "failed: " + err.Error()
}

func (d *demo) printSteps(rows []act2Row) {
	tw := newTable(d.out)
	fmt.Fprintf(tw, "holder\ttoken\taction\toutcome\n")
	for _, r := range rows {
		tok := ""
		if r.token != 0 {
			tok = r.token.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.holder, tok, r.action, r.outcome)
	}
	_ = tw.Flush()
}

func (d *demo) printLedger() {
	fmt.Fprintf(d.out, "\nLedger (fenced, written under redlock):\n\n")
	tw := newTable(d.out)
	fmt.Fprintf(tw, "settlement\tpayouts\thighest token seen\n")
	for _, s := range []string{settlement1, settlement2} {
		fmt.Fprintf(tw, "%s\t%d\t%v\n", s, d.ledger.count(s), d.ledger.highestToken(s))
	}
	_ = tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func roundMS(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// claim is one outcome the demo promises, and whether it held.
type claim struct {
	what string // what the demo claims
	ok   bool
	got  string // what happened, shown when the claim failed
}

// claims compares what happened with what the demo says happens.
func (r *demoResult) claims() []claim {
	aRejected := errors.Is(r.aPay, redlock.ErrStaleToken)
	return []claim{
		{fmt.Sprintf("with a sync.Mutex per process, %s was paid 3 times", settlement1),
			r.mutexPayouts == 3, fmt.Sprintf("paid %d times", r.mutexPayouts)},
		{fmt.Sprintf("with redlock, %s was paid exactly once", settlement1),
			r.redlockPayouts == 1, fmt.Sprintf("paid %d times", r.redlockPayouts)},
		{"B got the lock only after A's validity had ended",
			r.bAfterA, "B got it while A's lock was still valid"},
		{"B's token is greater than A's",
			r.tokenB > r.tokenA, fmt.Sprintf("A %v, B %v", r.tokenA, r.tokenB)},
		{fmt.Sprintf("B's payout of %s was accepted", settlement2),
			r.bPay == nil, payOutcome(r.bPay)},
		{"A's late payout was rejected for its stale token",
			aRejected, payOutcome(r.aPay)},
		{"A's release after the pause reported the lock not held",
			errors.Is(r.aRelease, redlock.ErrNotHeld), fmt.Sprintf("release returned %v", r.aRelease)},
		{fmt.Sprintf("the ledger shows %s paid once and %s paid once", settlement1, settlement2),
			r.final[settlement1] == 1 && r.final[settlement2] == 1,
			fmt.Sprintf("%s paid %d times, %s paid %d times", settlement1, r.final[settlement1], settlement2, r.final[settlement2])},
	}
}

// reportClaims prints every claim with its verdict. It returns an error naming the claims
// that did not hold, or prints the closing line and returns nil.
func reportClaims(w io.Writer, cs []claim) error {
	fmt.Fprintf(w, "\nChecks:\n\n")
	var failed []string
	for _, c := range cs {
		if c.ok {
			fmt.Fprintf(w, "  ok    %s\n", c.what)
			continue
		}
		fmt.Fprintf(w, "  FAIL  %s (got: %s)\n", c.what, c.got)
		failed = append(failed, fmt.Sprintf("%s (got: %s)", c.what, c.got))
	}
	if len(failed) > 0 {
		return fmt.Errorf("demo: %d of %d claimed outcomes did not hold: %s", len(failed), len(cs), strings.Join(failed, "; "))
	}
	fmt.Fprintf(w, "\ndemo: all outcomes as claimed\n")
	return nil
}
