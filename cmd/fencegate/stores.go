package main

import (
	"context"
	"errors"
	"fmt"

	"fencegate/api"
	"fencegate/backends/gcs"
	"fencegate/backends/s3"
	"fencegate/backends/stores"
	"fencegate/gateway"
	"fencegate/internal/config"
	"fencegate/rest"
	"fencegate/retention"
)

// objectStores are the stores the gateway writes through.
type objectStores struct {
	// objects is what the gateway and the mark evictor are given: the S3
	// client alone when no bucket is in GCS, else a stores.Router that
	// sends each bucket to its store (every bucket not mapped to S3).
	objects interface {
		gateway.ObjectStore
		retention.ObjectObserver
	}
	// probes are the readiness probes of the stores besides S3: "gcs",
	// which lists at most one object of every bucket in GCS.
	probes []rest.Probe
	// clients are the GCS clients, one per distinct config, which close
	// closes.
	clients []*gcs.Client
}

// newObjectStores builds a GCS client for the buckets that buckets puts
// in GCS (one per distinct config: the same endpoint shares a client) and
// a stores.Router over them and s3Client.
func newObjectStores(ctx context.Context, s3Client *s3.Client, buckets []config.Bucket) (*objectStores, error) {
	out := &objectStores{objects: s3Client}
	gcsBuckets := config.Features{Buckets: buckets}.GCSBuckets()
	if len(gcsBuckets) == 0 {
		return out, nil
	}
	byConfig := map[gcs.Config]*gcs.Client{}
	mapped := make(map[string]stores.Named, len(gcsBuckets))
	type pinged struct {
		bucket string
		client *gcs.Client
	}
	var pings []pinged
	for _, b := range gcsBuckets {
		client, ok := byConfig[b.GCS]
		if !ok {
			var err error
			if client, err = gcs.New(ctx, b.GCS); err != nil {
				out.close()
				return nil, fmt.Errorf("bucket %s: %w", b.Name, err)
			}
			byConfig[b.GCS] = client
			out.clients = append(out.clients, client)
		}
		mapped[b.Name] = stores.Named{Name: api.StoreGCS, Store: client}
		pings = append(pings, pinged{b.Name, client})
	}
	router, err := stores.New(stores.Named{Name: api.StoreS3, Store: s3Client}, mapped)
	if err != nil {
		out.close()
		return nil, err
	}
	out.objects = router
	out.probes = []rest.Probe{{Name: api.StoreGCS, Ping: func(ctx context.Context) error {
		var errs []error
		for _, p := range pings {
			errs = append(errs, p.client.Ping(ctx, p.bucket))
		}
		return errors.Join(errs...)
	}}}
	return out, nil
}

// close closes the GCS clients.
func (s *objectStores) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}
