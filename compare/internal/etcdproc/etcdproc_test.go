package etcdproc

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// TestCluster: three members agree on a leader; the leader killed, the other two elect
// one; the killed member restarted rejoins; Close leaves no process.
func TestCluster(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		testutil.SkipOrFail(t, "REDLOCK_REQUIRE_ETCD", "etcd is not on PATH", "a real etcd cluster", "install it with apt-get install -y etcd-server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := Start(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old.Kill()
	if old.PID() != 0 {
		t.Fatal("a killed member still has a PID")
	}
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == old {
		t.Fatalf("the killed member %s still leads", old.Name)
	}
	if err := c.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	pids := []int{}
	for _, m := range c.Members() {
		if m.PID() == 0 {
			t.Fatalf("member %s is not running after the restart", m.Name)
		}
		pids = append(pids, m.PID())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, m := range c.Members() {
		if m.PID() != 0 {
			t.Errorf("member %s (pid %d) runs after Close", m.Name, pids[i])
		}
	}
}
