package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"strings"
	"time"

	"fencegate/api/client"
	"fencegate/api/client/tokensource/mysql"
)

// A worker takes the lease "report" for 30 seconds and writes through the
// gateway with the grant's fence as its token. (The program imports a
// MySQL driver, such as github.com/go-sql-driver/mysql, for sql.Open.)
func ExampleAcquire() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/fencing")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, mysql.Schema); err != nil {
		log.Fatal(err)
	}
	token, err := mysql.Acquire(ctx, db, "report", "worker-1", 30*time.Second)
	if errors.Is(err, mysql.ErrHeld) {
		return // someone else holds an unexpired lease
	}
	if err != nil {
		log.Fatal(err)
	}
	defer mysql.Release(ctx, db, "report", token)
	c := &client.Client{BaseURL: "http://127.0.0.1:8080"}
	if _, err := c.PutObject(ctx, "dev", "report.csv", token, strings.NewReader("worker 1's report")); err != nil {
		log.Fatal(err) // api.ErrStaleToken: a newer grant wrote; this worker's lease is gone
	}
}
