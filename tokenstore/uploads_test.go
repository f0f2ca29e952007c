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

// withoutRevision is b as it was bound, before the store gave it a
// revision.
func withoutRevision(b api.UploadBinding) api.UploadBinding {
	b.Revision = 0
	return b
}

// TestUploadBindings binds uploads to their resource, token and secret,
// reads them back by id (from another gateway's store too), and unbinds
// them.
func TestUploadBindings(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	a := newUploads(t, newStore(t, etcd.Client(t)))
	b := newUploads(t, newStore(t, etcd.Client(t)))
	ctx := context.Background()
	one := api.UploadBinding{UploadID: "upload-1", Resource: "s3/b/k", Token: 7, Secret: "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
		Size: 12 << 20, PartSize: 5 << 20}
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
		{"bound, odd id, no secret", two.UploadID, two.Resource, two, nil},
		{"another resource's upload", one.UploadID, two.Resource, api.UploadBinding{}, api.ErrNotFound},
		{"never bound", "upload-3", one.Resource, api.UploadBinding{}, api.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.Upload(ctx, tt.resource, tt.id)
			if withoutRevision(got) != tt.want || (err == nil) != (got.Revision != 0) || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Upload(%q, %q) = %+v, %v; want %+v with a revision, %v", tt.resource, tt.id, got, err, tt.want, tt.wantErr)
			}
		})
	}
	// A second bind of a bound id is refused: an upload id is bound once.
	if err := b.BindUpload(ctx, api.UploadBinding{UploadID: one.UploadID, Resource: one.Resource, Token: 8}, time.Hour); err == nil {
		t.Fatal("BindUpload of a bound id = nil; want an error")
	}
	read, err := a.Upload(ctx, one.Resource, one.UploadID)
	if withoutRevision(read) != one || err != nil {
		t.Fatalf("Upload after a refused rebind = %+v, %v; want %+v", read, err, one)
	}
	if err := b.UnbindUpload(ctx, read); err != nil {
		t.Fatalf("UnbindUpload = %v", err)
	}
	if _, err := a.Upload(ctx, one.Resource, one.UploadID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Upload after UnbindUpload = %v; want ErrNotFound", err)
	}
	if err := b.UnbindUpload(ctx, read); err != nil {
		t.Fatalf("UnbindUpload of an unbound id = %v; want nil", err)
	}
	// A binding never read from the store is unbound by its value.
	if err := b.UnbindUpload(ctx, two); err != nil {
		t.Fatalf("UnbindUpload(%+v) = %v", two, err)
	}
	if _, err := a.Upload(ctx, two.Resource, two.UploadID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Upload after UnbindUpload by value = %v; want ErrNotFound", err)
	}
}

// TestUnbindOnlyTheBindingRead: UnbindUpload deletes a binding only if it
// is still the one its caller read (or, unread, holds what it says): the
// same id bound again since, bound to another resource, or to another
// token or secret, stays bound.
func TestUnbindOnlyTheBindingRead(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	u := newUploads(t, newStore(t, etcd.Client(t)))
	ctx := context.Background()
	bound := api.UploadBinding{UploadID: "u", Resource: "s3/b/secret", Token: 5, Secret: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	if err := u.BindUpload(ctx, bound, time.Hour); err != nil {
		t.Fatal(err)
	}
	old, err := u.Upload(ctx, bound.Resource, bound.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	// The id is unbound and bound again: old is not the binding any more.
	if err := u.UnbindUpload(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := u.BindUpload(ctx, bound, time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    api.UploadBinding
	}{
		{"a revision read before it was bound again", old},
		{"another resource", api.UploadBinding{UploadID: "u", Resource: "s3/b/logs/mine", Token: 5, Secret: bound.Secret}},
		{"another token", api.UploadBinding{UploadID: "u", Resource: bound.Resource, Token: 6, Secret: bound.Secret}},
		{"no secret", api.UploadBinding{UploadID: "u", Resource: bound.Resource, Token: 5}},
		{"a revision that never was", api.UploadBinding{UploadID: "u", Resource: bound.Resource, Token: 5, Revision: 1 << 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := u.UnbindUpload(ctx, tt.b); err != nil {
				t.Fatalf("UnbindUpload(%+v) = %v", tt.b, err)
			}
			if got, err := u.Upload(ctx, bound.Resource, bound.UploadID); err != nil || withoutRevision(got) != bound {
				t.Fatalf("Upload after UnbindUpload(%+v) = %+v, %v; want %+v still bound", tt.b, got, err, bound)
			}
		})
	}
}

// TestUploadBindingOfAnOlderGateway: a binding recorded before bindings
// had a secret ({"resource", "token"} only) reads as one without a
// secret.
func TestUploadBindingOfAnOlderGateway(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	u := newUploads(t, newStore(t, client))
	ctx := context.Background()
	if _, err := client.Put(ctx, "test/uploads/old", `{"resource":"s3/b/k","token":4}`); err != nil {
		t.Fatal(err)
	}
	got, err := u.Upload(ctx, "s3/b/k", "old")
	if want := (api.UploadBinding{UploadID: "old", Resource: "s3/b/k", Token: 4}); err != nil || withoutRevision(got) != want {
		t.Fatalf("Upload of an older gateway's binding = %+v, %v; want %+v", got, err, want)
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

// TestFinishUpload: FinishUpload replaces a binding with the same binding
// marked finished (its state, ETag and parts digest read back), by its
// revision when read, by its value when not; a binding that changed since
// (finished already, or rebound) stays as it is.
func TestFinishUpload(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	u := newUploads(t, newStore(t, etcd.Client(t)))
	ctx := context.Background()
	one := api.UploadBinding{UploadID: "upload-1", Resource: "s3/b/k", Token: 7, Secret: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	two := api.UploadBinding{UploadID: "upload-2", Resource: "s3/b/k", Token: 8}
	for _, ub := range []api.UploadBinding{one, two} {
		if err := u.BindUpload(ctx, ub, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	read, err := u.Upload(ctx, one.Resource, one.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	done := read
	done.State, done.ETag, done.PartsDigest = api.UploadCompleted, `"etag-2"`, "digest"
	if err := u.FinishUpload(ctx, done, time.Minute); err != nil {
		t.Fatalf("FinishUpload(%+v) = %v", done, err)
	}
	got, err := u.Upload(ctx, one.Resource, one.UploadID)
	if got.State != api.UploadCompleted || got.ETag != `"etag-2"` || got.PartsDigest != "digest" || got.Token != 7 || got.Secret != one.Secret || err != nil {
		t.Fatalf("Upload after FinishUpload = %+v, %v; want %+v", got, err, done)
	}
	// The same revision again: the binding changed since, and stays.
	again := read
	again.State = api.UploadAbortedStale
	if err := u.FinishUpload(ctx, again, time.Minute); err != nil {
		t.Fatalf("FinishUpload of a changed binding = %v; want nil", err)
	}
	if got, _ := u.Upload(ctx, one.Resource, one.UploadID); got.State != api.UploadCompleted {
		t.Fatalf("after FinishUpload of a changed binding, state %q; want it left completed", got.State)
	}
	// By value: the binding as bound, never read.
	stale := two
	stale.State = api.UploadAbortedStale
	if err := u.FinishUpload(ctx, stale, time.Minute); err != nil {
		t.Fatalf("FinishUpload(%+v) = %v", stale, err)
	}
	if got, err := u.Upload(ctx, two.Resource, two.UploadID); got.State != api.UploadAbortedStale || err != nil {
		t.Fatalf("Upload after FinishUpload by value = %+v, %v; want aborted-stale", got, err)
	}
}
