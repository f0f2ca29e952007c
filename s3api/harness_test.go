package s3api_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	s3backend "fencegate/backends/s3"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/s3api"
	"fencegate/s3api/sigv4"
	"fencegate/tokenstore"
)

// sharedS3 is one versitygw for the package; each test gets its own bucket.
var sharedS3 *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &sharedS3))
}

// keys is a test KeyStore: access key id -> secret and identity.
type keys map[string][2]string

func (k keys) SecretKey(_ context.Context, id string) (string, string, error) {
	v, ok := k[id]
	if !ok {
		return "", "", sigv4.ErrUnknownAccessKey
	}
	return v[0], v[1], nil
}

// door is the S3 front door in front of real etcd and a real versitygw,
// with counters on the store so tests can prove what reached it.
type door struct {
	etcd   *testenv.Etcd
	store  *tokenstore.Store
	s3     *testenv.CountingProxy // every S3 request the gateway makes
	minio  *minio.Client          // reads what really landed, not through the door
	bucket string
	url    string
	srv    *httptest.Server
	keys   keys
	gw     *gateway.Gateway
}

// doorOptions change a door from its defaults.
type doorOptions struct {
	gateway gateway.Config
	// noAuth leaves the gateway without auth (as fencegate dev).
	noAuth bool
	domain string
	// s3Endpoint is where the gateway's counting proxy forwards its S3
	// requests; empty is the shared versitygw.
	s3Endpoint string
}

var bucketSeq atomic.Int64

// The identities of every door: writer may do everything to S3 objects,
// reader only read, and logs everything under its bucket's logs/; admin
// is admin of the buckets whose names start with adminBuckets, and of the
// logs/ of the door's bucket (only part of it).
const (
	writerKey    = "AKIAWRITER"
	readerKey    = "AKIAREADER"
	logsKey      = "AKIALOGS"
	adminKey     = "AKIAADMIN"
	adminBuckets = "fgadm"
	secretOf     = "secret-"
)

func newDoor(tb testing.TB, o doorOptions) *door {
	tb.Helper()
	d := &door{
		etcd:   testenv.StartEtcd(tb),
		bucket: fmt.Sprintf("s3d%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		minio:  sharedS3.Minio(tb),
	}
	sharedS3.CreateBucket(tb, d.bucket)
	store, err := tokenstore.New(d.etcd.Client(tb), tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	d.store = store
	d.s3 = testenv.NewCountingProxy(tb, cmp.Or(o.s3Endpoint, sharedS3.Endpoint()))
	backend, err := s3backend.New(context.Background(), s3backend.Config{
		Endpoint: d.s3.URL(), AccessKeyID: sharedS3.AccessKey, SecretAccessKey: sharedS3.SecretKey, UsePathStyle: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := o.gateway
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var opts []gateway.Option
	if !o.noAuth {
		rw := []edge.Operation{edge.OpRead, edge.OpWrite, edge.OpDelete}
		opts = append(opts, gateway.WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "writer", Grants: []edge.Grant{{Prefix: "s3/", Operations: rw}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "s3/", Operations: []edge.Operation{edge.OpRead}}}},
				{Name: "logs", Grants: []edge.Grant{{Prefix: "s3/" + d.bucket + "/logs/", Operations: rw}}},
				{Name: "admin", Grants: []edge.Grant{
					{Prefix: "s3/" + adminBuckets, Operations: []edge.Operation{edge.OpAdmin}},
					{Prefix: "s3/" + d.bucket + "/logs/", Operations: []edge.Operation{edge.OpAdmin}},
				}},
			},
			APIKeys: []edge.APIKey{
				{SHA256: sha256.Sum256([]byte("rest-writer")), Identity: "writer"},
				{SHA256: sha256.Sum256([]byte("rest-reader")), Identity: "reader"},
				{SHA256: sha256.Sum256([]byte("rest-logs")), Identity: "logs"},
			},
		}))
	}
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		tb.Fatal(err)
	}
	opts = append(opts, gateway.WithMultipart(backend, uploads))
	gw, err := gateway.New(cfg, store, backend, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	d.gw = gw
	d.keys = keys{
		writerKey: {secretOf + writerKey, "writer"},
		readerKey: {secretOf + readerKey, "reader"},
		logsKey:   {secretOf + logsKey, "logs"},
		adminKey:  {secretOf + adminKey, "admin"},
	}
	h, err := s3api.New(s3api.Config{Domain: o.domain, Logger: cfg.Logger}, s3api.Deps{Edge: gw.Edge(), Engine: gw.Engine(), Keys: d.keys, Buckets: backend, Admin: backend})
	if err != nil {
		tb.Fatal(err)
	}
	d.srv = httptest.NewTLSServer(h)
	tb.Cleanup(d.srv.Close)
	d.url = d.srv.URL
	return d
}

// client is an aws-sdk-go-v2 S3 client of the door as accessKey, with
// the SDK's defaults (checksums on: over TLS, aws-chunked bodies with a
// CRC32 trailer), path-style, no retries unless the test adds them.
func (d *door) client(accessKey string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(d.url),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(accessKey, d.keys[accessKey][0], ""),
		HTTPClient:                 d.srv.Client(),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		RetryMaxAttempts:           1,
	}, optFns...)
}

// withHeader adds a header to every request of an SDK call, before it is
// signed.
func withHeader(name, value string) func(*s3.Options) {
	return s3.WithAPIOptions(smithyhttp.AddHeaderValue(name, value))
}

// put writes key through the door with token in x-amz-meta-fence-token.
func (d *door) put(tb testing.TB, c *s3.Client, key string, token api.Token, body string) (*s3.PutObjectOutput, error) {
	tb.Helper()
	return c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket:   aws.String(d.bucket),
		Key:      aws.String(key),
		Body:     bytes.NewReader([]byte(body)),
		Metadata: map[string]string{"fence-token": token.String()},
	})
}

// settle closes the door's server, which waits for every request in
// flight: a handler's access line, audit line and metrics are written
// after the client has read its answer, so a test reads them once the
// door has settled. The door serves nothing after it.
func (d *door) settle() { d.srv.Close() }

// stored reads the object straight from versitygw with an independent
// client: its bytes and recorded fence token, or ok false when absent.
func (d *door) stored(tb testing.TB, key string) (body, token string, ok bool) {
	tb.Helper()
	b, token, ok := testenv.ReadStored(tb, d.minio, d.bucket, key)
	return string(b), token, ok
}

// mark returns key's high-water mark in etcd.
func (d *door) mark(tb testing.TB, key string) api.Token {
	tb.Helper()
	hwm, err := d.store.HighWaterMark(context.Background(), api.ObjectResource(d.bucket, key))
	if err != nil {
		tb.Fatal(err)
	}
	return hwm
}

// wantAPIError fails unless err is an S3 error answer with code and
// status, as the SDK parses it, and returns its HTTP response.
func wantAPIError(tb testing.TB, err error, status int, code string) *smithyhttp.Response {
	tb.Helper()
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		tb.Fatalf("err = %v; want an S3 error %s", err, code)
	}
	var respErr *smithyhttp.ResponseError
	if !errors.As(err, &respErr) {
		tb.Fatalf("err = %v; want an HTTP response error", err)
	}
	if apiErr.ErrorCode() != code || respErr.HTTPStatusCode() != status {
		tb.Fatalf("err = %d %s (%v); want %d %s", respErr.HTTPStatusCode(), apiErr.ErrorCode(), err, status, code)
	}
	return respErr.Response
}

// rawRequest sends a request signed by the SDK's v4 signer as accessKey.
func (d *door) rawRequest(tb testing.TB, accessKey string, req *http.Request, payload []byte) *http.Response {
	tb.Helper()
	signRequest(tb, req, accessKey, d.keys[accessKey][0], payload)
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}
