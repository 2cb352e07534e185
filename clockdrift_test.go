package redlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ttl    time.Duration
		factor float64
		want   time.Duration
	}{
		{"default factor 10s", 10 * time.Second, 0.01, 100*time.Millisecond + 2*time.Millisecond},
		{"zero factor keeps the 2ms floor", time.Second, 0, 2 * time.Millisecond},
		{"rounds up", 3 * time.Nanosecond, 0.5, 2*time.Nanosecond + 2*time.Millisecond},
		{"one percent of 30s", 30 * time.Second, 0.01, 302 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Drift(tc.ttl, tc.factor); got != tc.want {
				t.Fatalf("Drift(%v, %v) = %v, want %v", tc.ttl, tc.factor, got, tc.want)
			}
		})
	}
}

func TestValidity(t *testing.T) {
	start := time.Now()
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		elapsed time.Duration
		factor  float64
		want    time.Duration
	}{
		{"instant", 10 * time.Second, 0, 0.01, 10*time.Second - 102*time.Millisecond},
		{"after 1s", 10 * time.Second, time.Second, 0.01, 9*time.Second - 102*time.Millisecond},
		{"exactly used up", 100 * time.Millisecond, 97 * time.Millisecond, 0.01, 0},
		{"overdrawn", 100 * time.Millisecond, 200 * time.Millisecond, 0.01, -103 * time.Millisecond},
		{"zero factor", time.Second, 10 * time.Millisecond, 0, 988 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Validity(tc.ttl, start, start.Add(tc.elapsed), tc.factor)
			if got != tc.want {
				t.Fatalf("Validity(%v, elapsed %v, %v) = %v, want %v", tc.ttl, tc.elapsed, tc.factor, got, tc.want)
			}
		})
	}
}

// TestValidityUsesMonotonicClock shows that a wall-clock step between start and end does not
// change the elapsed time when both readings carry the monotonic clock.
func TestValidityUsesMonotonicClock(t *testing.T) {
	start := time.Now()
	end := start.Add(10 * time.Millisecond)
	// A reading whose wall clock jumped back an hour but whose monotonic reading moved on.
	jumped := end.Add(-time.Hour).Round(0) // Round(0) strips the monotonic reading
	if got := Validity(time.Second, start, end, 0); got != 988*time.Millisecond {
		t.Fatalf("monotonic: got %v, want 988ms", got)
	}
	// Without monotonic readings, the wall-clock jump inflates the validity: the reason the
	// library only subtracts readings taken with time.Now.
	if got := Validity(time.Second, start.Round(0), jumped, 0); got <= time.Second {
		t.Fatalf("wall clock: got %v, expected an inflated validity above 1s", got)
	}
}

func TestCheckTTL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		want    time.Duration
		wantErr bool
	}{
		{"zero", 0, 0, true},
		{"negative", -time.Second, 0, true},
		{"too small for the drift", 2 * time.Millisecond, 0, true},
		{"sub-millisecond", 900 * time.Microsecond, 0, true},
		{"one nanosecond", 1, 0, true},
		{"2.5ms, 2ms in whole milliseconds", 2500 * time.Microsecond, 0, true},
		{"just enough", 3 * time.Millisecond, 3 * time.Millisecond, false},
		{"truncated to ms", 10*time.Second + 999*time.Microsecond, 10 * time.Second, false},
		{"MaxTTL", MaxTTL, MaxTTL, false},
		{"above MaxTTL", MaxTTL + time.Millisecond, 0, true},
		{"overflowing duration", time.Duration(1<<63 - 1), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkTTL(tc.ttl, DefaultDriftFactor)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("checkTTL(%v) error = %v, want ErrInvalidArgument", tc.ttl, err)
				}
				if tc.ttl > 0 && tc.ttl < 3*time.Millisecond && !strings.Contains(err.Error(), "the least TTL that does is 3ms") {
					t.Fatalf("checkTTL(%v) error = %v, want it to name the least TTL, 3ms", tc.ttl, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("checkTTL(%v) = %v, %v; want %v, nil", tc.ttl, got, err, tc.want)
			}
		})
	}
}

// TestMinTTL: the least TTL minTTL names leaves validity after its drift allowance, and one
// millisecond less does not, for drift factors across WithDriftFactor's range.
func TestMinTTL(t *testing.T) {
	for _, f := range []float64{0, DefaultDriftFactor, 0.1, 0.25, 0.4999} {
		m := minTTL(f)
		if _, err := checkTTL(m, f); err != nil {
			t.Errorf("factor %v: minTTL %v refused: %v", f, m, err)
		}
		if _, err := checkTTL(m-time.Millisecond, f); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("factor %v: %v accepted, below minTTL %v", f, m-time.Millisecond, m)
		}
	}
}

// FuzzValidity: for any TTL, drift factor, lock delay and elapsed time, the TTL checks and the
// validity arithmetic never overflow or panic; an accepted TTL is whole milliseconds, at most
// MaxTTL with the delay, and leaves validity after the drift; the validity is never more than
// ttl − drift, and never positive once the TTL has elapsed; the keys' PX is ttl + delay.
func FuzzValidity(f *testing.F) {
	for _, s := range [][4]int64{
		{10_000, 10, 0, 0}, {3, 499, 0, 1}, {int64(MaxTTL / time.Millisecond), 10, 0, 0},
		{int64(MaxTTL/time.Millisecond) - 1000, 10, 1000, 0}, {1, 0, 0, 0}, {-5, 10, 0, 0},
		{10_000, 10, 0, int64(10 * time.Second)}, {10_000, 10, 0, -1}, {1 << 62, 10, 1 << 62, 1 << 62},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, ttlMs, factorMilli, delayMs, elapsed int64) {
		factor := float64(uint64(factorMilli)%500) / 1000 // [0, 0.5)
		ttl := time.Duration(ttlMs) * time.Millisecond
		if ttlMs > int64(MaxTTL/time.Millisecond)*2 || ttlMs < -1<<40 {
			ttl = time.Duration(ttlMs) // beyond what ms can express without overflow: use as ns
		}
		var cfg config
		d := time.Duration(delayMs%int64(MaxTTL/time.Millisecond)) * time.Millisecond
		if err := WithLockDelay(d)(&cfg); err != nil {
			if d >= 0 {
				t.Fatalf("WithLockDelay(%v): %v", d, err)
			}
			d = 0
		}
		cfg.driftFactor = factor
		c := &Client{cfg: cfg}
		got, err := c.checkKeyTTL(ttl)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("checkKeyTTL(%v): %v", ttl, err)
			}
			return
		}
		switch {
		case got <= 0 || got%time.Millisecond != 0 || got > ttl:
			t.Fatalf("checkKeyTTL(%v) = %v", ttl, got)
		case got+c.cfg.lockDelay > MaxTTL:
			t.Fatalf("ttl %v + delay %v accepted beyond MaxTTL", got, c.cfg.lockDelay)
		case got <= Drift(got, factor):
			t.Fatalf("ttl %v accepted with no validity after drift %v", got, Drift(got, factor))
		}
		if px := c.keyTTLMillis(got); px <= 0 || time.Duration(px)*time.Millisecond != got+c.cfg.lockDelay {
			t.Fatalf("keyTTLMillis(%v) with delay %v = %d", got, c.cfg.lockDelay, px)
		}
		start := time.Unix(0, 0)
		if elapsed < 0 {
			elapsed = -elapsed
			if elapsed < 0 { // MinInt64
				elapsed = 0
			}
		}
		end := start.Add(time.Duration(elapsed))
		v := Validity(got, start, end, factor)
		if v > got-Drift(got, factor) {
			t.Fatalf("validity %v above ttl − drift for ttl %v", v, got)
		}
		if time.Duration(elapsed) >= got && v > 0 {
			t.Fatalf("validity %v > 0 after %v of a %v TTL", v, time.Duration(elapsed), got)
		}
	})
}
