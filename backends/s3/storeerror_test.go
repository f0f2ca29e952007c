package s3_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"fencegate/api"
)

// TestStoreErrorKeepsCodeNotText: S3's refusals come back as
// *api.StoreError with S3's code and status, of the class the gateway
// answers them with, refused for what the client asked (so the S3 API
// answers S3's code), and with no text of the SDK's (its request and host
// ids) in the error's text; that stays in Err, for the log. A HEAD's 404,
// which has no code, is not passed on; neither is a lost write condition.
func TestStoreErrorKeepsCodeNotText(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "storeerrors")
	c := newClient(t, server.Endpoint(), 0)
	if _, err := put(ctx, c, api.ObjectPath{Bucket: "storeerrors", Key: "k"}, "v", 1, api.ObjectVersion{}); err != nil {
		t.Fatal(err)
	}
	_, missingBucket := put(ctx, c, api.ObjectPath{Bucket: "storeerrors-missing", Key: "k"}, "v", 1, api.ObjectVersion{})
	_, lostRace := put(ctx, c, api.ObjectPath{Bucket: "storeerrors", Key: "k"}, "v", 1, api.ObjectVersion{})
	_, headMissing := c.Head(ctx, api.GetObjectInput{Path: api.ObjectPath{Bucket: "storeerrors", Key: "gone"}})
	tests := []struct {
		name    string
		err     error
		class   error
		code    string
		status  int
		refused bool
	}{
		{"PUT to a missing bucket", missingBucket, api.ErrNotFound, "NoSuchBucket", 404, true},
		{"PUT If-None-Match over an object", lostRace, api.ErrConcurrentModification, "PreconditionFailed", 412, false},
		{"HEAD of a missing key", headMissing, api.ErrNotFound, "NotFound", 404, false},
	}
	for _, tt := range tests {
		var store *api.StoreError
		if !errors.As(tt.err, &store) {
			t.Errorf("%s: %v; want an *api.StoreError", tt.name, tt.err)
			continue
		}
		if !errors.Is(tt.err, tt.class) || store.Code != tt.code || store.Status != tt.status || store.Refused != tt.refused {
			t.Errorf("%s: %v: class %v, code %q, status %d, refused %v; want %v, %q, %d, %v", tt.name, tt.err,
				errors.Is(tt.err, tt.class), store.Code, store.Status, store.Refused, tt.class, tt.code, tt.status, tt.refused)
		}
		for _, word := range []string{"operation error", "RequestID", "request id", "HostID", "api error"} {
			if strings.Contains(tt.err.Error(), word) {
				t.Errorf("%s: text %q holds the SDK's (%q)", tt.name, tt.err.Error(), word)
			}
		}
		if api.StoreAnswer(tt.err) == "" {
			t.Errorf("%s: StoreAnswer is empty; want the SDK's text for the log", tt.name)
		}
	}
}
