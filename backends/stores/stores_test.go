package stores_test

import (
	"context"
	"errors"
	"testing"

	"fencegate/api"
	"fencegate/backends/stores"
)

// namedStore answers every call with its own name, so that a test can see
// which store a request reached.
type namedStore string

func (s namedStore) Observe(context.Context, api.ObjectPath) (api.ObjectVersion, error) {
	return api.ObjectVersion{Exists: true, ETag: string(s)}, nil
}
func (s namedStore) ConfirmAbsent(context.Context, api.ObjectPath) (bool, error) {
	return false, errors.New(string(s))
}
func (s namedStore) Put(context.Context, api.PutObjectInput) (string, error) { return string(s), nil }
func (s namedStore) Delete(context.Context, api.ObjectPath, string) error    { return nil }
func (s namedStore) Get(context.Context, api.GetObjectInput) (*api.Object, error) {
	return &api.Object{ETag: string(s)}, nil
}
func (s namedStore) Head(context.Context, api.GetObjectInput) (*api.Object, error) {
	return &api.Object{ETag: string(s)}, nil
}

func TestRouterDispatchesByBucket(t *testing.T) {
	r, err := stores.New(stores.Named{Name: api.StoreS3, Store: namedStore("s3 backend")},
		map[string]stores.Named{"archive": {Name: api.StoreGCS, Store: namedStore("gcs backend")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ bucket, store, backend string }{
		{"archive", api.StoreGCS, "gcs backend"},
		{"reports", api.StoreS3, "s3 backend"},
	} {
		p := api.ObjectPath{Bucket: tc.bucket, Key: "k"}
		v, _ := r.Observe(ctx, p)
		etag, _ := r.Put(ctx, api.PutObjectInput{Path: p})
		got, _ := r.Get(ctx, api.GetObjectInput{Path: p})
		head, _ := r.Head(ctx, api.GetObjectInput{Path: p})
		_, confirm := r.ConfirmAbsent(ctx, p)
		if r.StoreOf(tc.bucket) != tc.store || v.ETag != tc.backend || etag != tc.backend || got.ETag != tc.backend || head.ETag != tc.backend || confirm.Error() != tc.backend {
			t.Errorf("bucket %s: StoreOf %q, Observe %q, Put %q, Get %q, Head %q, ConfirmAbsent %q; want store %q, backend %q",
				tc.bucket, r.StoreOf(tc.bucket), v.ETag, etag, got.ETag, head.ETag, confirm, tc.store, tc.backend)
		}
	}
	if _, err := stores.New(stores.Named{Name: api.StoreS3}, nil); err == nil {
		t.Error("New with a fallback without a backend: no error")
	}
}
