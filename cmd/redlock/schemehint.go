package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"time"
)

// A node URL with the wrong scheme fails in ways that do not name the cause: a rediss:// URL
// for a port without TLS waits for a handshake that the server never answers (it reads the
// ClientHello as the start of a command), so the node looks hung; a redis:// URL for a TLS
// port gets its connection closed, reported as "EOF". When a node fails that way, the commands
// that report it probe its port once for the other protocol and say so (schemeHint).

// schemeProbeTimeout bounds one probe: the dial and the exchange together.
const schemeProbeTimeout = 300 * time.Millisecond

// schemeNode is what the probes know of one node address.
type schemeNode struct {
	tls  bool // named by a rediss:// URL
	once sync.Once
	hint string // set by the probe; "" when the port speaks the URL's protocol, or nothing answered
}

// schemeNodes are the TCP addresses named by the node URLs parsed last (parseNodeURLs).
var schemeNodes struct {
	mu     sync.Mutex
	byAddr map[string]*schemeNode
}

// noteSchemes records the scheme of each URL's address, for schemeHint, forgetting what an
// earlier list's probes found of the same address; unix sockets are left out (no TLS there).
// parseNodeURLs has refused an address named twice.
func noteSchemes(urls []nodeURL) {
	schemeNodes.mu.Lock()
	defer schemeNodes.mu.Unlock()
	if schemeNodes.byAddr == nil {
		schemeNodes.byAddr = map[string]*schemeNode{}
	}
	for _, u := range urls {
		if u.opts.Network != "unix" {
			schemeNodes.byAddr[u.opts.Addr] = &schemeNode{tls: u.opts.TLSConfig != nil}
		}
	}
}

// schemeNodeOf returns what is known of addr's scheme, nil for an address no URL named.
func schemeNodeOf(addr string) *schemeNode {
	schemeNodes.mu.Lock()
	defer schemeNodes.mu.Unlock()
	return schemeNodes.byAddr[addr]
}

// schemeHint returns, for a node that failed, a hint that its URL has the wrong scheme when
// its port speaks the other protocol ("" otherwise, and for an address no URL named). The first
// call for an address probes it, once, for at most schemeProbeTimeout: a redis:// node with a
// TLS handshake (then closed, nothing else sent), a rediss:// node with a plain PING (never
// AUTH, so no password leaves the process); later calls return what that probe found. The
// hint for a rediss:// node states the fact and does not advise dropping TLS: a plain answer
// proves nothing about who gave it. Safe for concurrent use.
func schemeHint(addr string) string {
	n := schemeNodeOf(addr)
	if n == nil {
		return ""
	}
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), schemeProbeTimeout)
		defer cancel()
		switch {
		case n.tls && speaksPlain(ctx, addr):
			n.hint = "this port answers plain Redis, without TLS: check the URL's port and scheme, or enable TLS on the server"
		case !n.tls && speaksTLS(ctx, addr):
			n.hint = "this port speaks TLS: use rediss://" + addr + ", with --tls-ca FILE for a private CA (and --tls-cert and --tls-key if the server asks for a client certificate)"
		}
	})
	return n.hint
}

// probeSchemes runs the probes of the failed nodes' addresses in parallel, so that a report
// of several failed nodes waits for one probe, not one after another.
func probeSchemes(addrs []string) {
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() { schemeHint(a) })
	}
	wg.Wait()
}

// withNodeHint is msg, a failure of the node at addr, with what tlsHint and, when the failure
// may come of a wrong scheme (mayBeScheme), schemeHint add to it.
func withNodeHint(addr, msg string) string {
	hinted := tlsHint(msg)
	if !mayBeScheme(addr, msg) {
		return hinted
	}
	if h := schemeHint(addr); h != "" && !strings.Contains(hinted, h) {
		hinted += "; " + h
	}
	return hinted
}

// serverReplies are the starts of Redis error replies that a failure may quote: the server
// answered in the URL's protocol, so its scheme is right and no probe is needed.
var serverReplies = []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR ", "LOADING", "MASTERDOWN", "READONLY", "BUSY", "MISCONF", "NOSCRIPT"}

// closedSigns are what a failure says when the server closed or broke the connection: what
// a TLS port does with a plain Redis request.
var closedSigns = []string{"EOF", "connection reset", "broken pipe", "invalid reply"}

// mayBeScheme reports whether msg, a failure of the node at addr, may come of a wrong scheme:
// for a redis:// URL, a connection the server closed (a TLS port does that; a plain one that
// hangs does not); for a rediss:// URL, anything but what proves TLS or the port: not a reply
// of the server's, a certificate problem or a refused connection. False for an address no URL
// named.
func mayBeScheme(addr, msg string) bool {
	n := schemeNodeOf(addr)
	if n == nil || strings.Contains(msg, "certificate") || strings.Contains(msg, "connection refused") {
		return false
	}
	for _, r := range serverReplies {
		if strings.Contains(msg, r) {
			return false
		}
	}
	if n.tls {
		return true
	}
	for _, c := range closedSigns {
		if strings.Contains(msg, c) {
			return true
		}
	}
	return false
}

// probeFailures runs the probes (probeSchemes) of the nodes whose failure, errs[i] for
// addrs[i], may come of a wrong scheme; nil errors and errNotWaited are skipped.
func probeFailures(addrs []string, errs []error) {
	var probe []string
	for i, err := range errs {
		if err != nil && !errors.Is(err, errNotWaited) && mayBeScheme(addrs[i], err.Error()) {
			probe = append(probe, addrs[i])
		}
	}
	probeSchemes(probe)
}

// speaksPlain reports whether addr answers PING in plain RESP: a status or an error reply
// ("+PONG", "-NOAUTH ...", "-DENIED ...").
func speaksPlain(ctx context.Context, addr string) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false
	}
	return strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")
}

// speaksTLS reports whether addr completes a TLS handshake, or answers it with a TLS alert
// (a server that wants a client certificate). The server's certificate is not checked: the
// probe only asks which protocol the port speaks, and closes the connection after the
// handshake.
func speaksTLS(ctx context.Context, addr string) bool {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a protocol probe, no data sent
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = conn.Close()
		return true
	}
	var oe *net.OpError // a TLS alert from the server is a "remote error"
	return errors.As(err, &oe) && oe.Op == "remote error"
}
