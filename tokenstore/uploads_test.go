package tokenstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

func newUploads(tb testing.TB, s *tokenstore.Store) *tokenstore.Uploads {
	tb.Helper()
	u, err := tokenstore.NewUploads(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// TestUploadBindings binds uploads to their resource and token, reads them
// back by id (from another gateway's store too), and unbinds them.
func TestUploadBindings(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	a := newUploads(t, newStore(t, etcd.Client(t)))
	b := newUploads(t, newStore(t, etcd.Client(t)))
	ctx := context.Background()
	one := api.UploadBinding{UploadID: "upload-1", Resource: "s3/b/k", Token: 7}
	two := api.UploadBinding{UploadID: "upload/2 with odd bytes\x00", Resource: "s3/b/other key", Token: 9}
	for _, ub := range []api.UploadBinding{one, two} {
		if err := a.BindUpload(ctx, ub, time.Hour); err != nil {
			t.Fatalf("BindUpload(%+v) = %v", ub, err)
		}
	}
	tests := []struct {
		name     string
		id       string
		resource api.Resource
		want     api.UploadBinding
		wantErr  error
	}{
		{"bound", one.UploadID, one.Resource, one, nil},
		{"bound, odd id", two.UploadID, two.Resource, two, nil},
		{"another resource's upload", one.UploadID, two.Resource, api.UploadBinding{}, api.ErrNotFound},
		{"never bound", "upload-3", one.Resource, api.UploadBinding{}, api.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.Upload(ctx, tt.resource, tt.id)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Upload(%q, %q) = %+v, %v; want %+v, %v", tt.resource, tt.id, got, err, tt.want, tt.wantErr)
			}
		})
	}
	// A second bind of a bound id is refused: an upload id is bound once.
	if err := b.BindUpload(ctx, api.UploadBinding{UploadID: one.UploadID, Resource: one.Resource, Token: 8}, time.Hour); err == nil {
		t.Fatal("BindUpload of a bound id = nil; want an error")
	}
	if got, err := a.Upload(ctx, one.Resource, one.UploadID); got != one || err != nil {
		t.Fatalf("Upload after a refused rebind = %+v, %v; want %+v", got, err, one)
	}
	if err := b.UnbindUpload(ctx, one.UploadID); err != nil {
		t.Fatalf("UnbindUpload = %v", err)
	}
	if _, err := a.Upload(ctx, one.Resource, one.UploadID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Upload after UnbindUpload = %v; want ErrNotFound", err)
	}
	if err := b.UnbindUpload(ctx, one.UploadID); err != nil {
		t.Fatalf("UnbindUpload of an unbound id = %v; want nil", err)
	}
}

// TestUploadBindingsExpire: a binding that is never unbound (an abandoned
// upload) goes away on its own once its TTL has passed, so that abandoned
// uploads do not accumulate in etcd; the bindings share leases.
func TestUploadBindingsExpire(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	u := newUploads(t, newStore(t, client))
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if err := u.BindUpload(ctx, api.UploadBinding{UploadID: id, Resource: "s3/b/k", Token: 3}, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := client.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 {
		t.Fatalf("%d leases for 3 bindings; want 1 shared", len(leases.Leases))
	}
	testenv.WaitUntil(t, 15*time.Second, "the bindings expire", func() bool {
		resp, err := client.Get(ctx, "test/uploads/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	if _, err := u.Upload(ctx, "s3/b/k", "a"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Upload after expiry = %v; want ErrNotFound", err)
	}
}

// TestUploadsUnavailable: with etcd stopped, a bind or lookup is
// api.ErrUnavailable, never a binding or a not-found.
func TestUploadsUnavailable(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	u := newUploads(t, newStore(t, etcd.Client(t)))
	ctx := context.Background()
	if err := u.BindUpload(ctx, api.UploadBinding{UploadID: "x", Resource: "s3/b/k", Token: 3}, time.Hour); err != nil {
		t.Fatal(err)
	}
	etcd.Stop(t)
	if _, err := u.Upload(ctx, "s3/b/k", "x"); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("Upload with etcd down = %v; want ErrUnavailable", err)
	}
	if err := u.BindUpload(ctx, api.UploadBinding{UploadID: "y", Resource: "s3/b/k", Token: 3}, time.Hour); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("BindUpload with etcd down = %v; want ErrUnavailable", err)
	}
}
