//go:build unix

package main

// Tests of reaching the nodes when one of them hangs: the PING preflight, shutdown and
// the commands.

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/embedded"
)

// What a node that hangs costs the commands: the preflight stops waiting
// once a quorum has answered, and no command waits at its end for the calls still written
// to the hung node.

// hungNode is a TCP server that accepts connections and never answers, as a Redis node
// stopped with SIGSTOP or cut off by a firewall that drops packets looks to a client. conns
// receives each accepted connection.
func hungNode(t *testing.T) (addr string, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-ch:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return ln.Addr().String(), ch
}

// liveAndHung returns the URLs of live embedded nodes followed by one hung node.
func liveAndHung(t *testing.T, live int) ([]nodeURL, <-chan net.Conn) {
	t.Helper()
	en, err := embedded.Start(live, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(en.Close)
	addr, conns := hungNode(t)
	urls, err := parseNodeURLs(strings.Join(append(en.URLs(), "redis://"+addr), ","), "--nodes", "")
	if err != nil {
		t.Fatal(err)
	}
	return urls, conns
}

// TestPingNodesStopsAtQuorum: with four live nodes and one that never answers, pingNodes
// returns once the three it needs have answered, without waiting for the hung node. The
// control needs all five and so cannot return before pingTimeout: the bound fails when the
// hung node is waited for. Every probe has ended when pingNodes returns: the hung node's
// connections are closed.
func TestPingNodesStopsAtQuorum(t *testing.T) {
	t.Parallel()
	urls, conns := liveAndHung(t, 4)
	hung := len(urls) - 1

	start := time.Now()
	errs := pingNodes(t.Context(), urls, 3)
	took := time.Since(start)
	answered := 0
	for _, err := range errs[:hung] {
		if err == nil {
			answered++
		}
	}
	if answered < 3 || !errors.Is(errs[hung], errNotWaited) || took >= pingTimeout/2 {
		t.Errorf("need 3: %d live nodes answered, the hung one %v, after %v; want 3 or more, not waited for, well before pingTimeout (%v)",
			answered, errs[hung], took, pingTimeout)
	}
	start = time.Now()
	errs = pingNodes(t.Context(), urls, len(urls))
	if took := time.Since(start); took < pingTimeout || errs[hung] == nil || !strings.Contains(errs[hung].Error(), "no answer within") {
		t.Errorf("control, need all 5: returned after %v with %v for the hung node; want pingTimeout (%v) and no answer", took, errs[hung], pingTimeout)
	}
	// Every probe has ended when pingNodes returns: the hung node's end of each connection
	// sees it closed (EOF or a reset), not the read deadline.
	dialled := 0
	for {
		select {
		case c := <-conns:
			dialled++
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("a probe of the hung node still holds its connection after pingNodes returned")
			}
			continue
		default:
		}
		break
	}
	if dialled == 0 {
		t.Errorf("the control never dialled the hung node")
	}
}

// TestShutdownDoesNotWaitForHungNode: a Client that has read a hung node (New's run_id check
// and a Status) is closed by shutdown well before the library's exec budget, the deadline at
// which its calls to that node end by themselves; the control, Client.Close before closing
// the go-redis clients, cannot return before it.
func TestShutdownDoesNotWaitForHungNode(t *testing.T) {
	t.Parallel()
	const nodeTimeout = 100 * time.Millisecond
	const execBudget = time.Second // the library's max(4 × node timeout, 1 s)
	for _, control := range []bool{false, true} {
		urls, _ := liveAndHung(t, 2)
		start := time.Now()
		clients := dialNodes(urls)
		c, err := redlock.New(clients, redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(t.Context(), "shutdown-test")
		if err != nil || st.Nodes[2].Err == nil || answered(st) != 2 {
			t.Fatalf("status with one hung node of three: %v, %+v", err, st)
		}
		if control {
			_ = c.Close()
			closeClients(clients)
		} else {
			shutdown(clients, 0, c)
		}
		took := time.Since(start)
		switch {
		case !control && took >= execBudget:
			t.Errorf("shutdown: New, Status and shutdown took %v; want less than the exec budget (%v)", took, execBudget)
		case control && took < execBudget:
			t.Errorf("control: New, Status and Close took %v; Close cannot return before the exec budget (%v)", took, execBudget)
		}
	}
}

// TestRealHungNodeDoesNotHoldCommands: with one node of five stopped (SIGSTOP) and default
// flags, status and top take no longer than the library's own bounds (New's run_id check,
// at most min(node timeout, 1 s), then the node timeout of the reads; top's Status reads of
// the stalled node are refused at once), and exec starts its command before the 2 s PING
// timeout and exits soon after it. Before, the preflight waited for the hung node's whole
// PING and every command's end waited for go-redis's read timeout: exec started 2.5 s late
// and ended 5 s after its command, status took 6 s, top 5 s. The bounds leave 1.5 s for
// starting the binary and the machine's load.
func TestRealHungNodeDoesNotHoldCommands(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 5)
	if err := cluster.Nodes()[4].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Nodes()[4].Resume() })
	const slack = 1500 * time.Millisecond
	readBound := time.Second + statusNodeTimeout + slack
	redlockBin(t) // built before the clock starts
	// A binary built with -race sleeps 1 s before it exits, to let reports come in; not here.
	noExitSleep := []string{"GORACE=atexit_sleep_ms=0"}

	start := time.Now()
	code, out, errOut := runBin(t, noExitSleep, "status", "--nodes", nodes, "hung-test")
	t.Logf("status took %v", time.Since(start))
	if took := time.Since(start); code != exitOK || !strings.Contains(out, "free") || took >= readBound {
		t.Errorf("status: exit code %d after %v, want 0 within %v; stdout %q, stderr %q", code, took, readBound, out, errOut)
	}

	start = time.Now()
	code, out, errOut = runBin(t, noExitSleep, "top", "--once", "--json", "--nodes", nodes)
	t.Logf("top took %v", time.Since(start))
	var doc topDoc
	if took := time.Since(start); code != exitOK || json.Unmarshal([]byte(out), &doc) != nil || doc.Answered != 4 || doc.Nodes[4].Answered || took >= readBound {
		t.Errorf("top: exit code %d, %d nodes answered after %v, want 0 and 4 within %v: %s%s", code, doc.Answered, took, readBound, out, errOut)
	}

	dir := t.TempDir()
	ran, ended := filepath.Join(dir, "ran"), filepath.Join(dir, "ended")
	start = time.Now()
	p := startBin(t, noExitSleep, "exec", "--nodes", nodes, "hung-test", "--", "sh", "-c", "touch "+ran+"; echo $REDLOCK_TOKEN > "+ended)
	code = p.wait(t, 30*time.Second)
	if code != exitOK {
		t.Fatalf("exec: exit code %d, stderr %q", code, p.stderr.String())
	}
	startedAt, endedAt := modTime(t, ran), modTime(t, ended)
	t.Logf("exec started its command after %v and exited %v after it ended", startedAt.Sub(start), p.exitAt.Sub(endedAt))
	if late := startedAt.Sub(start); late >= pingTimeout {
		t.Errorf("exec started its command %v after it was run; want less than the PING timeout (%v)", late, pingTimeout)
	}
	if after := p.exitAt.Sub(endedAt); after >= 2*cliNodeTimeout+slack {
		t.Errorf("exec exited %v after its command ended; want less than %v", after, 2*cliNodeTimeout+slack)
	}
	if token, err := os.ReadFile(ended); err != nil || strings.TrimSpace(string(token)) == "" {
		t.Errorf("the command got no token: %q, %v", token, err)
	} else if _, err := strconv.ParseUint(strings.TrimSpace(string(token)), 10, 64); err != nil {
		t.Errorf("token %q: %v", token, err)
	}
}
