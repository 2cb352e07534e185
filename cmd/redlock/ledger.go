package main

// The demo's payment ledger, a store that can enforce fencing tokens, as a real store must.

import (
	"sync"

	"github.com/quorumlock/redlock"
)

// ledger is the demo's payment ledger: an in-memory store of settlement payouts that can
// enforce fencing tokens. For every settlement it keeps the highest token it has seen, and
// a fenced payout is admitted only if its token is at least that high; the check and the
// write happen under one mutex, so no other write can slip in between them. This is what a
// real store must do with redlock's tokens (a conditional UPDATE, a compare-and-set).
type ledger struct {
	mu      sync.Mutex
	payouts map[string]int
	highest map[string]redlock.Token
}

func newLedger() *ledger {
	return &ledger{payouts: map[string]int{}, highest: map[string]redlock.Token{}}
}

// isPaid reports whether the settlement has at least one payout.
func (l *ledger) isPaid(settlement string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.payouts[settlement] > 0
}

// payUnfenced records a payout with no token and no check: what a store that knows nothing
// about locks does.
func (l *ledger) payUnfenced(settlement string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.payouts[settlement]++
}

// pay records a payout made under the fencing token tok. It returns a
// *redlock.StaleTokenError (matching redlock.ErrStaleToken), the library's convention for
// fenced stores, and records nothing, if a higher token has been seen for the settlement;
// otherwise the
// payout is recorded and tok becomes the highest token seen. An equal token is admitted,
// so one holder may write several times under one lock.
func (l *ledger) pay(settlement string, tok redlock.Token) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.highest[settlement]; tok < h {
		return &redlock.StaleTokenError{Resource: settlement, Got: tok, Highest: h}
	}
	l.highest[settlement] = tok
	l.payouts[settlement]++
	return nil
}

// count returns the number of payouts of the settlement.
func (l *ledger) count(settlement string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.payouts[settlement]
}

// highestToken returns the highest token seen for the settlement, 0 if none.
func (l *ledger) highestToken(settlement string) redlock.Token {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.highest[settlement]
}
