package s3api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/backends/gcs"
	s3backend "fencegate/backends/s3"
	"fencegate/backends/stores"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/s3api"
	"fencegate/tokenstore"
)

// gcsDoor is a door whose bucket is in GCS (the emulator, reached through
// a proxy that counts the gateway's requests), every other bucket in S3,
// with the writer's key only.
type gcsDoor struct {
	*door
	gcs   *testenv.GCS
	proxy *testenv.CountingProxy
}

// gcsDoorOptions change a gcsDoor from its defaults (no auth, the
// writer's key only).
type gcsDoorOptions struct {
	// auth, when not nil, gives the gateway the Auth it makes for the
	// GCS bucket.
	auth func(bucket string) edge.Auth
	// keys are more S3 access keys, beside the writer's.
	keys keys
	// logger is the gateway's and the door's; nil discards.
	logger *slog.Logger
}

// newGCSDoor starts a gcsDoor whose bucket's name starts with name.
func newGCSDoor(tb testing.TB, name string) *gcsDoor {
	tb.Helper()
	return newGCSDoorWith(tb, name, gcsDoorOptions{})
}

// newGCSDoorWith is newGCSDoor with o.
func newGCSDoorWith(tb testing.TB, name string, o gcsDoorOptions) *gcsDoor {
	tb.Helper()
	ctx := context.Background()
	g := &gcsDoor{gcs: testenv.StartGCS(tb)}
	bucket := fmt.Sprintf("%s%d", name, bucketSeq.Add(1))
	g.gcs.CreateBucket(tb, bucket)
	g.proxy = testenv.NewCountingProxy(tb, "http://"+g.gcs.Host())
	gcsBackend, err := gcs.New(ctx, gcs.Config{Endpoint: g.proxy.URL() + "/storage/v1/", WithoutAuthentication: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = gcsBackend.Close() })
	s3Backend, err := s3backend.New(ctx, s3backend.Config{Endpoint: sharedS3.Endpoint(), AccessKeyID: sharedS3.AccessKey, SecretAccessKey: sharedS3.SecretKey, UsePathStyle: true})
	if err != nil {
		tb.Fatal(err)
	}
	objects, err := stores.New(stores.Named{Name: api.StoreS3, Store: s3Backend}, map[string]stores.Named{bucket: {Name: api.StoreGCS, Store: gcsBackend}})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := tokenstore.New(testenv.StartEtcd(tb).Client(tb), tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var opts []gateway.Option
	if o.auth != nil {
		opts = append(opts, gateway.WithAuth(o.auth(bucket)))
	}
	gw, err := gateway.New(gateway.Config{Logger: logger}, store, objects, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	g.door = &door{bucket: bucket, gw: gw, keys: keys{writerKey: {secretOf + writerKey, "writer"}}}
	maps.Copy(g.keys, o.keys)
	h, err := s3api.New(s3api.Config{Logger: logger}, s3api.Deps{Edge: gw.Edge(), Engine: gw.Engine(), Keys: g.keys, Admin: s3Backend})
	if err != nil {
		tb.Fatal(err)
	}
	g.srv = httptest.NewTLSServer(h)
	tb.Cleanup(g.srv.Close)
	g.url = g.srv.URL
	return g
}
