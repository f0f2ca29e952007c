package testenv

import (
	"net/http"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"fencegate/internal/devstack"
)

// FakeGCSEnv names the environment variable that, when set, holds the
// path of the fake-gcs-server binary that [StartGCS] runs
// ([devstack.FindFakeGCS]).
const FakeGCSEnv = devstack.FakeGCSEnv

// GCSProject is the project that buckets of a [GCS] server are created in.
const GCSProject = "fencegate-test"

// GCS is a fake-gcs-server (a Google Cloud Storage emulator) running as a
// child process on 127.0.0.1 with its filesystem backend in a fresh
// directory. It is made by [StartGCS]. Its methods are safe for concurrent
// use.
type GCS struct {
	server *devstack.GCSServer
}

// StartGCS starts a fake-gcs-server of its own for the test, waits until
// it is healthy, and stops it when the test and its subtests finish. The
// test fails, never skips, when the binary is missing (the message says
// `make tools`) or does not start; if the test failed, the server's output
// is logged at cleanup.
func StartGCS(tb testing.TB) *GCS {
	tb.Helper()
	server, err := devstack.StartFakeGCS(startContext(tb), devstack.GCSConfig{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() {
		server.Close()
		if tb.Failed() {
			if out := server.Output(); out != "" {
				tb.Logf("fake-gcs-server output:\n%s", out)
			}
		}
	})
	return &GCS{server: server}
}

// Host returns the server's address, 127.0.0.1:PORT, as
// STORAGE_EMULATOR_HOST takes it.
func (g *GCS) Host() string { return g.server.Host() }

// Endpoint returns the base URL of the server's JSON API, for
// option.WithEndpoint: http://127.0.0.1:PORT/storage/v1/.
func (g *GCS) Endpoint() string { return g.server.Endpoint() }

// Client returns a new client of the server (the official
// cloud.google.com/go/storage, without authentication, reading with the
// JSON API), closed when the test finishes. It shares nothing with the
// clients the code under test makes, so it reads what really landed.
func (g *GCS) Client(tb testing.TB) *storage.Client {
	tb.Helper()
	return g.ClientAt(tb, g.Endpoint())
}

// ClientAt is [GCS.Client] for a client that reaches the server through
// endpoint, the JSON API's base URL on another address, such as a
// [CountingProxy]'s URL + "/storage/v1/".
func (g *GCS) ClientAt(tb testing.TB, endpoint string) *storage.Client {
	tb.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: 64} // Proxy nil: 127.0.0.1 only
	tb.Cleanup(transport.CloseIdleConnections)
	c, err := storage.NewClient(tb.Context(),
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: transport}),
		storage.WithJSONReads())
	if err != nil {
		tb.Fatalf("testenv: gcs client for %s: %v", endpoint, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// CreateBucket creates the bucket name, or empties it when it exists
// already, so that a test starts from an empty bucket also when it runs
// again against the same server.
func (g *GCS) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	ctx := tb.Context()
	bucket := g.Client(tb).Bucket(name)
	if _, err := bucket.Attrs(ctx); err == nil {
		it := bucket.Objects(ctx, nil)
		for {
			attrs, err := it.Next()
			if err == iterator.Done {
				return
			}
			if err != nil {
				tb.Fatalf("testenv: empty bucket %s: %v", name, err)
			}
			if err := bucket.Object(attrs.Name).Delete(ctx); err != nil {
				tb.Fatalf("testenv: empty bucket %s: delete %s: %v", name, attrs.Name, err)
			}
		}
	}
	if err := bucket.Create(ctx, GCSProject, nil); err != nil {
		tb.Fatalf("testenv: create bucket %s: %v", name, err)
	}
}
