package client_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"fencegate/api"
	"fencegate/api/client"
	mysqllease "fencegate/api/client/tokensource/mysql"
	"fencegate/internal/mariadb"
)

// openMariaDB starts a MariaDB server for the test, opens it with
// go-sql-driver/mysql and creates the lease table.
func openMariaDB(tb testing.TB, params string) *sql.DB {
	tb.Helper()
	server := mariadb.Start(tb)
	db, err := sql.Open("mysql", server.DSN+"?"+params)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(context.Background(), mysqllease.Schema); err != nil {
		tb.Fatalf("creating the lease table: %v", err)
	}
	return db
}

// acquireAfterExpiry calls Acquire until the lease held by someone else
// has expired and it succeeds.
func acquireAfterExpiry(tb testing.TB, db *sql.DB, lock, holder string, ttl time.Duration) api.Token {
	tb.Helper()
	for {
		token, err := mysqllease.Acquire(context.Background(), db, lock, holder, ttl)
		if err == nil {
			return token
		}
		if !errors.Is(err, mysqllease.ErrHeld) {
			tb.Fatalf("%s's grant: %v", holder, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTokenSourceMySQLLeaseTable runs the seed scenario with a MySQL lease
// table on a real MariaDB: worker 1 takes the lease (fence 1) and stalls
// past its TTL, worker 2 takes it (fence 2) and writes through the
// gateway; worker 1's late write is refused 409, and S3, read with
// minio-go, holds worker 2's bytes.
func TestTokenSourceMySQLLeaseTable(t *testing.T) {
	db := openMariaDB(t, "")
	e := newEnv(t, nil) // tokens from a database: only "none" applies
	ctx := context.Background()
	c := &client.Client{BaseURL: e.url}
	const ttl = 3 * time.Second

	token1, err := mysqllease.Acquire(ctx, db, "report", "worker-1", ttl)
	if err != nil || token1 != 1 {
		t.Fatalf("worker 1's grant = %d, %v; want fence 1", token1, err)
	}
	if token, err := mysqllease.Acquire(ctx, db, "report", "worker-2", ttl); !errors.Is(err, mysqllease.ErrHeld) {
		t.Fatalf("worker 2's grant while worker 1 holds the lease = %d, %v; want ErrHeld", token, err)
	}
	// Worker 1 stalls (a GC pause, a VM migration) for longer than its
	// lease; worker 2 gets the lease once it expired.
	token2 := acquireAfterExpiry(t, db, "report", "worker-2", time.Minute)
	if token2 != 2 {
		t.Fatalf("worker 2's grant = %d; want fence 2", token2)
	}
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", token2, strings.NewReader("worker 2's report")); err != nil {
		t.Fatalf("worker 2's write: %v", err)
	}
	_, err = c.PutObject(ctx, e.bucket, "report.csv", token1, strings.NewReader("worker 1's report"))
	var stale *api.StaleTokenError
	if !errors.Is(err, api.ErrStaleToken) || !errors.As(err, &stale) || stale.HighWaterMark != token2 {
		t.Fatalf("worker 1's late write = %v; want 409 stale with high-water mark %d", err, token2)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != "worker 2's report" || token != "2" {
		t.Fatalf("S3 holds %q with token %q; want worker 2's report with 2", body, token)
	}
	if err := mysqllease.Release(ctx, db, "report", token1); !errors.Is(err, mysqllease.ErrNotHeld) {
		t.Fatalf("worker 1's release = %v; want ErrNotHeld", err)
	}
	if err := mysqllease.Release(ctx, db, "report", token2); err != nil {
		t.Fatalf("worker 2's release: %v", err)
	}
	if token3, err := mysqllease.Acquire(ctx, db, "report", "worker-1", ttl); err != nil || token3 != 3 {
		t.Fatalf("grant after the release = %d, %v; want fence 3", token3, err)
	}
}

// TestMySQLLeaseTokenIsTheStatementsOwn: the token Acquire returns is the
// one LAST_INSERT_ID() holds on the same connection, and a refused grant
// leaves LAST_INSERT_ID() at the previous grant's fence: reading it
// without checking that the UPDATE changed a row would hand a holder an
// old token.
func TestMySQLLeaseTokenIsTheStatementsOwn(t *testing.T) {
	db := openMariaDB(t, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lastInsertID := func() int64 {
		t.Helper()
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for want := api.Token(1); want <= 3; want++ {
		token, err := mysqllease.Acquire(ctx, conn, "job", "worker", time.Minute)
		if err != nil || token != want {
			t.Fatalf("grant %d = %d, %v", want, token, err)
		}
		if id := lastInsertID(); id != int64(token) {
			t.Fatalf("LAST_INSERT_ID() = %d after the grant of fence %d", id, token)
		}
		if _, err := mysqllease.Acquire(ctx, conn, "job", "other", time.Minute); !errors.Is(err, mysqllease.ErrHeld) {
			t.Fatalf("second grant while held = %v; want ErrHeld", err)
		}
		if id := lastInsertID(); id != int64(token) {
			t.Fatalf("LAST_INSERT_ID() = %d after a refused grant; want the previous fence %d", id, token)
		}
		if err := mysqllease.Release(ctx, conn, "job", token); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTokenSourcesDocMySQLSQL runs the MySQL SQL of docs/token-sources.md,
// as a user pastes it into the mariadb client (the setup block, then the
// grant's statements one by one in the same session), on a real MariaDB: the
// first run grants fence 1, a second run while the lease is held grants
// nothing (granted 0) and shows LAST_INSERT_ID() still at 1, which is why
// the document says to use the token only when granted is 1.
func TestTokenSourcesDocMySQLSQL(t *testing.T) {
	doc, err := os.ReadFile("../../docs/token-sources.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	var setup, grant string
	for _, b := range blocks {
		switch {
		case strings.Contains(b[1], "CREATE TABLE leases") && strings.Contains(b[1], "DATETIME(6)"):
			setup = b[1]
		case strings.Contains(b[1], "LAST_INSERT_ID(fence + 1)") && strings.Contains(b[1], "ROW_COUNT()"):
			grant = b[1]
		}
	}
	if setup == "" || grant == "" {
		t.Fatalf("docs/token-sources.md has no MySQL setup block (CREATE TABLE leases ... DATETIME(6)) and grant block (LAST_INSERT_ID(fence + 1) ... ROW_COUNT())")
	}
	db := openMariaDB(t, "multiStatements=true")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, setup); err != nil {
		t.Fatalf("the document's setup SQL: %v\n%s", err, setup)
	}
	run := func() (granted, token int64) {
		t.Helper()
		statements := strings.Split(strings.TrimSpace(grant), ";")
		for _, s := range statements {
			s = strings.TrimSpace(s)
			switch {
			case s == "":
			case strings.HasPrefix(s, "SELECT"):
				if err := conn.QueryRowContext(ctx, s).Scan(&granted, &token); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			default:
				if _, err := conn.ExecContext(ctx, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
		}
		return granted, token
	}
	if granted, token := run(); granted != 1 || token != 1 {
		t.Fatalf("the document's grant, first run: granted %d, token %d; want 1, 1", granted, token)
	}
	if granted, token := run(); granted != 0 || token != 1 {
		t.Fatalf("the document's grant while held: granted %d, token %d; want 0 and LAST_INSERT_ID() still 1", granted, token)
	}
}
