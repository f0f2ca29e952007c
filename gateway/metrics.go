package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/fence"
)

// Metrics: every gateway has its own Prometheus registry (tests build many
// gateways in one process), served on GET /metrics. Request metrics are
// labelled by chi's route pattern, never by the request's path, so that
// the number of series stays bounded whatever clients send.
// docs/operations.md, "Metrics", lists every metric.

// latencyBuckets span 0.1 ms to about 15 s: a stale refusal from the cache
// takes well under a millisecond, an accepted write a few, a large upload
// seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 14)

// Values of the metrics' labels.
const (
	// routeNone is the route label of requests that matched no route, or
	// that were answered before routing (such as 431).
	routeNone = "none"
	// methodOther is the method label of methods that no route serves.
	methodOther = "other"

	// Stale refusal sources (fencegate_stale_refusals_total).
	staleFromCache  = fence.StaleFromCache  // the fast reject: the cached mark is larger
	staleFromObject = fence.StaleFromObject // the object already records a larger token
	staleFromEtcd   = fence.StaleFromEtcd   // the fence check's transaction

	// Fence check results (fencegate_fence_check_duration_seconds).
	fenceAccepted = "accepted"
	fenceStale    = "stale"
	fenceRefused  = "refused" // a token check: lock not held, implausible
	fenceError    = "error"   // outcome unknown: etcd unavailable, timeout

	// Results of the token store's requests that decide nothing (their
	// spans'; a failure is fenceError): a mark read, the upload bindings.
	etcdOK       = "ok"
	etcdNotFound = "not_found" // no binding of that upload

	// S3 request results (fencegate_s3_request_duration_seconds).
	s3OK                 = "ok"
	s3PreconditionFailed = "precondition_failed"
	s3NotFound           = "not_found"
	s3Error              = "error"
)

// metrics are a gateway's collectors and the registry that serves them.
type metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec   // route, method, status_class, problem
	requestDuration *prometheus.HistogramVec // route, method
	inFlight        prometheus.Gauge
	staleRefusals   *prometheus.CounterVec // source
	refusedWrites   *prometheus.CounterVec // reason
	fenceCheck      *prometheus.HistogramVec
	etcdErrors      *prometheus.CounterVec // operation
	s3Duration      *prometheus.HistogramVec
	lostRaces       *prometheus.CounterVec // operation
	// suppressedLines counts the log lines of 401, 403, 414 and 431 answers that
	// the limiter left out (audit.go), by reason.
	suppressedLines *prometheus.CounterVec
	// bodyBudgetRefusals counts the bodies refused because the budget of
	// buffered bodies had no room (bodybudget.go); the budget's use is a
	// gauge read from it.
	bodyBudgetRefusals prometheus.Counter
	// slowClients counts clients cut off for moving an object body slower
	// than Config.TransferChunkTimeout allows (transfer.go), by direction.
	slowClients *prometheus.CounterVec
}

// newMetrics makes the collectors and registers them, with the Go runtime
// and process collectors, on a new registry; buffered reads the use of
// the budget of buffered bodies at each scrape, and budgetBytes is its
// size (Config.BufferBudgetBytes with its default), exported once.
func newMetrics(buffered func() int64, budgetBytes int64) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_requests_total",
			Help: "HTTP requests answered, by route pattern (s3:<operation> on the S3 API), method, status class (2xx...) and problem type slug (the S3 error code on the S3 API; empty when the answer is not a problem).",
		}, []string{"route", "method", "status_class", "problem"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencegate_request_duration_seconds",
			Help:    "Time from the request's arrival to the end of its answer, by route pattern and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencegate_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
		staleRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_stale_refusals_total",
			Help: "Writes refused as stale (409 stale-token), by source: cache (fast reject, no etcd request), object (the object records a larger token), etcd (the fence check's transaction).",
		}, []string{"source"}),
		refusedWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_refused_writes_total",
			Help: "Writes refused for a reason that is audited (one \"write refused\" log line each), by problem type slug.",
		}, []string{"reason"}),
		fenceCheck: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencegate_fence_check_duration_seconds",
			Help:    "Fence checks in etcd (partner routes: the admission, fence check and in-flight marker in one transaction), by result: accepted, stale, refused (a token check, a busy resource, an idempotency conflict) or error (outcome unknown).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		etcdErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_etcd_errors_total",
			Help: "Token store requests that failed without a decision (not refusals), by operation: fence_check, high_water_mark, partner_admission, and the multipart uploads' bindings: bind_upload, upload (a binding's read), unbind_upload.",
		}, []string{"operation"}),
		s3Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencegate_s3_request_duration_seconds",
			Help:    "S3 requests, by operation (observe, put, delete, get, head; multipart uploads': create_upload, upload_part, copy_part, complete_upload, abort_upload, list_parts, list_uploads) and result (ok, precondition_failed: a lost race or a read's failed precondition or unsatisfiable range, not_found, error). A get is timed to its answer's headers, not to the end of its body.",
			Buckets: latencyBuckets,
		}, []string{"operation", "result"}),
		lostRaces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_s3_lost_races_total",
			Help: "Conditional writes S3 refused with 412 Precondition Failed (another writer changed the object since it was observed), by operation: put, delete, complete_upload (a multipart upload's completion). Each is observed again and retried, up to the write attempts.",
		}, []string{"operation"}),
	}
	m.suppressedLines = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencegate_log_lines_suppressed_total",
		Help: "Log lines of requests that need no credential that were left out by the limit on their rate, by reason: unauthorized (401), forbidden (403), uri-too-long (414), headers-too-large (431), and healthz, readyz, metrics (requests to those open routes, whatever their answer). The next line written of that reason has their count in its suppressed field.",
	}, []string{"reason"})
	m.registry.MustRegister(m.suppressedLines)
	m.bodyBudgetRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencegate_body_buffer_refusals_total",
		Help: "Request bodies refused with 503 gateway-busy because the budget of buffered bodies (--buffer-budget-bytes) had no room; nothing was written.",
	})
	m.registry.MustRegister(m.bodyBudgetRefusals, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencegate_body_buffer_bytes",
		Help: "Bytes of the budget of buffered bodies (--buffer-budget-bytes) reserved by requests being read or served: about the bytes their clients have sent, a chunk of 64 KiB at most more each.",
	}, func() float64 { return float64(buffered()) }))
	budgetLimit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencegate_body_buffer_limit_bytes",
		Help: "Size of the budget of buffered bodies (--buffer-budget-bytes), which fencegate_body_buffer_bytes may not pass: set from the configuration at start.",
	})
	budgetLimit.Set(float64(budgetBytes))
	m.registry.MustRegister(budgetLimit)
	m.slowClients = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencegate_slow_clients_cut_total",
		Help: "Clients cut off for moving an object body slower than the transfer chunk timeout allows (64 KiB per timeout), by direction: download (a GET's answer not taken), upload (a PUT's body not sent).",
	}, []string{"direction"})
	m.registry.MustRegister(m.slowClients)
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.inFlight, m.staleRefusals, m.refusedWrites,
		m.fenceCheck, m.etcdErrors, m.s3Duration, m.lostRaces,
	)
	return m
}

// Registry returns the gateway's metrics registry, which GET /metrics
// serves. Callers may register more collectors on it.
func (g *Gateway) Registry() *prometheus.Registry { return g.metrics.registry }

// handler serves the registry in Prometheus' exposition formats.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// noteStaleSource records where the request's stale refusal comes from.
func noteStaleSource(ctx context.Context, source string) {
	if x := exchangeOf(ctx); x != nil {
		x.staleSource = source
	}
}

// noteChecked records the resource and token a request is checked for.
func noteChecked(ctx context.Context, resource api.Resource, token api.Token) {
	if x := exchangeOf(ctx); x != nil {
		x.resource, x.token = resource, token
	}
}

// routeOf returns the pattern of the route that r matched, or that it
// would have matched had it been routed, or routeNone.
func (g *Gateway) routeOf(r *http.Request) string {
	if route := chi.RouteContext(r.Context()).RoutePattern(); route != "" {
		return route
	}
	path := r.URL.RawPath // what chi routes on
	if path == "" {
		path = r.URL.Path
	}
	rctx := chi.NewRouteContext()
	if g.router != nil && g.router.Match(rctx, r.Method, path) {
		if route := rctx.RoutePattern(); route != "" {
			return route
		}
	}
	return routeNone
}

// methodLabel bounds the method label: clients may send any token.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost,
		http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return method
	}
	return methodOther
}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// refusal reports whether err is a token refusal (a decision, not a
// failure): stale, or a token check that refused.
func refusal(err error) bool {
	return errors.Is(err, api.ErrStaleToken) || errors.Is(err, api.ErrLockNotHeld) || errors.Is(err, api.ErrImplausibleToken)
}

// instrumentedFences times and counts the fence store's round trips, and
// traces them (a client span each) when the request is traced. Its fence
// checks also record, in the request's exchange, the resource and token
// checked, which the audit line and the access log report.
type instrumentedFences struct {
	FenceStore
	m *metrics
}

var _ FenceStore = (*instrumentedFences)(nil)

// FenceCheck records the resource and token in the request's exchange,
// which its audit line and access log report (noteChecked), then runs the
// fence check, timed and traced by its result (timeCheck).
func (f *instrumentedFences) FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error {
	noteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.FenceCheck, resource, token)
}

// FenceCheckRenew records and times as FenceCheck does.
func (f *instrumentedFences) FenceCheckRenew(ctx context.Context, resource api.Resource, token api.Token) error {
	noteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.FenceCheckRenew, resource, token)
}

// CheckNotStale records the resource and token as FenceCheck does, and
// times the check as a fence check: it is one, that raises nothing (its
// span, result and errors are named fence_check too).
func (f *instrumentedFences) CheckNotStale(ctx context.Context, resource api.Resource, token api.Token) error {
	noteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.CheckNotStale, resource, token)
}

// timeCheck runs check, one of the fence store's decisions, and times and
// traces it by its result. It records nothing in the request's exchange:
// its callers do.
func (f *instrumentedFences) timeCheck(ctx context.Context, check func(context.Context, api.Resource, api.Token) error, resource api.Resource, token api.Token) error {
	ctx, span := startClientSpan(ctx, "etcd fence_check")
	if span != nil {
		span.SetAttributes(attrResource.String(string(resource)), attrToken.String(token.String()))
	}
	start := time.Now()
	err := check(ctx, resource, token)
	result := fenceAccepted
	switch {
	case err == nil:
	case errors.Is(err, api.ErrStaleToken):
		result = fenceStale
	case refusal(err):
		result = fenceRefused
	default:
		result = fenceError
		f.m.etcdErrors.WithLabelValues("fence_check").Inc()
	}
	f.m.fenceCheck.WithLabelValues(result).Observe(time.Since(start).Seconds())
	endClientSpan(span, result, result == fenceError, err)
	return err
}

// HighWaterMark counts the mark reads that fail.
func (f *instrumentedFences) HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error) {
	ctx, span := startClientSpan(ctx, "etcd high_water_mark")
	if span != nil {
		span.SetAttributes(attrResource.String(string(resource)))
	}
	hwm, err := f.FenceStore.HighWaterMark(ctx, resource)
	result := etcdOK // a read: there is no decision to classify
	if err != nil {
		result = fenceError
		f.m.etcdErrors.WithLabelValues("high_water_mark").Inc()
	}
	endClientSpan(span, result, err != nil, err)
	return hwm, err
}

// instrumentedPartners times the partner routes' admissions (their fence
// checks) like the object routes' fence checks, and traces them.
type instrumentedPartners struct {
	PartnerStore
	m *metrics
}

var _ PartnerStore = (*instrumentedPartners)(nil)

// AdmitPartner times the admission by its result. A busy resource or an
// idempotency conflict is a refusal; only a failure to decide is an etcd
// error.
func (p *instrumentedPartners) AdmitPartner(ctx context.Context, req api.PartnerAdmission) (api.Admission, error) {
	spanCtx, span := startClientSpan(ctx, "etcd partner_admission")
	if span != nil {
		span.SetAttributes(attrResource.String(string(req.Resource)), attrToken.String(req.Token.String()))
	}
	start := time.Now()
	adm, err := p.PartnerStore.AdmitPartner(spanCtx, req)
	result := fenceAccepted
	switch {
	case err == nil:
	case errors.Is(err, api.ErrStaleToken):
		result = fenceStale
	case refusal(err), errors.Is(err, api.ErrResourceBusy), errors.Is(err, api.ErrIdempotencyInFlight), errors.Is(err, api.ErrIdempotencyMismatch), errors.Is(err, api.ErrIdempotencyBudgetExhausted):
		result = fenceRefused
	case ctx.Err() != nil:
		// The client left while waiting: no decision, and no fault of etcd.
		result = fenceRefused
	default:
		result = fenceError
		p.m.etcdErrors.WithLabelValues("partner_admission").Inc()
	}
	p.m.fenceCheck.WithLabelValues(result).Observe(time.Since(start).Seconds())
	endClientSpan(span, result, result == fenceError, err)
	return adm, err
}

// startS3 starts the client span spanName ("s3 put") of an S3 request on
// bucket, when the request is traced (nil otherwise), and returns the
// time it starts. The S3 store decorators (instrumentedObjects,
// instrumentedMultipart) start every S3 request with it and end it with
// doneS3, so that each is one span and one sample of the same metric.
func startS3(ctx context.Context, spanName, bucket string) (context.Context, trace.Span, time.Time) {
	ctx, span := startClientSpan(ctx, spanName)
	if span != nil {
		span.SetAttributes(attrBucket.String(bucket))
	}
	return ctx, span, time.Now()
}

// doneS3 observes one S3 request of operation (a fixed name, never
// anything of the request: the label's values stay bounded) that started
// at start, counts it as a lost race if S3 refused its condition, and
// ends its span.
func (m *metrics) doneS3(operation string, start time.Time, span trace.Span, err error) {
	result := s3OK
	switch {
	case err == nil:
	case errors.Is(err, api.ErrConcurrentModification):
		result = s3PreconditionFailed
		m.lostRaces.WithLabelValues(operation).Inc()
	case errors.Is(err, api.ErrPreconditionFailed), errors.Is(err, api.ErrRangeNotSatisfiable):
		// A read's client asked for it: S3 did its job.
		result = s3PreconditionFailed
	case errors.Is(err, api.ErrNotFound):
		result = s3NotFound
	default:
		result = s3Error
	}
	m.s3Duration.WithLabelValues(operation, result).Observe(time.Since(start).Seconds())
	endClientSpan(span, result, result == s3Error, err)
}

// instrumentedObjects times every S3 request by operation, counts the
// conditional writes that lost a race, and traces every S3 request.
type instrumentedObjects struct {
	ObjectStore
	m *metrics
}

var _ ObjectStore = (*instrumentedObjects)(nil)

func (o *instrumentedObjects) Observe(ctx context.Context, path api.ObjectPath) (api.ObjectVersion, error) {
	ctx, span, start := startS3(ctx, "s3 observe", path.Bucket)
	v, err := o.ObjectStore.Observe(ctx, path)
	o.m.doneS3("observe", start, span, err)
	return v, err
}

func (o *instrumentedObjects) ObserveWithKey(ctx context.Context, path api.ObjectPath, key api.CustomerKey) (api.ObjectVersion, error) {
	keyed, ok := o.ObjectStore.(KeyedObserver)
	if !ok {
		return api.ObjectVersion{}, fmt.Errorf("%w: the store keeps no objects encrypted with a customer key (SSE-C)", api.ErrInvalidRequest)
	}
	ctx, span, start := startS3(ctx, "s3 observe", path.Bucket)
	v, err := keyed.ObserveWithKey(ctx, path, key)
	o.m.doneS3("observe", start, span, err)
	return v, err
}

func (o *instrumentedObjects) Put(ctx context.Context, in api.PutObjectInput) (string, error) {
	ctx, span, start := startS3(ctx, "s3 put", in.Path.Bucket)
	etag, err := o.ObjectStore.Put(ctx, in)
	o.m.doneS3("put", start, span, err)
	return etag, err
}

func (o *instrumentedObjects) Delete(ctx context.Context, path api.ObjectPath, etag string) error {
	ctx, span, start := startS3(ctx, "s3 delete", path.Bucket)
	err := o.ObjectStore.Delete(ctx, path, etag)
	o.m.doneS3("delete", start, span, err)
	return err
}

func (o *instrumentedObjects) Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	ctx, span, start := startS3(ctx, "s3 get", in.Path.Bucket)
	obj, err := o.ObjectStore.Get(ctx, in)
	o.m.doneS3("get", start, span, err)
	return obj, err
}

func (o *instrumentedObjects) Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	ctx, span, start := startS3(ctx, "s3 head", in.Path.Bucket)
	obj, err := o.ObjectStore.Head(ctx, in)
	o.m.doneS3("head", start, span, err)
	return obj, err
}

// instrumentedMultipart times, counts and traces the multipart uploads'
// S3 requests as instrumentedObjects does the others: in the same metric,
// by operation (create_upload, upload_part, copy_part, complete_upload,
// abort_upload, list_parts, list_uploads). A completion that loses a
// race counts as one, as a conditional put does.
type instrumentedMultipart struct {
	MultipartStore
	m *metrics
}

var _ MultipartStore = (*instrumentedMultipart)(nil)

func (s *instrumentedMultipart) CreateUpload(ctx context.Context, in api.CreateUploadInput) (string, error) {
	ctx, span, start := startS3(ctx, "s3 create_upload", in.Path.Bucket)
	id, err := s.MultipartStore.CreateUpload(ctx, in)
	s.m.doneS3("create_upload", start, span, err)
	return id, err
}

func (s *instrumentedMultipart) UploadPart(ctx context.Context, in api.UploadPartInput) (string, error) {
	ctx, span, start := startS3(ctx, "s3 upload_part", in.Path.Bucket)
	etag, err := s.MultipartStore.UploadPart(ctx, in)
	s.m.doneS3("upload_part", start, span, err)
	return etag, err
}

func (s *instrumentedMultipart) CopyPart(ctx context.Context, in api.CopyPartInput) (string, error) {
	ctx, span, start := startS3(ctx, "s3 copy_part", in.Path.Bucket)
	etag, err := s.MultipartStore.CopyPart(ctx, in)
	s.m.doneS3("copy_part", start, span, err)
	return etag, err
}

func (s *instrumentedMultipart) CompleteUpload(ctx context.Context, in api.CompleteUploadInput) (string, error) {
	ctx, span, start := startS3(ctx, "s3 complete_upload", in.Path.Bucket)
	etag, err := s.MultipartStore.CompleteUpload(ctx, in)
	s.m.doneS3("complete_upload", start, span, err)
	return etag, err
}

func (s *instrumentedMultipart) AbortUpload(ctx context.Context, path api.ObjectPath, uploadID string) error {
	ctx, span, start := startS3(ctx, "s3 abort_upload", path.Bucket)
	err := s.MultipartStore.AbortUpload(ctx, path, uploadID)
	s.m.doneS3("abort_upload", start, span, err)
	return err
}

func (s *instrumentedMultipart) ListParts(ctx context.Context, path api.ObjectPath, uploadID string, marker, max int32) (api.PartList, error) {
	ctx, span, start := startS3(ctx, "s3 list_parts", path.Bucket)
	list, err := s.MultipartStore.ListParts(ctx, path, uploadID, marker, max)
	s.m.doneS3("list_parts", start, span, err)
	return list, err
}

func (s *instrumentedMultipart) ListUploads(ctx context.Context, in api.ListUploadsInput) (api.UploadList, error) {
	ctx, span, start := startS3(ctx, "s3 list_uploads", in.Bucket)
	list, err := s.MultipartStore.ListUploads(ctx, in)
	s.m.doneS3("list_uploads", start, span, err)
	return list, err
}

// instrumentedUploads traces the upload bindings' round trips to etcd
// ("etcd bind_upload", "etcd upload", "etcd unbind_upload") and counts
// those that fail as etcd errors, as instrumentedFences does a mark read.
// They decide nothing, so the fence check metric does not time them.
type instrumentedUploads struct {
	UploadStore
	m *metrics
}

var _ UploadStore = (*instrumentedUploads)(nil)

func (u *instrumentedUploads) BindUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	ctx, span := startClientSpan(ctx, "etcd bind_upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(b.Resource)), attrToken.String(b.Token.String()))
	}
	err := u.UploadStore.BindUpload(ctx, b, ttl)
	u.done("bind_upload", span, err)
	return err
}

func (u *instrumentedUploads) Upload(ctx context.Context, resource api.Resource, uploadID string) (api.UploadBinding, error) {
	ctx, span := startClientSpan(ctx, "etcd upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(resource)))
	}
	b, err := u.UploadStore.Upload(ctx, resource, uploadID)
	u.done("upload", span, err)
	return b, err
}

func (u *instrumentedUploads) UnbindUpload(ctx context.Context, b api.UploadBinding) error {
	ctx, span := startClientSpan(ctx, "etcd unbind_upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(b.Resource)))
	}
	err := u.UploadStore.UnbindUpload(ctx, b)
	u.done("unbind_upload", span, err)
	return err
}

func (u *instrumentedUploads) FinishUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	ctx, span := startClientSpan(ctx, "etcd finish_upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(b.Resource)))
	}
	err := u.UploadStore.FinishUpload(ctx, b, ttl)
	u.done("finish_upload", span, err)
	return err
}

// done ends the span of a binding's round trip of operation with its
// result (an upload with no binding is an answer, not_found), and counts
// a failure as an etcd error.
func (u *instrumentedUploads) done(operation string, span trace.Span, err error) {
	result := etcdOK
	switch {
	case err == nil:
	case errors.Is(err, api.ErrNotFound):
		result = etcdNotFound
	default:
		result = fenceError
		u.m.etcdErrors.WithLabelValues(operation).Inc()
	}
	endClientSpan(span, result, result == fenceError, err)
}

// spaceCollector exports the fence store's space reading (Config.
// StoreSpace) at each scrape, through the readiness cache: a scrape reads
// it at most once per Config.ReadinessCache, shared with /readyz. It
// exports nothing when the latest reading failed (the readiness probes
// say why), rather than a size of zero.
type spaceCollector struct {
	readiness          *readiness
	size, inUse, quota *prometheus.Desc
}

func newSpaceCollector(rd *readiness) *spaceCollector {
	return &spaceCollector{
		readiness: rd,
		size: prometheus.NewDesc("fencegate_etcd_db_size_bytes",
			"Size of etcd's database, as the member the gateway's connection reaches reports it: what etcd compares with its quota.", nil, nil),
		inUse: prometheus.NewDesc("fencegate_etcd_db_size_in_use_bytes",
			"The part of etcd's database that holds data; defragmenting gives the rest back.", nil, nil),
		quota: prometheus.NewDesc("fencegate_etcd_db_quota_bytes",
			"etcd's database quota (--quota-backend-bytes): at this size etcd raises its NOSPACE alarm and refuses every write.", nil, nil),
	}
}

// Describe sends the three gauges' descriptions.
func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.inUse
	ch <- c.quota
}

// Collect reads the space (or reuses a fresh reading) and sends it.
func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	space, ok := c.readiness.readSpace(context.Background())
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(space.Size))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(space.InUse))
	ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(space.Quota))
}

// Multipart uploads' metrics (multipart.go). Their labels are bounded:
// the abort reasons below, nothing of the request.

// Reasons of an upload's abort (fencegate_multipart_uploads_aborted_total).
const (
	abortByClient = fence.AbortByClient // AbortUpload: the client's own abort
	abortStale    = fence.AbortStale    // its token went below the mark: it can never complete
	abortFailed   = fence.AbortFailed   // the gateway's upload of a REST PUT failed, or its binding was not recorded
)

// multipartMetrics count the fenced multipart uploads: each counter is
// moved at the one place in multipart.go where what it counts happens.
type multipartMetrics struct {
	created, completed prometheus.Counter
	aborted            *prometheus.CounterVec // reason
	partsStale         prometheus.Counter
}

// newMultipartMetrics makes the multipart uploads' collectors and
// registers them on m's registry, with every abort reason's series at 0.
func newMultipartMetrics(m *metrics) *multipartMetrics {
	mm := &multipartMetrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencegate_multipart_uploads_created_total",
			Help: "Fenced multipart uploads created in S3 (S3 API CreateMultipartUpload, or a REST PUT over the multipart threshold); each ends completed, aborted, or forgotten when its binding in etcd expires (the upload TTL).",
		}),
		completed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencegate_multipart_uploads_completed_total",
			Help: "Fenced multipart uploads completed: their conditional completion wrote the object.",
		}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_multipart_uploads_aborted_total",
			Help: "Multipart uploads aborted, by reason: client (the client's AbortMultipartUpload), stale (a part or the completion found the upload's token below the mark: it could never complete), failed (a REST PUT in parts failed, or the upload's binding could not be recorded).",
		}, []string{"reason"}),
		partsStale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencegate_multipart_parts_refused_stale_total",
			Help: "Parts refused (409 stale-token) because their upload's token was below the resource's high-water mark; nothing of them was stored.",
		}),
	}
	for _, reason := range []string{abortByClient, abortStale, abortFailed} {
		mm.aborted.WithLabelValues(reason)
	}
	m.registry.MustRegister(mm.created, mm.completed, mm.aborted, mm.partsStale)
	return mm
}

// fenceBatchBuckets are the bounds of fencegate_fence_batch_size: powers
// of two up to the token store's largest batch (64) and one above.
var fenceBatchBuckets = prometheus.ExponentialBuckets(1, 2, 8)

// FenceBatchSizes is the histogram fencegate_fence_batch_size: how many
// fence checks each of the token store's group-commit transactions
// carried. The token store observes the sizes through a function (its
// Config.ObserveFenceBatch is Observe), as it takes no metrics client;
// WithFenceBatchSizes exports them on the gateway's registry. It is safe
// for concurrent use, before and after it is registered.
type FenceBatchSizes struct {
	histogram prometheus.Histogram
}

// NewFenceBatchSizes returns a FenceBatchSizes with nothing observed.
func NewFenceBatchSizes() *FenceBatchSizes {
	return &FenceBatchSizes{histogram: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencegate_fence_batch_size",
		Help:    "Fence checks that each group-commit transaction sent to etcd carried: 1 for a check sent alone, more when checks that came in together shared one transaction. Checks confirmed without a write, and every check with group commit disabled, are not counted.",
		Buckets: fenceBatchBuckets,
	})}
}

// Observe records one transaction of size fence checks.
func (b *FenceBatchSizes) Observe(size int) { b.histogram.Observe(float64(size)) }

// WithFenceBatchSizes exports batches, which the token store the gateway
// checks fences with observes, on the gateway's registry. Nil exports
// nothing.
func WithFenceBatchSizes(batches *FenceBatchSizes) Option {
	return func(g *Gateway) {
		if batches != nil {
			g.metrics.registry.MustRegister(batches.histogram)
		}
	}
}
