package main

// redlock dev: N embedded Redis nodes in this process, for trying exec, status and top
// without installing Redis.

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/internal/embedded"
)

const devAbout = `
Runs N Redis nodes inside this process, on 127.0.0.1, until interrupted (Ctrl-C, SIGTERM),
so that exec and status can be tried without installing Redis. Node i listens on port
PORT+i. Keys expire in real time; nothing is persisted, so stopping the nodes forgets
every lock and fence counter (tokens stay increasing: counters are seeded from the clock).

It prints on stdout the one line to paste into other terminals:

  export REDLOCK_NODES=redis://127.0.0.1:7101,...

and then, for example, in two terminals at once:

  redlock exec --wait 1m my-job -- sh -c 'echo "token $REDLOCK_TOKEN"; sleep 10'

These are development nodes: one process, one machine. Do not protect anything real
with them.`

const (
	devDefaultNodes = 5
	devDefaultPort  = 7101
	devMaxNodes     = 99
)

func runDev(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("dev", "[-n N] [--port PORT]", devAbout)
	n, port := new(int), new(int)
	intVar(fs, n, "n", devDefaultNodes, fmt.Sprintf("the number `N` of nodes, 1 to %d", devMaxNodes))
	intVar(fs, port, "port", devDefaultPort, "`PORT` of the first node; node i listens on PORT+i (0: let the system choose free ports)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *n < 1 || *n > devMaxNodes {
		return usageErrorf("dev: -n %d is outside [1, %d]", *n, devMaxNodes)
	}
	var ports []int
	if *port != 0 {
		if *port < 1 || *port+*n-1 > 65535 {
			return usageErrorf("dev: ports %d..%d are outside 1..65535", *port, *port+*n-1)
		}
		for i := range *n {
			ports = append(ports, *port+i)
		}
	}
	ns, err := embedded.Start(*n, ports)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "embedded: ")
		if strings.Contains(msg, "already in use") {
			msg += "; is another 'redlock dev' running? Choose other ports with --port"
		}
		return fmt.Errorf("dev: %s", msg)
	}
	defer ns.Close()

	addrs := ns.Addrs()
	fmt.Fprintf(e.stderr, "redlock dev: %d embedded Redis nodes (%s), keys expire in real time, nothing is persisted. Ctrl-C stops them.\n",
		len(addrs), strings.Join(addrs, ", "))
	fmt.Fprintf(e.stdout, "export %s=%s\n", nodesEnv, strings.Join(ns.URLs(), ","))
	fmt.Fprintf(e.stderr, "Paste the export line above into other terminals (or pass its value to --nodes), then try, in two of them:\n"+
		"  redlock exec --wait 1m my-job -- sh -c 'echo \"token $REDLOCK_TOKEN\"; sleep 10'\n"+
		"  redlock status my-job\n")
	<-ctx.Done()
	fmt.Fprintf(e.stderr, "redlock dev: stopped\n")
	return nil
}
