// Package faultproxy is a TCP proxy for fault injection in tests, benchmarks and the chaos
// lab: it sits between one client and one Redis node on loopback and can delay traffic in
// each direction, swallow it (a blackhole: the node looks hung), refuse new connections, or
// drop the open ones. A network partition is a set of proxies, one per (client, node) pair,
// some of them blackholed.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from Addr to a target address. Its methods are safe for
// concurrent use. Every goroutine it starts is waited for by Close.
type Proxy struct {
	target string

	mu        sync.Mutex
	ln        net.Listener
	addr      string
	up, down  time.Duration // delay client→node, node→client
	blackhole bool
	// partitioned (SetPartitioned) is a blackhole that also holds back closes and dials
	// until healed is closed.
	partitioned bool
	healed      chan struct{}
	refusing    bool
	closed      bool
	conns       map[*link]struct{}

	wg sync.WaitGroup
}

// link is one proxied connection: the client side and the node side.
type link struct {
	client, node net.Conn
	once         sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		l.node.Close()
	})
}

// Start listens on a free loopback port and forwards to target ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, addr: ln.Addr().String(), conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr is the address clients dial instead of the node's.
func (p *Proxy) Addr() string { return p.addr }

// SetDelay delays every chunk of bytes by up on its way to the node and by down on its way
// back, preserving order, for open and new connections alike. Zero means no delay.
func (p *Proxy) SetDelay(up, down time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up, p.down = up, down
}

// SetBlackhole makes the proxy swallow everything in both directions while on: clients
// connect and send, and never hear back, as with a node stopped by SIGSTOP or a partition
// that drops packets. Bytes swallowed are lost for good.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
}

// SetPartitioned is a stricter blackhole, for a network partition or a stopped process:
// while on, bytes in both directions are swallowed, a side that closes its connection is
// not closed on the other side, and a new connection is accepted but not forwarded, until
// the partition ends; then the closes held back happen and the new connections are dialled.
// Without it (SetBlackhole) the proxy passes a close through at once, which a real partition
// would not: a PostgreSQL session whose client gave up would end on the server at once.
func (p *Proxy) SetPartitioned(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.partitioned || p.closed {
		return
	}
	p.partitioned = on
	if on {
		p.healed = make(chan struct{})
	} else {
		close(p.healed)
	}
}

// untilHealed waits while the proxy is partitioned (returning at once otherwise, or when the
// proxy closes).
func (p *Proxy) untilHealed() {
	p.mu.Lock()
	part, healed := p.partitioned, p.healed
	p.mu.Unlock()
	if part {
		<-healed
	}
}

// SetRefuse closes the listening socket while on, so that new connections are refused
// (ECONNREFUSED), and drops the open ones; off listens again on the same port.
func (p *Proxy) SetRefuse(on bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || on == p.refusing {
		return nil
	}
	p.refusing = on
	if on {
		err := p.ln.Close()
		p.dropLocked()
		return err
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.refusing = true
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Drop closes every open connection; new ones are accepted as usual.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked()
}

func (p *Proxy) dropLocked() {
	for l := range p.conns {
		l.close()
	}
}

// Close stops listening, drops every connection and waits for the proxy's goroutines.
// It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		if p.partitioned {
			p.partitioned = false
			close(p.healed)
		}
		p.closed = true
		if !p.refusing {
			p.ln.Close()
		}
		p.dropLocked()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.untilHealed() // a partition: the connection goes nowhere until it ends
		n, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, node: n}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.conns[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(l, c, n, true)
		go p.pipe(l, n, c, false)
	}
}

// chunk is bytes read at one moment, due for delivery later.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from src to dst through a delay queue. It ends when either side closes, and
// then closes the whole link.
func (p *Proxy) pipe(l *link, src, dst net.Conn, toNode bool) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	queue := make(chan chunk, 1024)
	writerDone := make(chan struct{})
	go func() { // owned by pipe: pipe waits for writerDone before returning
		defer close(writerDone)
		for ch := range queue {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d) // the injected latency itself
			}
			if _, err := dst.Write(ch.b); err != nil {
				l.close()
				for range queue { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hole, delay := p.blackhole || p.partitioned, p.down
			if toNode {
				delay = p.up
			}
			p.mu.Unlock()
			if !hole {
				queue <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay)}
			}
		}
		if err != nil {
			p.mu.Lock()
			part := p.partitioned
			p.mu.Unlock()
			if !part && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.close()
			}
			break
		}
	}
	close(queue)
	<-writerDone
	p.untilHealed() // a close does not cross a partition
}
