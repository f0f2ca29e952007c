package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/fence"
)

// Metrics: every edge has its own Prometheus registry (tests build many
// gateways in one process), which a door serves on GET /metrics. Request
// metrics are labelled by the door's route (chi's route pattern, or an
// operation's name), never by the request's path, so that the number of
// series stays bounded whatever clients send.
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
// and process collectors, on a new registry.
func newMetrics() *metrics {
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
	m.registry.MustRegister(m.bodyBudgetRefusals)
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

// handler serves the registry in Prometheus' exposition formats.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// NoteStaleSource records where the request's stale refusal comes from.
func NoteStaleSource(ctx context.Context, source string) {
	if x := exchangeOf(ctx); x != nil {
		x.staleSource = source
	}
}

// NoteChecked records the resource and token a request is checked for.
func NoteChecked(ctx context.Context, resource api.Resource, token api.Token) {
	if x := exchangeOf(ctx); x != nil {
		x.resource, x.token = resource, token
	}
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
	fence.FenceStore
	m *metrics
}

var _ fence.FenceStore = (*instrumentedFences)(nil)

// FenceCheck records the resource and token in the request's exchange,
// which its audit line and access log report (noteChecked), then runs the
// fence check, timed and traced by its result (timeCheck).
func (f *instrumentedFences) FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error {
	NoteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.FenceCheck, resource, token)
}

// FenceCheckRenew records and times as FenceCheck does.
func (f *instrumentedFences) FenceCheckRenew(ctx context.Context, resource api.Resource, token api.Token) error {
	NoteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.FenceCheckRenew, resource, token)
}

// CheckNotStale records the resource and token as FenceCheck does, and
// times the check as a fence check: it is one, that raises nothing (its
// span, result and errors are named fence_check too).
func (f *instrumentedFences) CheckNotStale(ctx context.Context, resource api.Resource, token api.Token) error {
	NoteChecked(ctx, resource, token)
	return f.timeCheck(ctx, f.FenceStore.CheckNotStale, resource, token)
}

// timeCheck runs check, one of the fence store's decisions, and times and
// traces it by its result. It records nothing in the request's exchange:
// its callers do.
func (f *instrumentedFences) timeCheck(ctx context.Context, check func(context.Context, api.Resource, api.Token) error, resource api.Resource, token api.Token) error {
	ctx, span := StartClientSpan(ctx, "etcd fence_check")
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
	EndClientSpan(span, result, result == fenceError, err)
	return err
}

// HighWaterMark counts the mark reads that fail.
func (f *instrumentedFences) HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error) {
	ctx, span := StartClientSpan(ctx, "etcd high_water_mark")
	if span != nil {
		span.SetAttributes(attrResource.String(string(resource)))
	}
	hwm, err := f.FenceStore.HighWaterMark(ctx, resource)
	result := etcdOK // a read: there is no decision to classify
	if err != nil {
		result = fenceError
		f.m.etcdErrors.WithLabelValues("high_water_mark").Inc()
	}
	EndClientSpan(span, result, err != nil, err)
	return hwm, err
}

// WatchBodyBudget exports the budget of buffered bodies, which the
// engine keeps: buffered reads its use at each scrape
// (fencegate_body_buffer_bytes), and limit is its size
// (fencegate_body_buffer_limit_bytes), exported once.
func (e *Edge) WatchBodyBudget(buffered func() int64, limit int64) {
	budgetLimit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencegate_body_buffer_limit_bytes",
		Help: "Size of the budget of buffered bodies (--buffer-budget-bytes), which fencegate_body_buffer_bytes may not pass: set from the configuration at start.",
	})
	budgetLimit.Set(float64(limit))
	e.metrics.registry.MustRegister(budgetLimit, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencegate_body_buffer_bytes",
		Help: "Bytes of the budget of buffered bodies (--buffer-budget-bytes) reserved by requests being read or served: about the bytes their clients have sent, a chunk of 64 KiB at most more each.",
	}, func() float64 { return float64(buffered()) }))
}

// TimeAdmission runs admit, a partner request's admission (its fence
// check, in one transaction with its idempotency record and in-flight
// marker), timed like the object routes' fence checks
// (fencegate_fence_check_duration_seconds) and traced ("etcd
// partner_admission"). A busy resource or an idempotency conflict is a
// refusal; only a failure to decide is an etcd error.
func (e *Edge) TimeAdmission(ctx context.Context, req api.PartnerAdmission, admit func(context.Context, api.PartnerAdmission) (api.Admission, error)) (api.Admission, error) {
	spanCtx, span := StartClientSpan(ctx, "etcd partner_admission")
	if span != nil {
		span.SetAttributes(attrResource.String(string(req.Resource)), attrToken.String(req.Token.String()))
	}
	start := time.Now()
	adm, err := admit(spanCtx, req)
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
		e.metrics.etcdErrors.WithLabelValues("partner_admission").Inc()
	}
	e.metrics.fenceCheck.WithLabelValues(result).Observe(time.Since(start).Seconds())
	EndClientSpan(span, result, result == fenceError, err)
	return adm, err
}

// startS3 starts the client span spanName ("s3 put") of an S3 request on
// bucket, when the request is traced (nil otherwise), and returns the
// time it starts. The S3 store decorators (instrumentedObjects,
// instrumentedMultipart) start every S3 request with it and end it with
// doneS3, so that each is one span and one sample of the same metric.
func startS3(ctx context.Context, spanName, bucket string) (context.Context, trace.Span, time.Time) {
	ctx, span := StartClientSpan(ctx, spanName)
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
	EndClientSpan(span, result, result == s3Error, err)
}

// instrumentedObjects times every S3 request by operation, counts the
// conditional writes that lost a race, and traces every S3 request.
type instrumentedObjects struct {
	fence.ObjectStore
	m *metrics
}

var _ fence.ObjectStore = (*instrumentedObjects)(nil)

func (o *instrumentedObjects) Observe(ctx context.Context, path api.ObjectPath) (api.ObjectVersion, error) {
	ctx, span, start := startS3(ctx, "s3 observe", path.Bucket)
	v, err := o.ObjectStore.Observe(ctx, path)
	o.m.doneS3("observe", start, span, err)
	return v, err
}

func (o *instrumentedObjects) ObserveWithKey(ctx context.Context, path api.ObjectPath, key api.CustomerKey) (api.ObjectVersion, error) {
	keyed, ok := o.ObjectStore.(fence.KeyedObserver)
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
	fence.MultipartStore
	m *metrics
}

var _ fence.MultipartStore = (*instrumentedMultipart)(nil)

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
	fence.UploadStore
	m *metrics
}

var _ fence.UploadStore = (*instrumentedUploads)(nil)

func (u *instrumentedUploads) BindUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	ctx, span := StartClientSpan(ctx, "etcd bind_upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(b.Resource)), attrToken.String(b.Token.String()))
	}
	err := u.UploadStore.BindUpload(ctx, b, ttl)
	u.done("bind_upload", span, err)
	return err
}

func (u *instrumentedUploads) Upload(ctx context.Context, resource api.Resource, uploadID string) (api.UploadBinding, error) {
	ctx, span := StartClientSpan(ctx, "etcd upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(resource)))
	}
	b, err := u.UploadStore.Upload(ctx, resource, uploadID)
	u.done("upload", span, err)
	return b, err
}

func (u *instrumentedUploads) UnbindUpload(ctx context.Context, b api.UploadBinding) error {
	ctx, span := StartClientSpan(ctx, "etcd unbind_upload")
	if span != nil {
		span.SetAttributes(attrResource.String(string(b.Resource)))
	}
	err := u.UploadStore.UnbindUpload(ctx, b)
	u.done("unbind_upload", span, err)
	return err
}

func (u *instrumentedUploads) FinishUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	ctx, span := StartClientSpan(ctx, "etcd finish_upload")
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
	EndClientSpan(span, result, result == fenceError, err)
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

// Instrument returns stores behind the edge's decorators: every fence
// check and mark read of Fences, every S3 request of Objects, Tags and
// Multipart, and every upload binding of Uploads is timed and counted
// (fencegate_fence_check_duration_seconds, fencegate_s3_request_duration_seconds,
// fencegate_etcd_errors_total, ...) and traced (a client span each) when
// the request is traced; and each fence check notes, for the event feed,
// the mark known before it and whether it raised it. Buckets is passed
// as it is. A store left nil stays nil. With Multipart and Uploads the
// multipart uploads' metrics are registered (the engine's Monitor counts
// them).
func (e *Edge) Instrument(s fence.Stores) fence.Stores {
	m := e.metrics
	if s.Fences != nil {
		var fences fence.FenceStore = &instrumentedFences{FenceStore: s.Fences, m: m}
		s.Fences = &eventFences{FenceStore: fences, hub: e.events.hub}
	}
	if s.Objects != nil {
		s.Objects = &instrumentedObjects{ObjectStore: s.Objects, m: m}
	}
	if s.Tags != nil {
		s.Tags = &instrumentedTags{TagReader: s.Tags, m: m}
	}
	if s.Multipart != nil && s.Uploads != nil {
		s.Multipart = &instrumentedMultipart{MultipartStore: s.Multipart, m: m}
		s.Uploads = &instrumentedUploads{UploadStore: s.Uploads, m: m}
		if e.multipart == nil {
			e.multipart = newMultipartMetrics(m)
		}
	}
	return s
}

// instrumentedTags times and traces the reads of objects' tags ("s3 get
// tags", operation get_tags), as instrumentedObjects does other S3
// requests.
type instrumentedTags struct {
	fence.TagReader
	m *metrics
}

func (t *instrumentedTags) Tags(ctx context.Context, path api.ObjectPath) (map[string]string, error) {
	ctx, span, start := startS3(ctx, "s3 get tags", path.Bucket)
	tags, err := t.TagReader.Tags(ctx, path)
	t.m.doneS3("get_tags", start, span, err)
	return tags, err
}
