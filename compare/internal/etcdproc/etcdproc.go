// Package etcdproc starts an etcd cluster of real etcd processes (Debian's etcd-server) on
// free loopback ports, for the comparison lab: each member in its own temporary data
// directory, stopped by PID, killable and restartable one at a time.
package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumlock/redlock/internal/testutil"
)

// Member is one etcd process of a Cluster.
type Member struct {
	Name       string
	ClientAddr string // host:port of its client URL
	peerURL    string
	dir        string
	log        string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a running etcd cluster started by Start. Its methods are safe for concurrent
// use.
type Cluster struct {
	bin     string
	root    string
	members []*Member
	initial string // --initial-cluster
}

// Find returns the path of the etcd binary: $REDLOCK_ETCD, else etcd on PATH.
func Find() (string, error) {
	if p := os.Getenv("REDLOCK_ETCD"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcdproc: etcd is not on PATH (Debian: apt-get install -y etcd-server): %w", err)
	}
	return p, nil
}

// Start starts n members (n ≥ 1) and returns once every member reports the same leader.
// ctx bounds only the start-up; on failure every process started is stopped.
func Start(ctx context.Context, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdproc: a cluster needs at least 1 member, got %d", n)
	}
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "etcdproc-")
	if err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	ports, err := testutil.FreePorts(2 * n)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	c := &Cluster{bin: bin, root: root}
	var initial []string
	for i := range n {
		m := &Member{
			Name:       fmt.Sprintf("m%d", i),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			peerURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:        filepath.Join(root, fmt.Sprintf("m%d", i)),
			log:        filepath.Join(root, fmt.Sprintf("m%d.log", i)),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"="+m.peerURL)
	}
	c.initial = strings.Join(initial, ",")
	for _, m := range c.members {
		if err := c.spawn(m, "new"); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	if err := c.WaitLeader(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Members returns the members in order.
func (c *Cluster) Members() []*Member { return append([]*Member(nil), c.members...) }

// ClientAddrs returns every member's client address.
func (c *Cluster) ClientAddrs() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.ClientAddr
	}
	return out
}

func (c *Cluster) spawn(m *Member, state string) error {
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcdproc: %w", err)
	}
	clientURL := "http://" + m.ClientAddr
	cmd := exec.Command(c.bin,
		"--name", m.Name,
		"--data-dir", m.dir,
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", c.initial,
		"--initial-cluster-state", state,
		"--initial-cluster-token", "redlock-compare",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("etcdproc: start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// PID returns the member's process id, or 0 when it is not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	select {
	case <-m.done:
		return 0
	default:
		return m.cmd.Process.Pid
	}
}

// Kill sends SIGKILL to the member and waits until it has exited.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts a killed member again on its ports and data directory.
func (c *Cluster) Restart(ctx context.Context, m *Member) error {
	m.Kill()
	if err := c.spawn(m, "existing"); err != nil {
		return err
	}
	return c.WaitLeader(ctx)
}

// status asks one member for its view: its id and the leader's.
func status(ctx context.Context, addr string) (id, leader uint64, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second, Logger: nopLogger()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(sctx, addr)
	if err != nil {
		return 0, 0, err
	}
	return st.Header.MemberId, st.Leader, nil
}

// Leader returns the member that the running members agree leads, or an error when they do
// not agree (an election is going on) or none answers.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var leader uint64
	var lm *Member
	ids := map[uint64]*Member{}
	answered := 0
	for _, m := range c.members {
		if m.PID() == 0 {
			continue
		}
		id, l, err := status(ctx, m.ClientAddr)
		if err != nil {
			continue
		}
		answered++
		ids[id] = m
		if l == 0 || (leader != 0 && l != leader) {
			return nil, errors.New("etcdproc: the members do not agree on a leader yet")
		}
		leader = l
	}
	if answered == 0 {
		return nil, errors.New("etcdproc: no member answers")
	}
	if lm = ids[leader]; lm == nil {
		return nil, errors.New("etcdproc: the leader is not a running member")
	}
	return lm, nil
}

// WaitLeader polls until the running members agree on a leader, or ctx ends (30 s when
// ctx has no deadline).
func (c *Cluster) WaitLeader(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	for {
		_, err := c.Leader(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdproc: waiting for a leader: %w (last: %v)%s", ctx.Err(), err, c.logTails())
		case <-time.After(50 * time.Millisecond): // polling a process we do not control
		}
	}
}

func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		data, _ := os.ReadFile(m.log)
		if len(data) > 600 {
			data = data[len(data)-600:]
		}
		fmt.Fprintf(&b, "\n%s log: %s", m.Name, strings.TrimSpace(string(data)))
	}
	return b.String()
}

// Close kills every member and removes the data directories.
func (c *Cluster) Close() error {
	for _, m := range c.members {
		m.Kill()
	}
	return os.RemoveAll(c.root)
}
