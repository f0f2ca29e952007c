package gateway

// What the gateway gives the engine (package fence) and takes from it:
// the edge's answers to the engine's questions (who may do what, where to
// log, what to count and publish), and the engine's store interfaces
// under the names the gateway's callers use.

import (
	"context"
	"log/slog"

	"fencegate/api"
	"fencegate/events"
	"fencegate/fence"
)

// The stores the gateway's engine runs the protocol over (see package
// fence for each contract).
type (
	FenceStore     = fence.FenceStore
	ObjectStore    = fence.ObjectStore
	ObjectWriter   = fence.ObjectWriter
	ObjectReader   = fence.ObjectReader
	KeyedObserver  = fence.KeyedObserver
	TagReader      = fence.TagReader
	BucketStores   = fence.BucketStores
	MultipartStore = fence.MultipartStore
	UploadStore    = fence.UploadStore
)

// WriteResult is the body of a successful PUT (see fence.WriteResult).
type WriteResult = fence.WriteResult

// edge answers the engine for a Gateway: authorization by identities and
// their grants, and the request's log lines, metrics and events.
type edge struct{ g *Gateway }

var (
	_ fence.Authorizer = edge{}
	_ fence.Monitor    = edge{}
)

// Authorize is the gateway's authorize of the operation of the same name.
func (e edge) Authorize(ctx context.Context, access fence.Access, resource api.Resource) error {
	return e.g.authorize(ctx, Operation(access), resource)
}

func (e edge) Logger(ctx context.Context) *slog.Logger { return e.g.logger(ctx) }

func (e edge) StaleFound(ctx context.Context, source string) { noteStaleSource(ctx, source) }

func (e edge) WriteAccepted(ctx context.Context, res fence.WriteResult) { e.g.accepted(ctx, res) }

func (e edge) DeleteAccepted(ctx context.Context, resource api.Resource, token api.Token) {
	e.g.publishObject(ctx, events.KindDeleteAccepted, resource, token, "", false)
}

func (e edge) BodyRefused() { e.g.metrics.bodyBudgetRefusals.Inc() }

func (e edge) UploadCreated()   { e.g.multipart.metrics.created.Inc() }
func (e edge) UploadCompleted() { e.g.multipart.metrics.completed.Inc() }
func (e edge) UploadAborted(reason string) {
	e.g.multipart.metrics.aborted.WithLabelValues(reason).Inc()
}
func (e edge) PartRefusedStale() { e.g.multipart.metrics.partsStale.Inc() }
