package redlock

import (
	"fmt"
	"math"
	"time"
)

// MaxTTL is the longest TTL a lock may have, and the longest its keys may live on a node
// (TTL plus lock-delay, [WithLockDelay]). A lock meant to outlive a year is a configuration
// error, and operators must be able to wait out the longest key lifetime before restarting a
// node without persistence (the delayed restart of docs/design.md).
const MaxTTL = 365 * 24 * time.Hour

// driftFloor is added to every drift allowance: Redis expires keys with millisecond
// precision, so a key may live up to about a millisecond less than asked, and the client's
// own millisecond rounding adds another. Source: the redis.io Redlock page and antirez's
// reference implementation (redlock-rb), which add 2 ms.
const driftFloor = 2 * time.Millisecond

// Drift returns the clock-drift allowance for a lock of the given TTL:
// ttl × factor + 2 ms, rounded up to the next nanosecond. Pure function.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(math.Ceil(float64(ttl)*factor)) + driftFloor
}

// Validity returns the validity time left for a lock of the given TTL whose acquisition
// started at start and was confirmed at end: ttl − (end − start) − Drift(ttl, factor).
// When start and end both carry a monotonic clock reading (values from time.Now), the
// elapsed time is measured on Go's monotonic clock and wall-clock steps cannot inflate the
// result. A result ≤ 0 means the lock must not be used. Pure function.
func Validity(ttl time.Duration, start, end time.Time, factor float64) time.Duration {
	return ttl - end.Sub(start) - Drift(ttl, factor)
}

// checkTTL validates a TTL and returns it truncated to whole milliseconds, the precision
// Redis keeps (PX takes milliseconds). Validity is computed from the truncated value, so the
// sub-millisecond part is never counted as lock time.
func checkTTL(ttl time.Duration, factor float64) (time.Duration, error) {
	if ttl <= 0 {
		return 0, invalidf("ttl %v must be positive", ttl)
	}
	if ttl > MaxTTL {
		return 0, invalidf("ttl %v exceeds MaxTTL (%v)", ttl, MaxTTL)
	}
	given := ttl
	ttl = ttl.Truncate(time.Millisecond)
	if d := Drift(ttl, factor); ttl <= d {
		whole := ""
		if ttl != given {
			whole = fmt.Sprintf(" (%dms in whole milliseconds, Redis's unit)", ttl.Milliseconds())
		}
		return 0, invalidf("ttl %v%s leaves no validity time after the clock drift allowance of %v; the least TTL that does is %v",
			given, whole, d, minTTL(factor))
	}
	return ttl, nil
}

// minTTL is the least TTL in whole milliseconds that leaves validity time after its drift
// allowance with this drift factor (3ms with the default); factor is below 0.5
// (WithDriftFactor), so the loop ends within a few milliseconds of 2 × driftFloor.
func minTTL(factor float64) time.Duration {
	ttl := driftFloor
	for ttl <= Drift(ttl, factor) {
		ttl += time.Millisecond
	}
	return ttl
}

// checkKeyTTL validates a lock's TTL as checkTTL does, and also the lifetime of its keys,
// ttl + lock-delay, which must not exceed MaxTTL.
func (c *Client) checkKeyTTL(ttl time.Duration) (time.Duration, error) {
	ttl, err := checkTTL(ttl, c.cfg.driftFactor)
	if err != nil {
		return 0, err
	}
	if d := c.cfg.lockDelay; ttl > MaxTTL-d { // d < MaxTTL (WithLockDelay), so no overflow
		return 0, invalidf("ttl %v plus lock delay %v exceeds MaxTTL (%v)", ttl, d, MaxTTL)
	}
	return ttl, nil
}

// keyTTLMillis is the PX, in milliseconds, that a lock key of a lock with the given TTL
// gets on a node when it is set or extended: ttl plus the lock-delay ([WithLockDelay]).
// The holder's validity is always computed from ttl itself; the key may live longer than
// that, never shorter. checkKeyTTL has bounded the sum by MaxTTL.
func (c *Client) keyTTLMillis(ttl time.Duration) int64 {
	return (ttl + c.cfg.lockDelay).Milliseconds()
}

// counterIdleMillis is the idle TTL given to a fence counter, in milliseconds: the configured
// idle TTL, but never shorter than the lock key's own PX (keyTTLMillis), so a counter cannot
// expire while a key that has just used it may still be on the node. 0 means no expiry.
func (c *Client) counterIdleMillis(ttl time.Duration) int64 {
	if c.cfg.counterIdleTTL == 0 {
		return 0
	}
	return max(c.cfg.counterIdleTTL.Milliseconds(), c.keyTTLMillis(ttl))
}
