package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"fencegate/api"
	"fencegate/gateway"
)

// BenchmarkHandler is the gateway's own work per request, on in-memory
// stores (no etcd, no S3, no sockets): routing, middleware, parsing, the
// protocol, the answer. Logs go through a real text handler to
// io.Discard, so that their formatting counts.
func BenchmarkHandler(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, cache := range []struct {
			name    string
			entries int
		}{{"etag-cache", 0}, {"head", -1}} {
			b.Run(fmt.Sprintf("accepted/%s/%dKiB", cache.name, size>>10), func(b *testing.B) {
				gw, objects := newBenchGateway(b, gateway.Config{ETagCacheEntries: cache.entries})
				body := bytes.Repeat([]byte("x"), size)
				serve(b, gw, "/v1/objects/bench/k", "1", body, http.StatusCreated)
				objects.calls.Store(0)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					serve(b, gw, "/v1/objects/bench/k", "1", body, http.StatusOK)
				}
				b.ReportMetric(float64(objects.calls.Load())/float64(b.N), "s3-calls/op")
			})
		}
	}
	b.Run("stale", func(b *testing.B) {
		gw, objects := newBenchGateway(b, gateway.Config{})
		body := bytes.Repeat([]byte("x"), 1<<10)
		serve(b, gw, "/v1/objects/bench/k", "10", body, http.StatusCreated)
		objects.calls.Store(0)
		b.ReportAllocs()
		for b.Loop() {
			serve(b, gw, "/v1/objects/bench/k", "5", body, http.StatusConflict)
		}
		if n := objects.calls.Load(); n != 0 {
			b.Fatalf("stale refusals made %d S3 calls", n)
		}
	})
}

func newBenchGateway(b *testing.B, cfg gateway.Config) (http.Handler, *memObjects) {
	b.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	objects := newMemObjects()
	gw, err := gateway.New(cfg, newMemFences(), objects)
	if err != nil {
		b.Fatal(err)
	}
	return gw, objects
}

// serve sends one fenced PUT to h and checks its status.
func serve(b *testing.B, h http.Handler, path, token string, body []byte, status int) {
	req := httptest.NewRequest(http.MethodPut, path, bytes.NewReader(body))
	req.Header.Set(api.HeaderFenceToken, token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != status {
		b.Fatalf("PUT %s token %s = %d %s; want %d", path, token, w.Code, w.Body, status)
	}
}
