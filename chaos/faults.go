package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

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
		for n, px := range r.proxies[c] {
			px.SetBlackhole(!slices.Contains(nodes, n))
		}
	}
	return r.rec.BeginFault("partition", nil, clients, note)
}

// Isolate blackholes every link of one client: seen from the nodes, the client process has
// stopped (no renewal goes out, nothing comes back). It returns the fault's ID for Heal.
func (r *Run) Isolate(client int, note string) int {
	for _, px := range r.proxies[client] {
		px.SetBlackhole(true)
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
		for _, px := range r.proxies[c] {
			px.SetBlackhole(false)
			px.Drop()
		}
	}
	r.rec.EndFault(fault)
}

func (r *Run) healAll() {
	for _, ps := range r.proxies {
		for _, px := range ps {
			px.SetBlackhole(false)
			px.SetDelay(0, 0)
		}
	}
	r.UnparkAll()
}

// SlowNode delays every client's traffic to and from node n by d in each direction.
func (r *Run) SlowNode(n int, d time.Duration) int {
	for c := range r.nClients {
		r.proxies[c][n].SetDelay(d, d)
	}
	return r.rec.BeginFault("slow node", []int{n}, nil, fmt.Sprintf("+%v each way", d))
}

// UnslowNode ends a SlowNode fault.
func (r *Run) UnslowNode(fault int) {
	var nodes []int
	r.rec.View(func(h *History) { nodes = slices.Clone(h.Faults[fault].Nodes) })
	for _, n := range nodes {
		for c := range r.nClients {
			r.proxies[c][n].SetDelay(0, 0)
		}
	}
	r.rec.EndFault(fault)
}

// KillNode kills node n with SIGKILL. It returns the fault's ID; RestartNode ends it.
func (r *Run) KillNode(n int) (int, error) {
	if err := r.nodes[n].Kill(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node down", []int{n}, nil, "kill -9"), nil
}

// RestartNode starts a killed node again (replaying its AOF when the scenario persists,
// empty otherwise) and ends the fault.
func (r *Run) RestartNode(ctx context.Context, n, fault int) error {
	if err := r.nodes[n].Restart(ctx); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// CrashRestart kills node n and starts it again at once: with the scenario's persistence
// the node comes back with its keys, without it the node comes back empty.
func (r *Run) CrashRestart(ctx context.Context, n int) error {
	what := "kill -9, restart without persistence (empty)"
	if r.Scenario.setup.persist {
		what = "kill -9, restart replaying the AOF (appendfsync always)"
	}
	f := r.rec.BeginFault("node restart", []int{n}, nil, what)
	err := r.nodes[n].Restart(ctx) // Restart kills the running process first
	r.rec.EndFault(f)
	return err
}

// PauseNode stops node n with SIGSTOP; ResumeNode ends it.
func (r *Run) PauseNode(n int) (int, error) {
	if err := r.nodes[n].Pause(); err != nil {
		return -1, err
	}
	return r.rec.BeginFault("node paused", []int{n}, nil, "SIGSTOP"), nil
}

// ResumeNode continues a paused node with SIGCONT and ends the fault.
func (r *Run) ResumeNode(n, fault int) error {
	if err := r.nodes[n].Resume(); err != nil {
		return err
	}
	r.rec.EndFault(fault)
	return nil
}

// jumpScript emulates a forward step of d milliseconds of one node's clock, as far as key
// expiry goes: every key with a TTL loses d ms of it, and a key whose TTL runs out is
// deleted. (libfaketime hangs Debian's redis-server at start, so the lab cannot step a real
// node's clock.) KEYS is fine here: a lab node holds a handful of keys.
var jumpScript = redis.NewScript(`
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
