package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// slowPool is the S3 connection pool of the slow-client tests: smaller
// than the number of slow clients, so that without a bound on them they
// hold every connection.
const (
	slowPool    = 4
	slowClients = 6
)

// startGatewayWithPool is startGateway with an S3 pool of conns
// connections.
func (e *env) startGatewayWithPool(tb testing.TB, cfg gateway.Config, conns int) {
	tb.Helper()
	e.startGatewayWithS3(tb, cfg, s3.Config{MaxConnsPerHost: conns})
}

// startGatewayWithS3 is startGateway with the S3 backend's pool and
// timeouts taken from s3cfg (its endpoint and credentials are the shared
// S3 server's).
func (e *env) startGatewayWithS3(tb testing.TB, cfg gateway.Config, s3cfg s3.Config) {
	tb.Helper()
	e.etcdCalls = nil
	client := e.etcd.Client(tb)
	store, err := tokenstore.New(client, tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	e.store = store
	s3cfg.Endpoint = sharedS3.Endpoint()
	s3cfg.AccessKeyID, s3cfg.SecretAccessKey = sharedS3.AccessKey, sharedS3.SecretKey
	s3cfg.UsePathStyle = true
	backend, err := s3.New(context.Background(), s3cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(cfg, store, backend)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
}

// dialSlow opens a raw TCP connection to the gateway with a small receive
// buffer, so that a client that never reads makes the server block soon.
func dialSlow(tb testing.TB, url string) net.Conn {
	tb.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// bigObjectSize is the size of the object that slow readers ask for.
const bigObjectSize = 4 << 20

// startSlowReaders stores an object "big" of bigObjectSize bytes (through
// S3) and an object "small" (through the gateway, token 5), then opens n
// connections that each ask for "big" and never read the answer, and
// gives them a second to take S3 connections and fill their buffers.
func startSlowReaders(tb testing.TB, e *env, n int) []net.Conn {
	tb.Helper()
	big := bytes.Repeat([]byte("x"), bigObjectSize)
	if _, err := e.minio.PutObject(context.Background(), e.bucket, "big", bytes.NewReader(big), bigObjectSize, minio.PutObjectOptions{}); err != nil {
		tb.Fatal(err)
	}
	if r := e.put(tb, "small", 5, "hello"); r.status != http.StatusCreated {
		tb.Fatalf("seed small = %v", r)
	}
	var conns []net.Conn
	for range n {
		conn := dialSlow(tb, e.url)
		fmt.Fprintf(conn, "GET /v1/objects/%s/big HTTP/1.1\r\nHost: fencegate\r\n\r\n", e.bucket)
		conns = append(conns, conn)
	}
	time.Sleep(time.Second)
	return conns
}

// liveRequest sends req within a liveness bound of 30 seconds (a bound on
// hanging, not a measure of speed) and returns its status.
func liveRequest(tb testing.TB, req *http.Request) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("%s %s while slow clients hold the gateway: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		tb.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode
}

// checkOthersServed checks that a small GET and a small PUT from another
// client are answered while the slow clients are connected.
func checkOthersServed(t *testing.T, e *env) {
	t.Helper()
	get, _ := http.NewRequest(http.MethodGet, e.objectURL("small"), nil)
	if got := liveRequest(t, get); got != http.StatusOK {
		t.Errorf("small GET = %d; want 200", got)
	}
	put, _ := http.NewRequest(http.MethodPut, e.objectURL("new"), strings.NewReader("fresh"))
	put.Header.Set(api.HeaderFenceToken, "7")
	if got := liveRequest(t, put); got != http.StatusCreated {
		t.Errorf("small PUT = %d; want 201", got)
	}
}

// waitCut reads what is left on a slow client's connection and returns
// how many bytes arrived in all before the gateway closed it, or fails if
// it stays open past the liveness bound.
func waitCut(tb testing.TB, conn net.Conn) int64 {
	tb.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	n, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		tb.Fatalf("slow client's connection still open after %d bytes", n)
	}
	return n
}

// TestSlowReadersDoNotStallS3 connects more clients than the S3 pool has
// connections, each asking for a large object and never reading the
// answer. Each is cut off once it takes no chunk within
// TransferChunkTimeout, which closes its S3 body and gives its connection
// back: a small GET and a small PUT from another client are answered.
func TestSlowReadersDoNotStallS3(t *testing.T) {
	e := newStackEnv(t)
	e.startGatewayWithPool(t, gateway.Config{TransferChunkTimeout: 200 * time.Millisecond}, slowPool)
	conns := startSlowReaders(t, e, slowClients)
	checkOthersServed(t, e)
	for i, conn := range conns {
		if n := waitCut(t, conn); n >= bigObjectSize {
			t.Errorf("slow reader %d got %d bytes, the whole object: want it cut off", i, n)
		}
	}
	if got := sample(e.scrape(t), "fencegate_slow_clients_cut_total", map[string]string{"direction": "download"}); got != slowClients {
		t.Errorf("fencegate_slow_clients_cut_total{direction=download} = %v; want %d", got, slowClients)
	}
}

// TestStalledSendersDoNotStallS3 connects more clients than the S3 pool
// has connections, each announcing a body larger than the buffer (so that
// it streams to S3) and sending almost none of it. Each is cut off once it
// sends no chunk within TransferChunkTimeout, which aborts its S3 PUT: no
// partial object is stored, and a small GET and a small PUT from another
// client are answered.
func TestStalledSendersDoNotStallS3(t *testing.T) {
	e := newStackEnv(t)
	e.startGatewayWithPool(t, gateway.Config{TransferChunkTimeout: 200 * time.Millisecond, BufferBytes: 64 << 10}, slowPool)
	if r := e.put(t, "small", 5, "hello"); r.status != http.StatusCreated {
		t.Fatalf("seed small = %v", r)
	}
	var conns []net.Conn
	for i := range slowClients {
		conn := dialSlow(t, e.url)
		fmt.Fprintf(conn, "PUT /v1/objects/%s/stalled-%d HTTP/1.1\r\nHost: fencegate\r\n%s: 5\r\nContent-Length: %d\r\n\r\nfirst bytes",
			e.bucket, i, api.HeaderFenceToken, 1<<20)
		conns = append(conns, conn)
	}
	time.Sleep(time.Second)
	checkOthersServed(t, e)
	for i, conn := range conns {
		waitCut(t, conn)
		if _, _, ok := e.stored(t, fmt.Sprintf("stalled-%d", i)); ok {
			t.Errorf("stalled-%d exists in S3; want no object from a body cut short", i)
		}
	}
	if got := sample(e.scrape(t), "fencegate_slow_clients_cut_total", map[string]string{"direction": "upload"}); got != slowClients {
		t.Errorf("fencegate_slow_clients_cut_total{direction=upload} = %v; want %d", got, slowClients)
	}
}

// TestTransferDeadlinesBoundOnlyTheClient checks that the transfer
// deadlines bound the client and nothing else: a gateway that pauses
// longer than TransferChunkTimeout between reading a request's headers and
// its body (here a hook after the fence check; in life a slow etcd or S3)
// still writes bodies of every shape, and a client that reads its answers
// promptly gets them whole, twice on one keep-alive connection.
func TestTransferDeadlinesBoundOnlyTheClient(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := newEnv(t, gateway.Config{TransferChunkTimeout: timeout, BufferBytes: 64 << 10, TestHooks: &gateway.TestHooks{
		AfterFenceCheck: func(context.Context, api.Resource, api.Token) { time.Sleep(3 * timeout) },
	}})
	streamed := strings.Repeat("s", 1<<20)
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"buffered", "hello"},
		{"streamed", streamed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.put(t, tt.name, 5, tt.body); r.status != http.StatusCreated {
				t.Fatalf("PUT of a %d-byte body = %v; want 201", len(tt.body), r)
			}
			if got, _, _ := e.stored(t, tt.name); got != tt.body {
				t.Fatalf("S3 holds %d bytes; want the %d sent", len(got), len(tt.body))
			}
		})
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodGet, e.objectURL("streamed"), nil)
		r := sendWith(t, client, req)
		if r.status != http.StatusOK || string(r.body) != streamed {
			t.Fatalf("GET %d = %d with %d bytes; want 200 with %d", i, r.status, len(r.body), len(streamed))
		}
		time.Sleep(3 * timeout) // past the last chunk's deadline, before the next request
		req, _ = http.NewRequest(http.MethodPut, e.objectURL("after-get"), strings.NewReader("x"))
		req.Header.Set(api.HeaderFenceToken, fmt.Sprint(6+i))
		if r := sendWith(t, client, req); r.status/100 != 2 {
			t.Fatalf("PUT %d on the GET's connection = %v; want 2xx", i, r)
		}
	}
}

// TestS3ConnectionWaitIsBounded holds every connection of a pool of two
// with slow readers that the transfer deadline spares (it is a minute
// here): a request that needs S3 meanwhile waits at most ConnWaitTimeout
// for a connection, and is answered 504 upstream-timeout rather than
// left hanging. Once the slow readers go, the pool serves again.
func TestS3ConnectionWaitIsBounded(t *testing.T) {
	e := newStackEnv(t)
	e.startGatewayWithS3(t, gateway.Config{TransferChunkTimeout: time.Minute},
		s3.Config{MaxConnsPerHost: 2, ConnWaitTimeout: 300 * time.Millisecond})
	conns := startSlowReaders(t, e, 2)
	get, _ := http.NewRequest(http.MethodGet, e.objectURL("small"), nil)
	put, _ := http.NewRequest(http.MethodPut, e.objectURL("new"), strings.NewReader("fresh"))
	put.Header.Set(api.HeaderFenceToken, "7")
	for _, req := range []*http.Request{get, put} {
		if got := liveRequest(t, req); got != http.StatusGatewayTimeout {
			t.Errorf("%s while the pool is held = %d; want 504", req.Method, got)
		}
	}
	if _, _, ok := e.stored(t, "new"); ok {
		t.Errorf("the PUT answered 504 stored its object; want nothing sent")
	}
	for _, conn := range conns {
		conn.Close()
	}
	get, _ = http.NewRequest(http.MethodGet, e.objectURL("small"), nil)
	if got := liveRequest(t, get); got != http.StatusOK {
		t.Errorf("GET once the slow readers left = %d; want 200", got)
	}
}

// TestRequestsPerClientAreCapped holds MaxRequestsPerClient object
// requests of one client (auth off: one remote address) open with slow
// readers that the transfer rate spares: the client's next object request
// is refused 429 too-many-requests with Retry-After, before it reaches
// S3, while requests off the object routes are not counted; once the
// slow readers go, the client is served again.
func TestRequestsPerClientAreCapped(t *testing.T) {
	e := newStackEnv(t)
	e.startGatewayWithS3(t, gateway.Config{TransferChunkTimeout: time.Minute, MaxRequestsPerClient: 2}, s3.Config{})
	conns := startSlowReaders(t, e, 2)
	r := do(t, http.MethodGet, e.objectURL("small"), nil, nil)
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-requests")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	if r := do(t, http.MethodGet, e.url+"/v1/fences/s3/"+e.bucket+"/small", nil, nil); r.status != http.StatusOK {
		t.Errorf("GET of a fence while the object routes are at the cap = %v; want 200", r)
	}
	for _, conn := range conns {
		conn.Close()
	}
	var status int
	for range 50 { // the server notices the closed connections when it next writes
		if status = do(t, http.MethodGet, e.objectURL("small"), nil, nil).status; status == http.StatusOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Errorf("GET once the slow readers left = %d; want 200", status)
	}
}
