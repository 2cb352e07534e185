package chaos

// The package's TestMain and the switch to the long runs.

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's own log lines (dial failures to nodes the lab killed).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// longEnv turns on the long runs: the Full profile for every scenario and many more rapid
// cases. RAPID_CHECKS, when set, still decides the number of rapid cases.
const longEnv = "REDLOCK_CHAOS_LONG"

func long() bool { return os.Getenv(longEnv) == "1" }

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if os.Getenv("RAPID_CHECKS") == "" {
		checks := "15"
		if long() {
			checks = "1000"
		}
		// Command-line flags are parsed later, in m.Run, and still override this.
		_ = flag.Set("rapid.checks", checks)
	}
	goleak.VerifyTestMain(m)
}
