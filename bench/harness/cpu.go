package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// selfCPU is the user plus system CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user plus system CPU time of process pid (redisproc.ProcCPU), or 0 when it
// cannot be read.
func procCPU(pid int) time.Duration {
	d, _ := redisproc.ProcCPU(pid)
	return d
}

// cpuCost is CPU time spent by a contender: the client's (this process's) and the nodes'.
type cpuCost struct{ client, server time.Duration }

// perLock divides the cost by n locks; -1 each (printed "–") when there is none or no lock.
func (c *cpuCost) perLock(n int) cpuCost {
	if c == nil || n <= 0 {
		return cpuCost{-1, -1}
	}
	return cpuCost{c.client / time.Duration(n), c.server / time.Duration(n)}
}

// nodePIDs returns the PIDs of the first n of the run's redis-server nodes.
func (r *runner) nodePIDs(n int) []int {
	pids := make([]int, n)
	for i := range pids {
		pids[i] = r.nodes[i].PID()
	}
	return pids
}

// pidsCPU is the CPU time of processes pids so far, added up (procCPU).
func pidsCPU(pids []int) time.Duration {
	var t time.Duration
	for _, pid := range pids {
		t += procCPU(pid)
	}
	return t
}

// cmdStats is INFO commandstats summed over nodes: calls and microseconds per command.
type cmdStats map[string][2]int64

// readCmdStats reads INFO commandstats from every client and adds them up.
func readCmdStats(ctx context.Context, cs []*redis.Client) cmdStats {
	out := cmdStats{}
	for _, c := range cs {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			name = strings.TrimPrefix(name, "cmdstat_")
			var calls, usec int64
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "calls":
					calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			e := out[name]
			out[name] = [2]int64{e[0] + calls, e[1] + usec}
		}
	}
	return out
}

// resetCmdStats clears INFO commandstats on every client.
func resetCmdStats(ctx context.Context, cs []*redis.Client) {
	for _, c := range cs {
		_ = c.ConfigResetStat(ctx).Err()
	}
}

// serverWork formats what the lock commands cost inside Redis per cycle: calls and
// microseconds per command name, leaving out the harness's own INFO and CONFIG. The total
// adds up only the commands in sent, those the client sends itself: INFO commandstats
// also counts the commands a script runs, and their time is inside the script's.
func serverWork(st cmdStats, ops int64, sent []string) (perOp time.Duration, detail string) {
	var total int64
	var parts []string
	for _, name := range []string{"evalsha", "eval", "set", "get", "del", "incr", "exists", "pexpire", "pttl"} {
		e, ok := st[name]
		if !ok || e[0] == 0 {
			continue
		}
		if slices.Contains(sent, name) {
			total += e[1]
		}
		parts = append(parts, fmt.Sprintf("%s %.1f×%.1f µs", strings.ToUpper(name), float64(e[0])/float64(ops), float64(e[1])/float64(e[0])))
	}
	if ops == 0 {
		return -1, ""
	}
	return time.Duration(float64(total) * float64(time.Microsecond) / float64(ops)), strings.Join(parts, ", ")
}
