// Package embedded runs Redis nodes inside the current process: each node is a miniredis
// server listening on its own loopback TCP port, so any Redis client (go-redis, redis-cli)
// can reach it. It exists for the demo, for a local development mode and for tests that
// must not depend on a redis-server binary.
//
// # Expiry in real time
//
// Out of the box, miniredis keys expire only when the test calls FastForward. Every node
// started here instead runs with miniredis's clock-driven TTLs (Miniredis.ClockTTL): before
// each command touches the data, the node charges every TTL with the time that passed since
// the previous command and drops the keys whose TTL ran out. A key is therefore charged only
// for time after the command that set it, and is gone for the first command that arrives
// once its TTL has fully elapsed. It may live slightly LONGER than its TTL (by the few
// microseconds between a command's arrival and its clock reading), never shorter.
//
// Longer is the safe direction for a lock. A Redlock holder counts its validity from the
// moment it sent the acquire, which is before the key was set, and subtracts a drift
// allowance on top. A key that outlives its TTL only makes the next holder wait a little
// longer. A key that vanished early would let a second holder in while the first still
// believes its lock is valid, which is exactly the failure a lock must not have.
//
// The obvious alternative, a goroutine that calls FastForward every few milliseconds with
// the time elapsed since its last tick, gets this direction wrong: a key set just before a
// tick is charged for the whole interval, so it can expire up to one tick (or one scheduling
// delay of that goroutine) early. That is why no such goroutine is used.
//
// The clock is the host's wall clock, as for a real Redis server, which also stores
// expiry deadlines as wall-clock times: a step of the system clock moves the expiry of every
// embedded node at once. FastForward and SetTime on [Nodes.Servers] still work, for tests
// that want to expire keys on one node ahead of time or to simulate a clock jump there.
package embedded

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall"

	"github.com/alicebob/miniredis/v2"
)

// Nodes is a set of independent embedded Redis nodes started by [Start]. Its methods are
// safe for concurrent use. Call [Nodes.Close] to stop them.
type Nodes struct {
	servers []*miniredis.Miniredis
	addrs   []string

	closeOnce sync.Once
}

// Start starts n independent embedded Redis nodes on 127.0.0.1, each with real-time key
// expiry (see the package documentation). With ports nil or empty, the operating system
// picks a free port for every node. Otherwise ports must hold exactly n distinct ports in
// 1..65535, and node i listens on ports[i]; a port that is already taken is an error naming
// it. On any error, the nodes already started are stopped again.
func Start(n int, ports []int) (*Nodes, error) {
	if n < 1 {
		return nil, fmt.Errorf("embedded: need at least 1 node, got %d", n)
	}
	if len(ports) > 0 {
		if len(ports) != n {
			return nil, fmt.Errorf("embedded: %d ports given for %d nodes; give one port per node or none", len(ports), n)
		}
		seen := make(map[int]bool, n)
		for _, p := range ports {
			if p < 1 || p > 65535 {
				return nil, fmt.Errorf("embedded: port %d is outside 1..65535", p)
			}
			if seen[p] {
				return nil, fmt.Errorf("embedded: port %d is given twice", p)
			}
			seen[p] = true
		}
	}

	ns := &Nodes{}
	for i := range n {
		port := 0
		if len(ports) > 0 {
			port = ports[i]
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.StartAddr(addr); err != nil {
			ns.Close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("embedded: node %d: port %d on 127.0.0.1 is already in use", i, port)
			}
			return nil, fmt.Errorf("embedded: node %d: listen on %s: %w", i, addr, err)
		}
		ns.servers = append(ns.servers, m)
		ns.addrs = append(ns.addrs, m.Addr())
	}
	return ns, nil
}

// Addrs returns the nodes' addresses in "127.0.0.1:PORT" form, in node order.
func (ns *Nodes) Addrs() []string {
	return append([]string(nil), ns.addrs...)
}

// URLs returns the nodes' addresses as "redis://127.0.0.1:PORT" URLs, in node order, ready
// for redis.ParseURL.
func (ns *Nodes) URLs() []string {
	urls := make([]string, len(ns.addrs))
	for i, a := range ns.addrs {
		urls[i] = "redis://" + a
	}
	return urls
}

// Servers returns the miniredis servers behind the nodes, in node order, for tests and
// fault injection (FastForward, SetError, Close and Restart of a single node, direct
// inspection of keys).
func (ns *Nodes) Servers() []*miniredis.Miniredis {
	return append([]*miniredis.Miniredis(nil), ns.servers...)
}

// Close stops every node and closes its client connections. Nodes start no goroutine of
// their own, so nothing is left running afterwards. Close is idempotent and safe to call
// concurrently.
func (ns *Nodes) Close() {
	ns.closeOnce.Do(func() {
		for _, m := range ns.servers {
			m.Close()
		}
	})
}
