package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// errForeignServer means that a server other than the one just started
// answered on the node's port.
var errForeignServer = errors.New("another redis-server answered on the port")

// probe checks that the server on addr answers PING and is process pid. The
// identity check matters because the port was free when chosen but another
// process may have bound it before our server did.
func probe(ctx context.Context, addr string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return err
		}
	}
	r := bufio.NewReader(conn)

	// A server still loading its AOF answers PING with -LOADING.
	reply, err := roundTrip(conn, r, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("unexpected PING reply %q", reply)
	}
	info, err := roundTrip(conn, r, "INFO", "server")
	if err != nil {
		return err
	}
	for line := range strings.Lines(info) {
		if got, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if got != strconv.Itoa(pid) {
				return fmt.Errorf("%w (pid %s, want %d)", errForeignServer, got, pid)
			}
			return nil
		}
	}
	return errors.New("no process_id in INFO server reply")
}

// roundTrip sends one command and reads a simple-string, error or bulk-string
// reply, which is all the probe needs.
func roundTrip(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("server replied %q", line[1:])
	case '$':
		size, err := strconv.Atoi(line[1:])
		if err != nil || size < 0 {
			return "", fmt.Errorf("unexpected bulk header %q", line)
		}
		buf := make([]byte, size+2) // payload and CRLF
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:size]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
