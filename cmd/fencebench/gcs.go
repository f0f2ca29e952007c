package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"fencegate/api"
	"fencegate/internal/devstack"
)

// The GCS cells: accepted writes through the gateway to a bucket that its
// config puts in GCS, against conditional writes straight to the same
// fake-gcs-server (ifGenerationMatch), in the same run and in alternating
// rounds, like the S3 cells. fake-gcs-server runs as a child process
// (devstack), started only when a GCS mode is asked for.
const (
	// modeGCSDirect is a conditional write straight to fake-gcs-server
	// with cloud.google.com/go/storage (the library the gateway's GCS
	// backend uses, set up alike: JSON API, no retries, one request per
	// write), ifGenerationMatch the generation of the writer's own last
	// write (0, "does not exist", for the first): no fencing, the floor.
	modeGCSDirect = "gcs-direct"
	// modeGCSGateway is a PUT through a gateway whose config maps the
	// bucket gcsBenchBucket to that fake-gcs-server.
	modeGCSGateway = "gcs-gateway"
	// gcsBenchBucket is the GCS cells' bucket.
	gcsBenchBucket = "bench-gcs"
	// gcsCellConcurrency is the concurrency of the GCS cells (distinct
	// keys, 1 KiB bodies), the cell the summary line compares.
	gcsCellConcurrency = 64
)

// gcsMode reports whether m is a GCS mode.
func gcsMode(m string) bool { return m == modeGCSDirect || m == modeGCSGateway }

// gcsCells returns the GCS cells of a run: the GCS modes of cfg.modes at
// 64 writers on distinct keys with 1 KiB bodies, one shape, last in the
// plan.
func gcsCells(cfg config) []cell {
	var cells []cell
	for _, m := range cfg.modes {
		if gcsMode(m) {
			cells = append(cells, cell{m, patternDistinct, 1 << 10, gcsCellConcurrency})
		}
	}
	return cells
}

// gcsBench is the GCS cells' part of a run: fake-gcs-server, the direct
// client, and the gateway in front of it.
type gcsBench struct {
	server  *devstack.GCSServer
	pid     int // the server's, for its CPU figures (0: unknown)
	direct  *storage.Client
	gateway *gatewayProcess
}

// startGCS starts fake-gcs-server under the work directory, creates the
// bucket, and starts the direct client and the GCS gateway, when cfg asks
// for a GCS mode; otherwise it does nothing.
func (b *bench) startGCS(ctx context.Context) (err error) {
	if len(gcsCells(b.cfg)) == 0 {
		return nil
	}
	g := &gcsBench{}
	b.gcs = g // closed by close, whatever happens below
	if g.server, err = devstack.StartFakeGCS(ctx, devstack.GCSConfig{Dir: filepath.Join(b.cfg.workDir, "gcs")}); err != nil {
		return err
	}
	if err := g.server.CreateBucket(ctx, gcsBenchBucket); err != nil {
		return err
	}
	g.pid = childPID("fake-gcs-server")
	g.direct, err = storage.NewClient(ctx, storage.WithJSONReads(), option.WithEndpoint(g.server.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		return fmt.Errorf("gcs client: %w", err)
	}
	// As the gateway's backend: a retry of a conditional write whose
	// answer was lost would fail its own precondition.
	g.direct.SetRetry(storage.WithPolicy(storage.RetryNever))
	configPath := filepath.Join(b.cfg.workDir, "gcs-gateway.yaml")
	config := fmt.Sprintf("buckets:\n  - name: %s\n    store: gcs\n    endpoint: %s\n", gcsBenchBucket, g.server.Endpoint())
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return err
	}
	g.gateway, err = startMeasuredGateway(ctx, b.st, modeGCSGateway, b.bin, b.st.s3Endpoint, b.cfg.gatewayLogLevel, "--config", configPath)
	return err
}

// close stops what startGCS started.
func (g *gcsBench) close() {
	if g == nil {
		return
	}
	if g.gateway != nil {
		g.gateway.stop()
	}
	if g.direct != nil {
		_ = g.direct.Close()
	}
	if g.server != nil {
		g.server.Close()
	}
}

// gcsOperation returns the operation of a GCS cell, and its gateway (nil
// for the direct cell).
func (b *bench) gcsOperation(c cell) (operation, *gatewayProcess) {
	if c.mode == modeGCSGateway {
		return gatewayPut(b.http, b.gcs.gateway.url, gcsBenchBucket, c.size, writeTokenHeader(c.pattern)), b.gcs.gateway
	}
	return gcsDirectPut(b.gcs.direct, gcsBenchBucket), nil
}

// gcsDirectPut is modeGCSDirect: a conditional write of the worker's
// object, on the generation of its last write (the worker's etag holds
// it, in decimal); on a lost race it reads the object's generation and tries again.
func gcsDirectPut(client *storage.Client, bucket string) operation {
	metadata := map[string]string{api.MetadataFenceToken: benchToken.String()}
	return func(ctx context.Context, w *worker) (outcome, error) {
		obj := client.Bucket(bucket).Object(w.key)
		for range writeAttempts {
			cond := storage.Conditions{DoesNotExist: true}
			if w.object.exists {
				gen, _ := strconv.ParseInt(w.object.etag, 10, 64)
				cond = storage.Conditions{GenerationMatch: gen}
			}
			gen, err := gcsWrite(ctx, obj.If(cond), w.nextBody(), metadata)
			if err == nil {
				w.object = objectVersion{exists: true, etag: strconv.FormatInt(gen, 10)}
				return outcomeOK, nil
			}
			var gerr *googleapi.Error
			if !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
				return outcomeError, fmt.Errorf("gcs direct write: %w", err)
			}
			attrs, err := obj.Attrs(ctx)
			switch {
			case err == nil:
				w.object = objectVersion{exists: true, etag: strconv.FormatInt(attrs.Generation, 10)}
			case errors.Is(err, storage.ErrObjectNotExist):
				w.object = objectVersion{}
			default:
				return outcomeError, fmt.Errorf("gcs direct attrs: %w", err)
			}
		}
		return outcomeConflict, nil
	}
}

// gcsWrite uploads body to obj in one request (a multipart upload, as the
// gateway's backend does) and returns the new generation.
func gcsWrite(ctx context.Context, obj *storage.ObjectHandle, body io.Reader, metadata map[string]string) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(ctx)
	w.ChunkSize = 0
	w.Metadata = metadata
	if _, err := io.Copy(w, body); err != nil {
		cancel()
		_ = w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return w.Attrs().Generation, nil
}
