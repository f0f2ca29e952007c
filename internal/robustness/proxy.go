package robustness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is an in-process TCP proxy on 127.0.0.1 in front of one target,
// which injects a LinkFault into the connections through it. The harness
// puts one on every etcd peer link, every gateway->etcd link and every
// gateway->S3 link.
//
// A connection's source is the proxy's Source, or, for etcd peer traffic
// (IdentifyPeers), the member named by the X-Server-From header of the
// first request on the connection, so that a fault can cut one member off
// from another although all members dial the same advertised peer URL.
type Proxy struct {
	// Name names the link in logs, such as "peer->member-2".
	Name string

	target   string
	ln       net.Listener
	source   string                 // static source, when not identifying peers
	memberOf func(id string) string // peer id (hex) -> member name, for IdentifyPeers
	rnd      func(n int64) int64    // delay jitter
	fault    atomic.Pointer[LinkFault]
	mu       sync.Mutex
	conns    map[*proxyConn]struct{}
	closed   bool
	wg       sync.WaitGroup
	accepted atomic.Int64
}

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	// Name names the link in logs. Required.
	Name string
	// Target is the host:port the proxy forwards to. Required.
	Target string
	// Source names every connection's source. Ignored with MemberOf.
	Source string
	// MemberOf, when set, makes the proxy read the first HTTP request
	// header of each connection and name its source
	// MemberOf(X-Server-From); it returns "" for an unknown id.
	MemberOf func(id string) string
	// Seed seeds the delay jitter.
	Seed uint64
}

// NewProxy listens on a free port of 127.0.0.1 and forwards to
// cfg.Target. Close it.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.Name == "" || cfg.Target == "" {
		return nil, errors.New("proxy: name and target are required")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", cfg.Name, err)
	}
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	p := &Proxy{
		Name:     cfg.Name,
		target:   cfg.Target,
		ln:       ln,
		source:   cfg.Source,
		memberOf: cfg.MemberOf,
		rnd: func(n int64) int64 {
			mu.Lock()
			defer mu.Unlock()
			return r.Int64N(n)
		},
		conns: make(map[*proxyConn]struct{}),
	}
	p.fault.Store(&LinkFault{})
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the host:port the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// URL returns http://host:port of the proxy.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Fault returns the fault in force.
func (p *Proxy) Fault() LinkFault { return *p.fault.Load() }

// SetFault puts f in force from now on, for the connections it affects.
// f.Reset aborts the affected connections open now; f.Drop closes them.
func (p *Proxy) SetFault(f LinkFault) {
	reset := f.Reset
	f.Reset = false
	p.fault.Store(&f)
	if !reset && !f.Drop {
		return
	}
	p.mu.Lock()
	var victims []*proxyConn
	for c := range p.conns {
		if f.affects(c.source.Load().(string)) {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.abort(reset)
	}
}

// Heal removes the fault.
func (p *Proxy) Heal() { p.SetFault(LinkFault{}) }

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		c.abort(false)
	}
	p.wg.Wait()
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client, server net.Conn
	source         atomic.Value  // string
	closed         chan struct{} // closed by abort
	once           sync.Once
}

// abort closes both sides; with rst, the client's side with a TCP RST.
func (c *proxyConn) abort(rst bool) {
	c.once.Do(func() {
		close(c.closed)
		if rst {
			if tc, ok := c.client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
		_ = c.client.Close()
		if c.server != nil {
			_ = c.server.Close()
		}
	})
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		c := &proxyConn{client: client, closed: make(chan struct{})}
		c.source.Store(p.source)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// peekLimit bounds the header read to identify a peer.
const peekLimit = 16 << 10

// serve forwards one connection until either side closes it.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		c.abort(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	var first []byte
	if p.memberOf != nil {
		_ = c.client.SetReadDeadline(time.Now().Add(5 * time.Second))
		head, source, err := readRequestHead(c.client, p.memberOf)
		_ = c.client.SetReadDeadline(time.Time{})
		if err != nil {
			return
		}
		first = head
		c.source.Store(source)
	}
	if f := p.fault.Load(); f.Drop && f.affects(c.source.Load().(string)) {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return // the target is down: the client sees its connection closed
	}
	c.server = server
	// A fault set between the check above and here must still reach c.
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pump(c, c.server, c.client, first, true); done <- struct{}{} }()
	go func() { p.pump(c, c.client, c.server, nil, false); done <- struct{}{} }()
	<-done
	c.abort(false)
	<-done
}

// readRequestHead reads bytes up to the end of the first HTTP request
// header and names the source from its X-Server-From header ("" if none or
// unknown). It returns the bytes read, to be forwarded first.
func readRequestHead(conn net.Conn, memberOf func(string) string) ([]byte, string, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 4096)
	for buf.Len() < peekLimit {
		n, err := conn.Read(chunk)
		buf.Write(chunk[:n])
		if i := bytes.Index(buf.Bytes(), []byte("\r\n\r\n")); i >= 0 {
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(buf.Bytes()[:i+4])))
			if _, err := tp.ReadLine(); err != nil {
				return buf.Bytes(), "", nil
			}
			header, _ := tp.ReadMIMEHeader()
			return buf.Bytes(), memberOf(header.Get("X-Server-From")), nil
		}
		if err != nil {
			if buf.Len() > 0 && errors.Is(err, io.EOF) {
				return buf.Bytes(), "", nil
			}
			return nil, "", err
		}
	}
	return buf.Bytes(), "", nil
}

// pump copies src to dst, chunk by chunk, applying the fault in force to
// each chunk. tx says the direction: dialer to target.
func (p *Proxy) pump(c *proxyConn, dst, src net.Conn, first []byte, tx bool) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	queue := make(chan chunk, 64)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for ch := range queue {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(ch.data); err != nil {
				c.abort(false)
				for range queue { // drain
				}
				return
			}
		}
	}()
	defer func() {
		close(queue)
		<-writerDone
	}()
	var lastDue time.Time
	send := func(data []byte) bool {
		source := c.source.Load().(string)
		// A blackhole holds the chunk (and, as the proxy stops reading,
		// everything behind it) until it is lifted: the peers see
		// silence, then the stream resumes intact, as TCP's
		// retransmissions make it after a partition heals. Swallowing
		// bytes instead would corrupt the stream (etcd's peers then
		// decode garbage), which no network does to a TCP connection.
		for {
			f := p.fault.Load()
			if !f.affects(source) {
				break
			}
			if f.Drop {
				return false
			}
			if !(tx && f.BlackholeTx || !tx && f.BlackholeRx) {
				break
			}
			select {
			case <-writerDone:
				return false
			case <-c.closed:
				return false
			case <-time.After(10 * time.Millisecond):
			}
		}
		f := p.fault.Load()
		due := time.Now()
		if f.affects(source) && f.Delay > 0 {
			due = due.Add(f.sampleDelay(p.rnd))
		}
		if due.Before(lastDue) {
			due = lastDue // never reorder
		}
		lastDue = due
		select {
		case queue <- chunk{data: data, due: due}:
			return true
		case <-writerDone:
			return false
		}
	}
	if len(first) > 0 && !send(first) {
		return
	}
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 && !send(buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}
