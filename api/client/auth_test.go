package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// TestAPIKey runs the client against a gateway that authenticates API
// keys: with Client.APIKey set, a whole WithLock (session, keepalives,
// lock, fenced write) works; without it, or with a key whose grants do not
// cover the object, the gateway's refusals come back as errors that
// errors.Is recognises.
func TestAPIKey(t *testing.T) {
	const key, otherKey = "fgk_client_test_5d41402abc4b2a76b9719d911017c592", "fgk_client_test_other_7d793037a0760186574b0282f2f435e7"
	etcd := testenv.StartEtcd(t)
	bucket := fmt.Sprintf("k%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1))
	sharedS3.CreateBucket(t, bucket)
	auth := edge.Auth{
		Identities: []edge.Identity{
			{Name: "job", Grants: []edge.Grant{
				{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpWrite, edge.OpRead}},
				{Prefix: "job", Operations: []edge.Operation{edge.OpLock}},
			}},
			{Name: "other", Grants: []edge.Grant{{Prefix: "s3/elsewhere/", Operations: []edge.Operation{edge.OpWrite}}}},
		},
		APIKeys: []edge.APIKey{
			{SHA256: sha256.Sum256([]byte(key)), Identity: "job"},
			{SHA256: sha256.Sum256([]byte(otherKey)), Identity: "other"},
		},
	}
	gw, err := newGatewayHandler(etcd.Client(t), sharedS3.Endpoint(), nil, gateway.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	// Count the keepalives that carried the key, to wait for one below.
	var keepalives atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/keepalive") && r.Header.Get("Authorization") == "Bearer "+key {
			keepalives.Add(1)
		}
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	c := &client.Client{BaseURL: srv.URL, APIKey: key, SessionTTL: time.Second}
	err = c.WithLock(ctx, "job", func(ctx context.Context, token api.Token) error {
		// Stay until the session has been kept alive once: keepalives
		// carry the key too, or the session would be lost.
		for deadline := time.Now().Add(30 * time.Second); keepalives.Load() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("no keepalive with the key in 30s")
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("session lost: %w", context.Cause(ctx))
		}
		_, err := c.PutObject(ctx, bucket, "out.csv", token, bytes.NewReader([]byte("v1")))
		return err
	})
	if err != nil {
		t.Fatalf("WithLock with the API key = %v", err)
	}
	anonymous := &client.Client{BaseURL: srv.URL}
	if _, err := anonymous.PutObject(ctx, bucket, "out.csv", 100, bytes.NewReader([]byte("x"))); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("PutObject without a key = %v; want api.ErrUnauthorized", err)
	}
	if err := anonymous.WithLock(ctx, "job", func(context.Context, api.Token) error { return nil }); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("WithLock without a key = %v; want api.ErrUnauthorized", err)
	}
	other := &client.Client{BaseURL: srv.URL, APIKey: otherKey}
	if _, err := other.PutObject(ctx, bucket, "out.csv", 100, bytes.NewReader([]byte("x"))); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("PutObject with a key for another prefix = %v; want api.ErrForbidden", err)
	}
	if hwm, err := c.HighWaterMark(ctx, api.ObjectResource(bucket, "out.csv")); err != nil || hwm == 100 {
		t.Errorf("high-water mark after refused writes = %d, %v; want the lock's token, not 100", hwm, err)
	}
}
