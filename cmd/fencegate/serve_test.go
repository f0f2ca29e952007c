package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fencegate/internal/devstack"
	"fencegate/internal/testenv"
)

// stack is a real etcd and S3 server for serve to use.
type stack struct {
	etcd *devstack.Etcd
	s3   *devstack.S3Server
}

func startStack(t *testing.T, bucket string) stack {
	t.Helper()
	dir := t.TempDir()
	etcd, err := devstack.StartEtcd(t.Context(), devstack.EtcdConfig{Dir: filepath.Join(dir, "etcd"), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	objects, err := devstack.StartVersityGW(t.Context(), devstack.S3Config{Dir: filepath.Join(dir, "s3")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(objects.Close)
	if err := objects.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	return stack{etcd: etcd, s3: objects}
}

// serveArgs returns the arguments of serve on addr in front of st.
func (st stack) serveArgs(addr string, extra ...string) []string {
	return append([]string{"serve",
		"--listen", addr,
		"--etcd-endpoints", strings.Join(st.etcd.Endpoints(), ","),
		"--s3-endpoint", st.s3.Endpoint(),
		"--s3-access-key", st.s3.AccessKey,
		"--s3-secret-key", st.s3.SecretKey,
		"--s3-path-style",
		"--log-level", "warn",
	}, extra...)
}

// startSlowPut sends the headers and the first half of a 10-byte PUT over
// a raw connection and returns a function that sends the rest and reads
// the answer.
func startSlowPut(t *testing.T, addr, path string) (finish func() *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "PUT " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nX-Fence-Token: 7\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n"
	if _, err := io.WriteString(conn, head+"hello"); err != nil {
		t.Fatal(err)
	}
	return func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, "world"); err != nil {
			t.Fatalf("sending the rest of the body: %v", err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
}

func readyzStatus(base string) int {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func listenerClosed(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	conn.Close()
	return false
}

func TestServeShutdownDrainsRequestsInFlight(t *testing.T) {
	st := startStack(t, "drain")
	addr := freeAddr(t)
	base := "http://" + addr
	r := startRun(t, st.serveArgs(addr, "--drain-delay", "500ms", "--shutdown-timeout", "30s")...)
	r.waitReady(t, base)

	finish := startSlowPut(t, addr, "/v1/objects/drain/slow")
	r.cancel() // as SIGTERM does

	// While draining, /readyz fails but the listener still accepts...
	testenv.WaitUntil(t, 30*time.Second, "/readyz answers 503 while draining", func() bool { return readyzStatus(base) == http.StatusServiceUnavailable })
	// ...then it closes, and the slow request is still in flight.
	testenv.WaitUntil(t, 30*time.Second, "the listener is closed", func() bool { return listenerClosed(addr) })
	select {
	case err := <-r.done:
		t.Fatalf("serve returned (%v) while a request was in flight", err)
	default:
	}

	resp := finish()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("slow PUT during shutdown: status %d, body %s; want 201", resp.StatusCode, body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve after a graceful shutdown = %v; want nil", err)
	}

	// The write reached S3, with its token.
	r2 := startRun(t, st.serveArgs(addr)...)
	r2.waitReady(t, base)
	get, err := http.Get(base + "/v1/objects/drain/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	got, _ := io.ReadAll(get.Body)
	if get.StatusCode != http.StatusOK || string(got) != "helloworld" || get.Header.Get("X-Fence-Token") != "7" {
		t.Errorf("GET after restart: status %d, body %q, X-Fence-Token %q; want 200, %q, 7",
			get.StatusCode, got, get.Header.Get("X-Fence-Token"), "helloworld")
	}
	if err := r2.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}

func TestServeShutdownTimeout(t *testing.T) {
	st := startStack(t, "stuck")
	addr := freeAddr(t)
	r := startRun(t, st.serveArgs(addr, "--shutdown-timeout", "300ms")...)
	r.waitReady(t, "http://"+addr)

	// A request that never finishes its body holds the shutdown up until
	// the timeout, and serve reports it.
	_ = startSlowPut(t, addr, "/v1/objects/stuck/never")
	time.Sleep(100 * time.Millisecond) // let the server read the headers
	err := r.stop(t)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Fatalf("serve with a stuck request = %v; want a shutdown timeout error", err)
	}
}

func TestServeMaxHeaderBytesAnswersWithProblem(t *testing.T) {
	st := startStack(t, "hdr")
	addr := freeAddr(t)
	r := startRun(t, st.serveArgs(addr, "--max-header-bytes", "4KiB")...)
	base := "http://" + addr
	r.waitReady(t, base)

	// Headers over the gateway's limit but under the server's (limit +
	// 64 KiB) get the gateway's 431 problem, not the server's bare one.
	req, err := http.NewRequest(http.MethodGet, base+"/v1/objects/hdr/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET with 8 KiB of headers: status %d, Content-Type %q; want 431, application/problem+json",
			resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}

// TestServeEvictsMarks: serve runs the mark evictor with its flags. With
// a retention of a second, the mark of an object that records it leaves
// etcd (the fences route answers 0 and /metrics counts the eviction), and
// a stale write is still refused by the token the object records.
func TestServeEvictsMarks(t *testing.T) {
	st := startStack(t, "marks")
	addr := freeAddr(t)
	base := "http://" + addr
	r := startRun(t, st.serveArgs(addr, "--mark-retention", "1s", "--mark-eviction-interval", "100ms")...)
	r.waitReady(t, base)
	send := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("X-Fence-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	if status, body := send(http.MethodPut, "/v1/objects/marks/a", "5", "five"); status != http.StatusCreated {
		t.Fatalf("PUT token 5: %d %s; want 201", status, body)
	}
	testenv.WaitUntil(t, 60*time.Second, "the mark is evicted", func() bool {
		_, body := send(http.MethodGet, "/v1/fences/s3/marks/a", "", "")
		return strings.Contains(body, `"high_water_mark":0`)
	})
	if _, metrics := send(http.MethodGet, "/metrics", "", ""); !strings.Contains(metrics, "fencegate_marks_evicted_total") {
		t.Errorf("/metrics has no fencegate_marks_evicted_total")
	}
	if status, body := send(http.MethodPut, "/v1/objects/marks/a", "3", "three"); status != http.StatusConflict {
		t.Fatalf("stale PUT token 3 after the eviction: %d %s; want 409", status, body)
	}
	if status, body := send(http.MethodGet, "/v1/objects/marks/a", "", ""); status != http.StatusOK || body != "five" {
		t.Fatalf("GET: %d %q; want 200 \"five\"", status, body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}
