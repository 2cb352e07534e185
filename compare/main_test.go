package compare

import (
	"context"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	goleak.VerifyTestMain(m)
}

// requireEtcdEnv turns a missing etcd from a skipped test into a failed one; .ci/run sets it.
const requireEtcdEnv = "REDLOCK_REQUIRE_ETCD"

// requireServers skips (or, with the REDLOCK_REQUIRE_* variables, fails) a test that needs
// every backend's servers when one is missing.
func requireServers(t *testing.T) {
	t.Helper()
	redisproc.Require(t)
	pgtest.Require(t)
	if _, err := exec.LookPath("etcd"); err != nil {
		testutil.SkipOrFail(t, requireEtcdEnv, "etcd is not on PATH", "a real etcd cluster", "install it with apt-get install -y etcd-server")
	}
}
