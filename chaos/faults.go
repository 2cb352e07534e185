package chaos

// The faults a script injects: partitions and isolated clients (fault proxies), slow,
// killed, restarted, paused and clock-jumped nodes, and a Sentinel failover.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// Partition lets each client named in reach talk only to the listed nodes: the links from
// that client to every other node are blackholed (requests vanish, nothing comes back).
// Clients not named keep every link. It returns the fault's ID for Heal.
func (r *Run) Partition(reach map[int][]int, note string) int {
	var clients []int
	for c := range r.nClients {
		nodes, ok := reach[c]
		if !ok {
			continue
		}
		clients = append(clients, c)
		for n, link := range r.proxies[c] {
			for _, px := range link {
				px.SetBlackhole(!slices.Contains(nodes, n))
			}
		}
	}
	return r.rec.BeginFault("partition", nil, clients, note)
}

// Isolate blackholes every link of one client: seen from the nodes, the client process has
// stopped (no renewal goes out, nothing comes back). It returns the fault's ID for Heal.
func (r *Run) Isolate(client int, note string) int {
	for _, link := range r.proxies[client] {
		for _, px := range link {
			px.SetBlackhole(true)
		}
	}
	return r.rec.BeginFault("client paused", nil, []int{client}, note)
}

// Heal ends a Partition or an Isolate: the clients' links pass traffic again, and their
// connections are dropped so that requests swallowed meanwhile do not linger.
func (r *Run) Heal(fault int) {
	var clients []int
	open := false
	r.rec.View(func(h *History) { clients, open = slices.Clone(h.Faults[fault].Clients), h.Faults[fault].Open })
	if !open {
		return
	}
	for _, c := range clients {
		for _, link := range r.proxies[c] {
			for _, px := range link {
				px.SetBlackhole(false)
				px.Drop()
			}
		}
	}
	r.rec.EndFault(fault)
}

func (r *Run) healAll() {
	for _, links := range r.proxies {
		for _, link := range links {
			for _, px := range link {
				px.SetBlackhole(false)
				px.SetDelay(0, 0)
			}
		}
	}
	r.UnparkAll()
}

// SlowNode delays every client's traffic to and from node n by d in each direction.
func (r *Run) SlowNode(n int, d time.Duration) int {
	for c := range r.nClients {
		for _, px := range r.proxies[c][n] {
			px.SetDelay(d, d)
		}
	}
	return r.rec.BeginFault("slow node", []int{n}, nil, fmt.Sprintf("+%v each way", d))
}

// UnslowNode ends a SlowNode fault.
func (r *Run) UnslowNode(fault int) {
	var nodes []int
	r.rec.View(func(h *History) { nodes = slices.Clone(h.Faults[fault].Nodes) })
	for _, n := range nodes {
		for c := range r.nClients {
			for _, px := range r.proxies[c][n] {
				px.SetDelay(0, 0)
			}
		}
	}
	r.rec.EndFault(fault)
}

// process returns node n's redis-server; the Sentinel node has several, and the faults that
// stop or restart one process do not apply to it (FailoverNode does).
func (r *Run) process(n int) (*redisproc.Node, error) {
	if n == r.groupNode {
		return nil, fmt.Errorf("chaos: node %d is a Sentinel group, not one redis-server", n)
	}
	return r.nodes[n], nil
}

// KillNode kills node n with SIGKILL. It returns the fault's ID; RestartNode ends it.
func (r *Run) KillNode(n int) (int, error) {
	node, err := r.process(n)
	if err != nil {
		return -1, err
	}
	if err := node.Kill(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node down", []int{n}, nil, "kill -9"), nil
}

// RestartNode starts a killed node again (replaying its AOF when the scenario persists,
// empty otherwise) and ends the fault.
func (r *Run) RestartNode(ctx context.Context, n, fault int) error {
	node, err := r.process(n)
	if err != nil {
		return err
	}
	if err := node.Restart(ctx); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// CrashRestart kills node n and starts it again at once: with the scenario's persistence
// the node comes back with its keys, without it the node comes back empty.
func (r *Run) CrashRestart(ctx context.Context, n int) error {
	node, err := r.process(n)
	if err != nil {
		return err
	}
	what := "kill -9, restart without persistence (empty)"
	if r.Scenario.setup.persist {
		what = "kill -9, restart replaying the AOF (appendfsync always)"
	}
	f := r.rec.BeginFault("node restart", []int{n}, nil, what)
	err = node.Restart(ctx) // Restart kills the running process first
	r.rec.EndFault(f)
	return err
}

// PauseNode stops node n with SIGSTOP; ResumeNode ends it.
func (r *Run) PauseNode(n int) (int, error) {
	node, err := r.process(n)
	if err != nil {
		return -1, err
	}
	if err := node.Pause(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node paused", []int{n}, nil, "SIGSTOP"), nil
}

// ResumeNode continues a paused node with SIGCONT and ends the fault.
func (r *Run) ResumeNode(n, fault int) error {
	node, err := r.process(n)
	if err != nil {
		return err
	}
	if err := node.Resume(); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// jumpScript emulates a forward step of d milliseconds of one node's clock, as far as key
// expiry goes: every key with a TTL loses d ms of it, and a key whose TTL runs out is
// deleted. (libfaketime hangs Debian's redis-server at start, so the lab cannot step a real
// node's clock.) KEYS is fine here: a lab node holds a handful of keys. NewScriptServerSHA,
// not NewScript: the node computes the SHA-1 (SCRIPT LOAD), so the CLI, which imports this
// package, also starts in Go's FIPS 140-only mode, where SHA-1 in the process panics.
var jumpScript = redis.NewScriptServerSHA(`
local d = tonumber(ARGV[1])
local expired, shortened = 0, 0
for _, k in ipairs(redis.call("KEYS", "*")) do
  local t = redis.call("PTTL", k)
  if t > 0 then
    if t <= d then
      redis.call("DEL", k)
      expired = expired + 1
    else
      redis.call("PEXPIRE", k, t - d)
      shortened = shortened + 1
    end
  end
end
return {expired, shortened}
`)

// JumpNode makes node n's clock jump forward by d, emulated with jumpScript.
func (r *Run) JumpNode(ctx context.Context, n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := jumpScript.Run(ctx, r.direct[n], nil, d.Milliseconds()).Int64Slice()
	if err != nil {
		return fmt.Errorf("chaos: clock jump on node %d: %w", n, err)
	}
	r.rec.Event("clock jump", []int{n}, nil, fmt.Sprintf("+%v: %d keys expired, %d shortened", d, res[0], res[1]))
	return nil
}

// FailoverNode fails the Sentinel node n over to its replica with SENTINEL FAILOVER. The
// fault lasts until every Sentinel reports the replica as the master and every workload
// client's connection to the node reaches it: until then a client may still write to the old
// master, which no longer replicates to the new one, so those writes are lost with the old
// master's data when Sentinel makes it a replica. Just after, it notes for every key what
// the old master and the promoted replica hold (holder and fence counter), read directly:
// where they differ, the failover lost writes.
func (r *Run) FailoverNode(ctx context.Context, n int) error {
	if n != r.groupNode {
		return fmt.Errorf("chaos: node %d is not a Sentinel group", n)
	}
	ctx, cancel := context.WithTimeout(ctx, r.waitLimit())
	defer cancel()
	before, err := r.group.MasterAddr(ctx, groupMaster)
	if err != nil {
		return err
	}
	f := r.rec.BeginFault("failover", []int{n}, nil, "SENTINEL FAILOVER; ends when every client reaches the promoted replica")
	defer r.rec.EndFault(f)
	after, err := r.group.Failover(ctx, groupMaster)
	if err != nil {
		return err
	}
	r.rec.Note("node %d: the Sentinels promoted %s (the old master was %s)", n, after, before)
	oldM := redis.NewClient(&redis.Options{Addr: before, MaxRetries: -1})
	defer oldM.Close()
	newM := redis.NewClient(&redis.Options{Addr: after, MaxRetries: -1})
	defer newM.Close()
	want, err := runID(ctx, newM)
	if err != nil {
		return err
	}
	tick := time.NewTicker(r.Profile.SampleEvery)
	defer tick.Stop()
	for c := 0; c < len(r.conns); {
		if id, err := runID(ctx, r.conns[c][n]); err == nil && id == want {
			c++
			continue
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("chaos: waiting for client %d to reach the promoted replica of node %d: %w", c, n, ctx.Err())
		}
	}
	r.rec.EndFault(f)
	// Both servers side by side, for the note: the old master keeps its data until Sentinel
	// makes it a replica of the new one.
	both, err := redlock.New([]redis.UniversalClient{oldM, newM}, redlock.WithNodeTimeout(time.Second), redlock.WithReplicasAllowed())
	if err != nil {
		return err
	}
	defer both.Close()
	for _, key := range r.keys {
		st, err := both.Status(ctx, key)
		if err != nil {
			return err
		}
		o, p := st.Nodes[0], st.Nodes[1]
		r.rec.Note("node %d after the failover, %s: old master holder %q counter %d; promoted replica holder %q counter %d%s",
			n, key, o.Holder, o.Counter, p.Holder, p.Counter, failoverDiff(o, p))
	}
	return nil
}

// failoverDiff says how two servers' views of a key differ.
func failoverDiff(o, p redlock.NodeStatus) string {
	switch {
	case o.Err != nil || p.Err != nil:
		return fmt.Sprintf(" (read errors: %v, %v)", o.Err, p.Err)
	case o.Counter != p.Counter || o.Holder != p.Holder:
		return ": the promoted replica missed writes"
	}
	return ""
}

// runID returns the run_id of the server a client's next command reaches.
func runID(ctx context.Context, c *redis.Client) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", errors.New("chaos: no run_id in INFO server")
}
