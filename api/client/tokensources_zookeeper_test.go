package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"fencegate/api"
	"fencegate/api/client"
	zklock "fencegate/api/client/tokensource/zookeeper"
	"fencegate/internal/zookeeper"
)

// zkSessionTimeout is the session timeout the tests' ZooKeeper clients ask
// for; the server grants it (it lies within 2 to 20 of its ticks).
const zkSessionTimeout = 3 * time.Second

// connectZK opens a ZooKeeper session at addr, waits until it is
// established, and closes it when the test finishes, waiting until its
// goroutines have ended.
func connectZK(tb testing.TB, addr string) *zk.Conn {
	tb.Helper()
	conn, events, err := zk.Connect([]string{addr}, zkSessionTimeout, zk.WithLogger(quietZK{}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close()
		for range events { // closed once the connection's goroutines are done
		}
	})
	for ev := range events {
		if ev.State == zk.StateHasSession {
			return conn
		}
	}
	tb.Fatalf("zookeeper: no session at %s", addr)
	return nil
}

// quietZK drops the ZooKeeper client's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// TestTokenSourceZooKeeperLock: the lock recipe on a real ZooKeeper, token
// = the lock znode's czxid. Client 1 holds the lock and client 2 waits;
// client 1's connection stops carrying bytes (a process paused, a
// partition) for longer than its session timeout, so the server expires
// the session and deletes client 1's ephemeral znode; client 2 takes the
// lock with a larger czxid and writes through the gateway; client 1's late
// write with its token is refused 409, and S3, read with minio-go, holds
// client 2's bytes.
func TestTokenSourceZooKeeperLock(t *testing.T) {
	server := zookeeper.Start(t)
	e := newEnv(t, nil) // tokens from ZooKeeper: only "none" applies
	ctx := context.Background()
	c := &client.Client{BaseURL: e.url}
	proxy := newPausableProxy(t, server.Addr)
	conn1 := connectZK(t, proxy.addr())
	t.Cleanup(proxy.close) // before conn1's close: cut its reconnect attempts short
	conn2 := connectZK(t, server.Addr)

	token1, err := zklock.NewLock(conn1, "/locks/report", nil).Lock(ctx)
	if err != nil {
		t.Fatalf("client 1's lock: %v", err)
	}
	type grant struct {
		token api.Token
		err   error
	}
	granted := make(chan grant, 1)
	go func() {
		token, err := zklock.NewLock(conn2, "/locks/report", nil).Lock(ctx)
		granted <- grant{token, err}
	}()
	waitChildren(t, conn2, "/locks/report", 2) // client 2 is queued behind client 1
	select {
	case g := <-granted:
		t.Fatalf("client 2 got the lock (%d, %v) while client 1 holds it", g.token, g.err)
	default:
	}

	proxy.pause() // client 1 stalls; its session expires on the server
	var token2 api.Token
	select {
	case g := <-granted:
		if g.err != nil {
			t.Fatalf("client 2's lock: %v", g.err)
		}
		token2 = g.token
	case <-time.After(30 * zkSessionTimeout):
		t.Fatalf("client 2 not granted 30 session timeouts after client 1 stalled")
	}
	t.Logf("czxid tokens: client 1 %#x, client 2 %#x", uint64(token1), uint64(token2))
	if token2 <= token1 {
		t.Fatalf("client 2's token %d not above client 1's %d", token2, token1)
	}
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", token2, strings.NewReader("client 2's report")); err != nil {
		t.Fatalf("client 2's write: %v", err)
	}
	// Client 1 wakes up, still believing it holds the lock.
	_, err = c.PutObject(ctx, e.bucket, "report.csv", token1, strings.NewReader("client 1's report"))
	var stale *api.StaleTokenError
	if !errors.Is(err, api.ErrStaleToken) || !errors.As(err, &stale) || stale.HighWaterMark != token2 {
		t.Fatalf("client 1's late write = %v; want 409 stale with high-water mark %d", err, token2)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != "client 2's report" || token != token2.String() {
		t.Fatalf("S3 holds %q with token %q; want client 2's report with %d", body, token, token2)
	}
}

// TestZooKeeperSequenceIsNotAToken: across two lock paths, and across a
// lock path deleted and made again (as ZooKeeper does to Curator's empty
// container znodes), the sequence numbers start again at 0 while czxids
// keep growing: only czxid orders the grants.
func TestZooKeeperSequenceIsNotAToken(t *testing.T) {
	server := zookeeper.Start(t)
	conn := connectZK(t, server.Addr)
	ctx := context.Background()
	type grant struct {
		seq   string
		token api.Token
	}
	take := func(path string) grant {
		t.Helper()
		l := zklock.NewLock(conn, path, nil)
		token, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		children, _, err := conn.Children(path)
		if err != nil || len(children) != 1 {
			t.Fatalf("children of %s = %v, %v", path, children, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		return grant{seq: children[0][strings.LastIndex(children[0], "-")+1:], token: token}
	}
	grants := []grant{take("/locks/a"), take("/locks/a"), take("/locks/b")}
	if err := conn.Delete("/locks/a", -1); err != nil {
		t.Fatal(err)
	}
	grants = append(grants, take("/locks/a"))
	t.Logf("grants (sequence, czxid): %v", grants)
	wantSeq := []string{"0000000000", "0000000001", "0000000000", "0000000000"}
	for i, g := range grants {
		if g.seq != wantSeq[i] {
			t.Errorf("grant %d has sequence %s; want %s", i, g.seq, wantSeq[i])
		}
		if i > 0 && g.token <= grants[i-1].token {
			t.Errorf("grant %d has czxid %d, not above grant %d's %d", i, g.token, i-1, grants[i-1].token)
		}
	}
}

// waitChildren waits until path has n children.
func waitChildren(tb testing.TB, conn *zk.Conn, path string, n int) {
	tb.Helper()
	for range 600 {
		children, _, err := conn.Children(path)
		if err == nil && len(children) == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s never had %d children", path, n)
}

// pausableProxy forwards TCP connections to a target until pause is
// called; from then on it carries no more bytes either way, on the
// connections it has and on new ones, as a stalled process or a partition
// would, until the test finishes.
type pausableProxy struct {
	ln        net.Listener
	target    string
	stopped   chan struct{} // closed by pause
	done      chan struct{} // closed by close
	pauseOnce sync.Once
	closeOnce sync.Once

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// newPausableProxy listens on a free port of 127.0.0.1 and forwards to
// target until the test finishes.
func newPausableProxy(tb testing.TB, target string) *pausableProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pausableProxy{ln: ln, target: target, stopped: make(chan struct{}), done: make(chan struct{})}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *pausableProxy) addr() string { return p.ln.Addr().String() }

// pause stops carrying bytes.
func (p *pausableProxy) pause() { p.pauseOnce.Do(func() { close(p.stopped) }) }

// close closes the listener and every connection, and waits for the
// proxy's goroutines. It is safe to call more than once.
func (p *pausableProxy) close() {
	p.closeOnce.Do(func() {
		close(p.done)
		p.ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

func (p *pausableProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		select {
		case <-p.done:
			in.Close()
			out.Close()
		default:
			p.conns = append(p.conns, in, out)
			p.wg.Go(func() { p.pump(out, in) })
			p.wg.Go(func() { p.pump(in, out) })
		}
		p.mu.Unlock()
	}
}

// pump copies src to dst while the proxy is not paused.
func (p *pausableProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.stopped:
			<-p.done // hold the bytes back until the test finishes
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}
