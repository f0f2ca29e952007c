package zookeeper_test

import (
	"context"
	"log"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"fencegate/api/client"
	"fencegate/api/client/tokensource/zookeeper"
)

// A worker takes the ZooKeeper lock /locks/report and writes through the
// gateway with the lock znode's czxid as its token.
func ExampleLock() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	lock := zookeeper.NewLock(conn, "/locks/report", nil)
	token, err := lock.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock()
	c := &client.Client{BaseURL: "http://127.0.0.1:8080"}
	if _, err := c.PutObject(ctx, "dev", "report.csv", token, strings.NewReader("worker 1's report")); err != nil {
		log.Fatal(err) // api.ErrStaleToken: the session expired and a newer holder wrote
	}
}
