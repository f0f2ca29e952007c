package retention_test

import (
	"context"
	"log/slog"
	"time"

	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/retention"
	"fencegate/tokenstore"
)

// ExampleNew wires an evictor next to a gateway: the token store holds
// the marks (and the evictors' turn), the S3 backend observes objects,
// the gateway's ETag cache serves nothing older than half the retention,
// and the evictor's metrics join the gateway's.
func ExampleNew() {
	var (
		ctx     context.Context   // the process's; Run returns when it ends
		store   *tokenstore.Store // tokenstore.New(client, ...)
		objects *s3.Client        // s3.New(ctx, ...)
	)
	marks := retention.Config{
		Retention:          24 * time.Hour, // marks.retention
		TombstoneRetention: 0,              // marks.tombstone_retention: for ever
		Logger:             slog.Default().With("component", "mark-evictor"),
	}
	evictor, err := retention.New(marks, store, objects)
	if err != nil {
		panic(err)
	}
	gw, err := gateway.New(gateway.Config{ETagCacheMaxAge: marks.ETagCacheMaxAge()}, store, objects)
	if err != nil {
		panic(err)
	}
	gw.Registry().MustRegister(evictor)
	go evictor.Run(ctx)
}
