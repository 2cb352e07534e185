package redlock

import (
	"flag"
	"os"
	"testing"

	"github.com/quorumlock/redlock/internal/redislog"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quickRapidChecks is the number of cases each property test runs by default, to keep the
// default test run fast. A long run: RAPID_CHECKS=2000 go test -run Property (or
// -rapid.checks=2000).
const quickRapidChecks = "25"

func TestMain(m *testing.M) {
	// Drop go-redis's own log lines (dial retries to nodes the tests stopped).
	redis.SetLogger(redislog.Discard{})
	if os.Getenv("RAPID_CHECKS") == "" {
		// Command-line flags are parsed later, in m.Run, and still override this.
		_ = flag.Set("rapid.checks", quickRapidChecks)
	}
	// go-redis's pool retries a failed dial once a second in a goroutine of its own, which
	// ends at its next retry once the client is closed; tests that stop a node can end
	// inside that second.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
