package redlock

import (
	"errors"
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
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("checkTTL(%v) = %v, %v; want %v, nil", tc.ttl, got, err, tc.want)
			}
		})
	}
}
