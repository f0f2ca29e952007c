// Package s3door gives tests the S3 API's front door wired as fencegate
// serve wires it, on real services: the gateway fences writes in the
// token store over an embedded etcd of the test's own
// ([testenv.StartEtcd]) and writes to a versitygw ([testenv.S3]) through
// the S3 backend, which also serves the door's bucket listings, bucket
// administration and, with the token store's upload records, multipart
// uploads; the door's access keys are the identities' S3 keys, read by
// package accesskeys from the same auth configuration the gateway
// authorizes with.
//
// It builds the handler only: a test serves [Door.Handler] as it needs
// (httptest, over TLS, behind hooks of its own). Like package testenv,
// it is test scaffolding: no production package may import it.
package s3door

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	s3backend "fencegate/backends/s3"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/s3api"
	"fencegate/s3api/accesskeys"
	"fencegate/tokenstore"
)

// Door is an S3 front door and what it runs on.
type Door struct {
	// Handler serves the S3 API (s3api.New), for region us-east-1 and
	// path-style requests only.
	Handler http.Handler
	// Gateway is the gateway behind the door: a test writes through it
	// as the REST API does, beside the door's clients.
	Gateway *gateway.Gateway
	// Store is the token store in the door's etcd: a test reads
	// high-water marks there.
	Store *tokenstore.Store
}

// New wires a door on a new embedded etcd and on s3, the versitygw whose
// root credentials the gateway uses, with auth's identities: their grants
// authorize, their S3 keys sign clients' requests. It fails tb when any
// part does not start; etcd stops when the test ends.
func New(tb testing.TB, s3 *testenv.S3, auth edge.Auth) *Door {
	tb.Helper()
	etcd := testenv.StartEtcd(tb)
	store, err := tokenstore.New(etcd.Client(tb), tokenstore.Config{RequestTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	backend, err := s3backend.New(context.Background(), s3backend.Config{
		Endpoint: s3.Endpoint(), AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, UsePathStyle: true,
	})
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, err := gateway.New(gateway.Config{Logger: logger}, store, backend, gateway.WithAuth(auth), gateway.WithMultipart(backend, uploads))
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	keys, err := accesskeys.New(auth)
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	h, err := s3api.New(s3api.Config{Logger: logger}, s3api.Deps{Edge: gw.Edge(), Engine: gw.Engine(), Keys: keys, Buckets: backend, Admin: backend})
	if err != nil {
		tb.Fatalf("s3door: %v", err)
	}
	return &Door{Handler: h, Gateway: gw, Store: store}
}
