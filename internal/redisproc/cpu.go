package redisproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of utime and stime in /proc/PID/stat.
const clockTick = 10 * time.Millisecond

// CPU returns the user plus system CPU time the node's running process has used so far,
// read from /proc/PID/stat (Linux; 10 ms resolution). It returns an error when the node is
// not running or /proc cannot be read. Benchmarks take the difference of two readings to
// price what the servers spend per operation.
func (n *Node) CPU() (time.Duration, error) {
	pid := n.PID()
	if pid == 0 {
		return 0, fmt.Errorf("redisproc: node %d is not running", n.index)
	}
	return ProcCPU(pid)
}

// ProcCPU returns the user plus system CPU time of process pid, from /proc/PID/stat.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("redisproc: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14, stime 15
	if len(f) < 13 {
		return 0, fmt.Errorf("redisproc: /proc/%d/stat: unexpected format", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("redisproc: /proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(u+st) * clockTick, nil
}
