package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"fencegate/internal/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartServesSQL(t *testing.T) {
	srv := postgres.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatalf("connect %s: %v", srv.URL, err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s on port %d", version, srv.Port)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("SELECT 1 + 1 = %d, %v", n, err)
	}
	if !strings.HasPrefix(srv.URL, "postgres://postgres@127.0.0.1:") {
		t.Errorf("URL %q", srv.URL)
	}
}

// TestTwoServersAreIndependent: each test gets its own server and data.
func TestTwoServersAreIndependent(t *testing.T) {
	a, b := postgres.Start(t), postgres.Start(t)
	if a.Port == b.Port {
		t.Fatalf("two servers on port %d", a.Port)
	}
	ctx := context.Background()
	ca, err := pgx.Connect(ctx, a.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var exists bool
	if err := cb.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("table of server a seen on server b: %v, %v", exists, err)
	}
}

func TestFindBin(t *testing.T) {
	t.Setenv(postgres.BinEnv, t.TempDir())
	if _, err := postgres.FindBin(); err == nil {
		t.Fatal("FindBin with an empty $FENCEGATE_PG_BIN succeeded")
	}
}
