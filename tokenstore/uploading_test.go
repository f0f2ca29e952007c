package tokenstore_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestResourcesUploading reads back the resources of the bound uploads,
// across more than one page of bindings, and none once they are unbound;
// a binding that does not decode is an error, never a resource left out.
func TestResourcesUploading(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	store := newStore(t, client)
	uploads := newUploads(t, store)
	ctx := context.Background()
	if got, err := store.ResourcesUploading(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ResourcesUploading with no uploads = %v, %v; want none", got, err)
	}
	want := map[api.Resource]bool{"s3/b/k": true, "s3/b/other": true}
	for i, r := range []api.Resource{"s3/b/k", "s3/b/k", "s3/b/other"} {
		if err := uploads.BindUpload(ctx, api.UploadBinding{UploadID: fmt.Sprintf("u%d", i), Resource: r, Token: 5}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// More bindings than a page holds, after the first ones in key order.
	for i := range 1000 {
		r := api.Resource(fmt.Sprintf("s3/many/%04d", i))
		want[r] = true
		if _, err := client.Put(ctx, fmt.Sprintf("test/uploads/v%04d", i), fmt.Sprintf(`{"resource":%q,"token":"5"}`, r)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.ResourcesUploading(ctx)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("ResourcesUploading = %d resources, %v; want %d", len(got), err, len(want))
	}
	if _, err := client.Put(ctx, "test/uploads/zz", "not json"); err != nil {
		t.Fatal(err)
	}
	if got, err := store.ResourcesUploading(ctx); err == nil {
		t.Fatalf("ResourcesUploading with a binding that does not decode = %d resources, nil; want an error", len(got))
	}
}
