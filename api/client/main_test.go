package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/devstack"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

var (
	// sharedS3 is one versitygw for the package; each test has its own
	// bucket.
	sharedS3 *testenv.S3
	// exampleURL is a gateway for the Examples, which have no
	// testing.TB: etcd, bucket "examples", and the lock API.
	exampleURL string
)

// exampleBucket is the Examples' bucket.
const exampleBucket = "examples"

func TestMain(m *testing.M) {
	srv, stopS3, err := testenv.StartS3Main()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedS3 = srv
	stopExample, err := startExampleGateway()
	if err != nil {
		stopS3()
		fmt.Fprintln(os.Stderr, "example gateway:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopExample()
	stopS3()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startExampleGateway starts the Examples' gateway and returns what stops
// it.
func startExampleGateway() (stop func(), err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		return nil, err
	}
	stops := []func(){func() { _ = os.RemoveAll(dir) }}
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	etcd, err := devstack.StartEtcd(ctx, devstack.EtcdConfig{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		return nil, err
	}
	stops = append(stops, etcd.Close)
	etcdClient, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = etcdClient.Close() })
	u, err := url.Parse(sharedS3.Endpoint())
	if err != nil {
		return nil, err
	}
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(sharedS3.AccessKey, sharedS3.SecretKey, ""), Region: sharedS3.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, err
	}
	if err := mc.MakeBucket(ctx, exampleBucket, minio.MakeBucketOptions{Region: sharedS3.Region}); err != nil {
		return nil, err
	}
	url, stopGateway, err := newGateway(etcdClient, sharedS3.Endpoint(), nil)
	if err != nil {
		return nil, err
	}
	stops = append(stops, stopGateway)
	exampleURL = url
	return stop, nil
}

// newGateway starts a gateway with the lock API on etcdClient and the S3
// server at s3Endpoint, with the token store's policies, and returns its
// URL and what stops it.
func newGateway(etcdClient *clientv3.Client, s3Endpoint string, policies []tokenstore.Policy) (string, func(), error) {
	gw, err := newGatewayHandler(etcdClient, s3Endpoint, policies)
	if err != nil {
		return "", nil, err
	}
	srv := httptest.NewServer(gw)
	return srv.URL, srv.Close, nil
}

// newGatewayHandler is newGateway's gateway, with opts added to the lock
// API, tickets and multipart uploads, for a test to serve as it likes.
func newGatewayHandler(etcdClient *clientv3.Client, s3Endpoint string, policies []tokenstore.Policy, opts ...gateway.Option) (http.Handler, error) {
	return newGatewayHandlerWith(gateway.Config{}, etcdClient, s3Endpoint, policies, opts...)
}

// newGatewayHandlerWith is newGatewayHandler with cfg's limits.
func newGatewayHandlerWith(cfg gateway.Config, etcdClient *clientv3.Client, s3Endpoint string, policies []tokenstore.Policy, opts ...gateway.Option) (http.Handler, error) {
	store, err := tokenstore.New(etcdClient, tokenstore.Config{RequestTimeout: 2 * time.Second, Policies: policies})
	if err != nil {
		return nil, err
	}
	backend, err := s3.New(context.Background(), s3.Config{
		Endpoint:        s3Endpoint,
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		return nil, err
	}
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		return nil, err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return gateway.New(cfg, store, backend, append(opts, gateway.WithLocks(store), gateway.WithTickets(backend), gateway.WithMultipart(backend, uploads))...)
}

// env is a gateway of one test: its own etcd (which the test may stop)
// and bucket.
type env struct {
	etcd   *testenv.Etcd
	url    string
	bucket string
	minio  *minio.Client
}

var bucketSeq atomic.Int64

// newEnv starts etcd, a bucket and a gateway for one test. policies, when
// not nil, makes the token store's policies for the bucket.
func newEnv(tb testing.TB, policies func(bucket string) []tokenstore.Policy) *env {
	tb.Helper()
	return newEnvWith(tb, gateway.Config{}, policies)
}

// newEnvWith is newEnv with a gateway of cfg's limits.
func newEnvWith(tb testing.TB, cfg gateway.Config, policies func(bucket string) []tokenstore.Policy) *env {
	tb.Helper()
	e := &env{
		etcd:   testenv.StartEtcd(tb),
		bucket: fmt.Sprintf("c%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		minio:  sharedS3.Minio(tb),
	}
	sharedS3.CreateBucket(tb, e.bucket)
	var ps []tokenstore.Policy
	if policies != nil {
		ps = policies(e.bucket)
	}
	gw, err := newGatewayHandlerWith(cfg, e.etcd.Client(tb), sharedS3.Endpoint(), ps)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// heldBucket binds the bucket to the lock name under the "held" check.
func heldBucket(lock string) func(bucket string) []tokenstore.Policy {
	return func(bucket string) []tokenstore.Policy {
		return []tokenstore.Policy{{Prefix: api.Resource("s3/" + bucket + "/"), Check: tokenstore.CheckHeld, Lock: lock}}
	}
}

// stored reads an object straight from S3 with an independent client
// (minio-go): its bytes and recorded token, or ok false when absent.
func (e *env) stored(tb testing.TB, key string) (body, token string, ok bool) {
	tb.Helper()
	b, token, ok := testenv.ReadStored(tb, e.minio, e.bucket, key)
	return string(b), token, ok
}
