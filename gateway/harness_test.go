package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/gcs"
	"fencegate/backends/s3"
	"fencegate/backends/stores"
	"fencegate/fence"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/rest"
	"fencegate/tokenstore"
)

// sharedS3 is one versitygw for the package; each test gets its own bucket.
var sharedS3 *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &sharedS3))
}

// env is a gateway in front of real etcd and a real S3 server, with
// counters on both so tests can prove what was (not) forwarded.
type env struct {
	etcd      *testenv.Etcd
	etcdCalls *testenv.RequestCounter
	s3        *testenv.CountingProxy // every S3 request the gateway makes
	store     *tokenstore.Store
	minio     *minio.Client // reads what really landed, not through the gateway
	bucket    string
	url       string
	// gcs, when not nil, is the emulator that holds the bucket instead of
	// S3 (newEnvOn), and gcsReader a client of it that the gateway does
	// not use, which reads what really landed.
	gcs       *testenv.GCS
	gcsReader *storage.Client
	// gcsProxy counts every GCS request the gateway makes (nil without
	// gcs).
	gcsProxy *testenv.CountingProxy
}

// objectStores are the stores that the protocol's tests run on, each as a
// subtest: one table, the same test.
var objectStores = []string{api.StoreS3, api.StoreGCS}

// newEnvOn is newEnv with the bucket in store (api.StoreS3 or
// api.StoreGCS). A GCS bucket is in a fake-gcs-server of the test's own,
// and the gateway reaches it through a stores.Router (S3 for every other
// bucket), as a gateway that fences both stores does.
func newEnvOn(tb testing.TB, store string, cfg gateway.Config) *env {
	tb.Helper()
	e := newStackEnv(tb)
	if store == api.StoreGCS {
		e.gcs = testenv.StartGCS(tb)
		e.gcs.CreateBucket(tb, e.bucket)
		e.gcsReader = e.gcs.Client(tb)
	}
	e.startGateway(tb, cfg)
	return e
}

var bucketSeq atomic.Int64

// newEnv starts etcd, makes a bucket and starts a gateway for one test.
// cfg's zero fields take the gateway's defaults.
func newEnv(tb testing.TB, cfg gateway.Config) *env {
	tb.Helper()
	e := newStackEnv(tb)
	e.startGateway(tb, cfg)
	return e
}

// newStackEnv starts etcd and makes a bucket of its own for one test, with
// no gateway yet.
func newStackEnv(tb testing.TB) *env {
	tb.Helper()
	e := &env{
		etcd:   testenv.StartEtcd(tb),
		bucket: fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		minio:  sharedS3.Minio(tb),
	}
	sharedS3.CreateBucket(tb, e.bucket)
	return e
}

// newEnvSharing starts a second gateway, with its own caches and
// counters, on the same etcd and bucket as e.
func newEnvSharing(tb testing.TB, e *env) *env {
	tb.Helper()
	e2 := &env{etcd: e.etcd, bucket: e.bucket, minio: e.minio}
	e2.startGateway(tb, gateway.Config{})
	return e2
}

// connect gives e a token store on a counting etcd client and an S3
// backend behind a counting proxy, so that tests can tell what reached
// each.
func (e *env) connect(tb testing.TB, cfg tokenstore.Config) (*tokenstore.Store, *s3.Client) {
	tb.Helper()
	client, calls := e.etcd.CountingClient(tb)
	e.etcdCalls = calls
	store, err := tokenstore.New(client, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.store = store
	e.s3 = testenv.NewCountingProxy(tb, sharedS3.Endpoint())
	backend, err := s3.New(context.Background(), s3.Config{
		Endpoint:        e.s3.URL(),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return store, backend
}

func (e *env) startGateway(tb testing.TB, cfg gateway.Config) {
	tb.Helper()
	store, backend := e.connect(tb, tokenstore.Config{RequestTimeout: time.Second})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Readiness = append(cfg.Readiness, rest.Probe{Name: "etcd", Ping: store.Ping}, rest.Probe{Name: "s3", Ping: backend.Ping})
	if cfg.StoreSpace == nil {
		cfg.StoreSpace = func(ctx context.Context) (rest.StoreSpace, error) {
			space, err := store.Space(ctx)
			return rest.StoreSpace{Size: space.Size, InUse: space.InUse, Quota: space.Quota}, err
		}
	}
	var objects gateway.ObjectStore = backend
	if e.gcs != nil {
		e.gcsProxy = testenv.NewCountingProxy(tb, "http://"+e.gcs.Host())
		gcsBackend, err := gcs.New(tb.Context(), gcs.Config{Endpoint: e.gcsProxy.URL() + "/storage/v1/", WithoutAuthentication: true})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = gcsBackend.Close() })
		objects, err = stores.New(stores.Named{Name: api.StoreS3, Store: backend},
			map[string]stores.Named{e.bucket: {Name: api.StoreGCS, Store: gcsBackend}})
		if err != nil {
			tb.Fatal(err)
		}
	}
	// The S3 backend signs tickets, as cmd/fencegate wires it; the engine
	// refuses them for a GCS bucket.
	gw, err := gateway.New(cfg, store, objects, gateway.WithTickets(backend))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
}

// storeRequests returns how many requests the gateway sent to the
// bucket's store (and to S3, for every other bucket) since the counters
// were last reset (resetStoreCounts).
func (e *env) storeRequests() int64 {
	n := e.s3.Count()
	if e.gcsProxy != nil {
		n += e.gcsProxy.Count()
	}
	return n
}

// resetStoreCounts sets the counts of storeRequests to zero.
func (e *env) resetStoreCounts() {
	e.s3.Reset()
	if e.gcsProxy != nil {
		e.gcsProxy.Reset()
	}
}

func (e *env) objectURL(key string) string { return e.url + "/v1/objects/" + e.bucket + "/" + key }

// result is a gateway answer, read whole.
type result struct {
	status  int
	header  http.Header
	body    []byte
	problem api.Problem // when the body is problem+json
	write   fence.WriteResult
}

func (r result) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends one request with the given X-Fence-Token values (none when
// tokens is nil) and reads the answer.
func do(tb testing.TB, method, url string, tokens []string, body []byte) result {
	tb.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range tokens {
		req.Header.Add(api.HeaderFenceToken, t)
	}
	return send(tb, req)
}

func send(tb testing.TB, req *http.Request) result {
	tb.Helper()
	return sendWith(tb, http.DefaultClient, req)
}

// sendWith is send with a client of the test's choosing (nil: send's).
func sendWith(tb testing.TB, client *http.Client, req *http.Request) result {
	tb.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, header: resp.Header}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		tb.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case ct == api.ContentTypeProblem && req.Method != http.MethodHead:
		if err := json.Unmarshal(r.body, &r.problem); err != nil {
			tb.Fatalf("%s %s: problem body %q: %v", req.Method, req.URL, r.body, err)
		}
	case strings.HasPrefix(ct, "application/json") && req.Method == http.MethodPut && r.status < 300:
		if err := json.Unmarshal(r.body, &r.write); err != nil {
			tb.Fatalf("%s %s: write result %q: %v", req.Method, req.URL, r.body, err)
		}
	}
	return r
}

func (e *env) put(tb testing.TB, key string, token api.Token, body string) result {
	tb.Helper()
	return do(tb, http.MethodPut, e.objectURL(key), []string{token.String()}, []byte(body))
}

func (e *env) delete(tb testing.TB, key string, token api.Token) result {
	tb.Helper()
	return do(tb, http.MethodDelete, e.objectURL(key), []string{token.String()}, nil)
}

// stored reads the object straight from its store (S3, or GCS for an env
// of newEnvOn) with an independent client: its bytes and its recorded
// fence token, or ok false when absent.
func (e *env) stored(tb testing.TB, key string) (body, token string, ok bool) {
	tb.Helper()
	ctx := context.Background()
	if e.gcsReader != nil {
		r, err := e.gcsReader.Bucket(e.bucket).Object(key).NewReader(ctx)
		if errors.Is(err, storage.ErrObjectNotExist) {
			return "", "", false
		}
		if err != nil {
			tb.Fatalf("gcs get %s/%s: %v", e.bucket, key, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			tb.Fatalf("gcs read %s/%s: %v", e.bucket, key, err)
		}
		attrs, err := e.gcsReader.Bucket(e.bucket).Object(key).Generation(r.Attrs.Generation).Attrs(ctx)
		if err != nil {
			tb.Fatalf("gcs attrs %s/%s: %v", e.bucket, key, err)
		}
		return string(b), attrs.Metadata[api.MetadataFenceToken], true
	}
	b, token, ok := testenv.ReadStored(tb, e.minio, e.bucket, key)
	return string(b), token, ok
}

// wantProblem fails unless r is a problem+json answer with the status and
// problem type given.
func wantProblem(tb testing.TB, r result, status int, slug string) {
	tb.Helper()
	if r.status != status || r.problem.Type != api.ProblemTypePrefix+slug || r.problem.Status != status {
		tb.Fatalf("got %s; want %d problem %s", r, status, slug)
	}
}
