package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.etcd.io/etcd/client/v3/concurrency"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/internal/postgres"
	"fencegate/tokenstore"
)

// The token sources of docs/token-sources.md, each used
// through the gateway: a token from each is accepted, and the token of an
// earlier grant is refused as stale after a later grant wrote.

// TestTokenSourceEtcdMutex: etcd's own concurrency.Mutex; the token is the
// create revision of the holder's key. On the gateway's own etcd cluster
// such tokens also pass the "plausible" check.
func TestTokenSourceEtcdMutex(t *testing.T) {
	e := newEnv(t, func(bucket string) []tokenstore.Policy {
		return []tokenstore.Policy{{Prefix: api.Resource("s3/" + bucket + "/"), Check: tokenstore.CheckPlausible}}
	})
	etcd := e.etcd.Client(t)
	ctx := context.Background()
	c := &client.Client{BaseURL: e.url}
	grant := func() api.Token {
		t.Helper()
		session, err := concurrency.NewSession(etcd, concurrency.WithTTL(10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = session.Close() })
		mu := concurrency.NewMutex(session, "/locks/report")
		if err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		resp, err := etcd.Get(ctx, mu.Key())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading the lock key: %v", err)
		}
		token := api.Token(resp.Kvs[0].CreateRevision) // the fencing token
		if err := mu.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return token
	}
	first, second := grant(), grant()
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", second, strings.NewReader("second")); err != nil {
		t.Fatalf("write with the Mutex's token %d: %v", second, err)
	}
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", first, strings.NewReader("first")); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("write with the earlier token %d = %v; want stale", first, err)
	}
}

// TestTokenSourceFencegateLock: the gateway's own lock API; the token is the
// grant's.
func TestTokenSourceFencegateLock(t *testing.T) {
	e := newEnv(t, heldBucket("report"))
	ctx := context.Background()
	c := &client.Client{BaseURL: e.url}
	var tokens []api.Token
	for range 2 {
		err := c.WithLock(ctx, "report", func(ctx context.Context, token api.Token) error {
			tokens = append(tokens, token)
			_, err := c.PutObject(ctx, e.bucket, "report.csv", token, strings.NewReader(token.String()))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v; want increasing", tokens)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != tokens[1].String() || token != tokens[1].String() {
		t.Fatalf("S3 holds %q with token %q", body, token)
	}
}

// leaseTableSQL is the seed's SQL lease table: one row per lock, and a
// fence column bumped by every grant.
const leaseTableSQL = `CREATE TABLE leases (
	name       text PRIMARY KEY,
	owner      text,
	expires_at timestamptz,
	fence      bigint NOT NULL DEFAULT 0
);
INSERT INTO leases (name) VALUES ('report');`

// acquireLeaseSQL is the seed's grant, verbatim: it takes the lease if it
// is free or expired, and returns the new fence, the fencing token.
const acquireLeaseSQL = `UPDATE leases SET owner = $1, expires_at = now() + interval '30 seconds', fence = fence + 1 WHERE name = $2 AND (owner IS NULL OR expires_at < now()) RETURNING fence`

// TestTokenSourceSQLLeaseTable runs the seed scenario with the seed's SQL
// lease table on a real PostgreSQL: client 1 takes the lease (fence 1) and
// stalls past its 30 seconds (simulated by moving expires_at back), client
// 2 takes it (fence 2) and writes; client 1's late write is refused.
func TestTokenSourceSQLLeaseTable(t *testing.T) {
	pg := postgres.Start(t)
	e := newEnv(t, nil) // tokens from a database: only "none" applies
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, leaseTableSQL); err != nil {
		t.Fatal(err)
	}
	acquire := func(owner string) (api.Token, bool) {
		t.Helper()
		var fence int64
		err := db.QueryRow(ctx, acquireLeaseSQL, owner, "report").Scan(&fence)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false // someone holds an unexpired lease
		}
		if err != nil {
			t.Fatal(err)
		}
		return api.Token(fence), true
	}
	c := &client.Client{BaseURL: e.url}

	token1, ok := acquire("client-1")
	if !ok || token1 != 1 {
		t.Fatalf("client 1's grant = %d, %v; want fence 1", token1, ok)
	}
	if _, ok := acquire("client-2"); ok {
		t.Fatal("client 2 took a lease that client 1 holds")
	}
	// Client 1 stalls for longer than its lease: 30 seconds pass.
	if _, err := db.Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 second' WHERE name = 'report'`); err != nil {
		t.Fatal(err)
	}
	token2, ok := acquire("client-2")
	if !ok || token2 != 2 {
		t.Fatalf("client 2's grant = %d, %v; want fence 2", token2, ok)
	}
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", token2, strings.NewReader("client 2's report")); err != nil {
		t.Fatalf("client 2's write: %v", err)
	}
	_, err = c.PutObject(ctx, e.bucket, "report.csv", token1, strings.NewReader("client 1's report"))
	if !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("client 1's late write = %v; want stale", err)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != "client 2's report" || token != "2" {
		t.Fatalf("S3 holds %q with token %q; want client 2's report with 2", body, token)
	}
}
