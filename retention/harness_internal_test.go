package retention

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// sharedS3 is one versitygw for the package; each test gets its own bucket.
var sharedS3 *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &sharedS3))
}

// fakeClock is a clock that moves only when told; the evictor and the
// gateways of a test share one.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// stack is real etcd and a real S3 bucket, with the token store and S3
// backend an evictor uses, and a clock of the test's.
type stack struct {
	etcd    *testenv.Etcd
	store   *tokenstore.Store
	objects *s3.Client
	minio   *minio.Client
	bucket  string
	clock   *fakeClock
}

var bucketSeq atomic.Int64

func newStack(tb testing.TB) *stack {
	tb.Helper()
	st := &stack{
		etcd:   testenv.StartEtcd(tb),
		minio:  sharedS3.Minio(tb),
		bucket: fmt.Sprintf("r%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		clock:  newFakeClock(),
	}
	sharedS3.CreateBucket(tb, st.bucket)
	st.store = st.newStore(tb)
	st.objects = newBackend(tb)
	return st
}

// newStore returns a token store of its own (its own cache of marks) on
// the stack's etcd.
func (st *stack) newStore(tb testing.TB) *tokenstore.Store {
	tb.Helper()
	store, err := tokenstore.New(st.etcd.Client(tb), tokenstore.Config{RequestTimeout: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

func newBackend(tb testing.TB) *s3.Client {
	tb.Helper()
	backend, err := s3.New(context.Background(), s3.Config{
		Endpoint:        sharedS3.Endpoint(),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return backend
}

// evictor returns an evictor of the stack's marks on the stack's clock,
// with cfg's other fields; its HEADs are not paced.
func (st *stack) evictor(tb testing.TB, cfg Config) *Evictor {
	tb.Helper()
	cfg.Now = st.clock.Now
	if cfg.HeadsPerSecond == 0 {
		cfg.HeadsPerSecond = 1e6
	}
	cfg.Logger = discardLogger()
	e, err := New(cfg, st.store, st.objects)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// agedPass runs a pass, moves the clock by age, and runs another: the
// second pass knows the revision of the first, so marks raised before
// the first pass are age old to it.
func agedPass(tb testing.TB, st *stack, e *Evictor, age time.Duration) {
	tb.Helper()
	pass(tb, e)
	st.clock.advance(age)
	pass(tb, e)
}

func pass(tb testing.TB, e *Evictor) {
	tb.Helper()
	if err := e.Pass(context.Background()); err != nil {
		tb.Fatalf("Pass: %v", err)
	}
}

// gateway starts a gateway of its own (its own caches) on the stack, on
// the stack's clock, and returns its URL.
func (st *stack) gateway(tb testing.TB, cfg gateway.Config) string {
	tb.Helper()
	_, url := st.gatewayServer(tb, cfg)
	return url
}

// gatewayServer is gateway, returning the gateway too.
func (st *stack) gatewayServer(tb testing.TB, cfg gateway.Config, opts ...gateway.Option) (*gateway.Gateway, string) {
	tb.Helper()
	return st.gatewayOn(tb, st.newStore(tb), cfg, opts...)
}

// multipartGateway is gatewayServer with multipart uploads on, bound in
// the stack's etcd; wrap, when not nil, wraps the bindings the gateway
// records (a test's pause).
func (st *stack) multipartGateway(tb testing.TB, cfg gateway.Config, wrap func(gateway.UploadStore) gateway.UploadStore) (*gateway.Gateway, string) {
	tb.Helper()
	store := st.newStore(tb)
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		tb.Fatal(err)
	}
	var bindings gateway.UploadStore = uploads
	if wrap != nil {
		bindings = wrap(bindings)
	}
	backend := newBackend(tb)
	return st.gatewayOn(tb, store, cfg, gateway.WithMultipart(backend, bindings))
}

// gatewayOn starts a gateway on store, the stack's clock and a backend of
// its own, with opts.
func (st *stack) gatewayOn(tb testing.TB, store *tokenstore.Store, cfg gateway.Config, opts ...gateway.Option) (*gateway.Gateway, string) {
	tb.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Now = st.clock.Now
	gw, err := gateway.New(cfg, store, newBackend(tb), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return gw, srv.URL
}

// write sends a fenced PUT (a body) or DELETE (nil body) of key through
// the gateway at url, and returns the status.
func (st *stack) write(tb testing.TB, url, key string, token api.Token, body []byte) int {
	tb.Helper()
	method := http.MethodPut
	if body == nil {
		method = http.MethodDelete
	}
	req, err := http.NewRequest(method, url+"/v1/objects/"+st.bucket+"/"+key, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, token.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, key, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// mustWrite is write that fails the test unless the status is want.
func (st *stack) mustWrite(tb testing.TB, url, key string, token api.Token, body []byte, want int) {
	tb.Helper()
	if got := st.write(tb, url, key, token, body); got != want {
		tb.Fatalf("write %s token %d = %d; want %d", key, token, got, want)
	}
}

// stored reads key straight from S3, not through a gateway: its bytes
// and recorded token, or ok false when absent.
func (st *stack) stored(tb testing.TB, key string) (body, token string, ok bool) {
	tb.Helper()
	b, token, ok := testenv.ReadStored(tb, st.minio, st.bucket, key)
	return string(b), token, ok
}

// mark reads key's high-water mark linearizably, with a store whose cache
// knows nothing (zero: no mark in etcd).
func (st *stack) mark(tb testing.TB, key string) api.Token {
	tb.Helper()
	hwm, err := st.newStore(tb).HighWaterMark(context.Background(), st.resource(key))
	if err != nil {
		tb.Fatal(err)
	}
	return hwm
}

func (st *stack) resource(key string) api.Resource { return api.ObjectResource(st.bucket, key) }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
