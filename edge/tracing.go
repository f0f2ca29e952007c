package edge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
)

// Tracing (Config.Tracer; off when nil). Each request gets one server
// span, started by Track for every door, continuing the client's W3C
// traceparent, named by its
// route pattern (the door's route label). Its children are client spans
// of the round trips the request makes: the fence check, mark read,
// partner admission or upload binding in etcd and every S3 request,
// multipart uploads' included (started by the store decorators in
// metrics.go, with the result their metrics count), and a
// partner route's upstream call (the partner door's), whose request
// carries the span's traceparent. The tracer travels with the request's
// exchange, so that code that never sees the Gateway starts spans too;
// with tracing off, the exchange's tracer is nil and each place that
// would start a span costs one nil check.

// Span attribute keys. The HTTP ones follow OpenTelemetry's semantic
// conventions; the others are fencegate's.
const (
	attrMethod     = attribute.Key("http.request.method")
	attrRoute      = attribute.Key("http.route")
	attrPath       = attribute.Key("url.path")
	attrStatusCode = attribute.Key("http.response.status_code")
	attrServer     = attribute.Key("server.address")
	attrRequestID  = attribute.Key("fencegate.request_id")
	attrResource   = attribute.Key("fencegate.resource")
	attrToken      = attribute.Key("fencegate.token")
	attrProblem    = attribute.Key("fencegate.problem")
	attrResult     = attribute.Key("result")
	attrBucket     = attribute.Key("bucket")
)

// tracing is the edge's tracer, which every traced request's exchange
// points to.
type tracing struct {
	tracer trace.Tracer
}

// begin returns r's context carrying its exchange x and, with tracing on
// (t not nil), the request's server span, which it also returns (nil
// otherwise) and notes in x for the round trips' spans.
func (t *tracing) begin(r *http.Request, x *exchange) (context.Context, trace.Span) {
	ctx := r.Context()
	var span trace.Span
	if t != nil {
		x.tracing = t
		ctx, span = startRequestSpan(ctx, t.tracer, r, x, x.start)
	}
	return withExchange(ctx, x), span
}

// traceContext reads and writes W3C traceparent and tracestate headers.
var traceContext propagation.TraceContext

// startRequestSpan starts r's server span with tracer, as a child of the
// trace that r's traceparent names, if any, and returns the context that
// carries it. The span's name and its outcome's attributes are set when
// the request ends (endRequestSpan), once the route is known.
func startRequestSpan(ctx context.Context, tracer trace.Tracer, r *http.Request, x *exchange, start time.Time) (context.Context, trace.Span) {
	ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return tracer.Start(ctx, r.Method,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attrMethod.String(r.Method),
			attrPath.String(api.Truncate(r.URL.Path, api.MaxEchoBytes)),
			attrRequestID.String(x.id),
		))
}

// endRequestSpan names span by route ("PUT /v1/objects/{bucket}/*"; a
// front door's route, "s3:PutObject", names the operation, method
// included, and is the name alone), adds the request's outcome and ends
// it. The status is Error for a 5xx. A front door's request names its
// resource and token in its exchange (the fence check's, or NoteRefusal's),
// never as the REST API's path and header do, which its own may only
// look like.
func (e *Edge) endRequestSpan(span trace.Span, r *http.Request, x *exchange, door Door, route string, status int) {
	if route != routeNone {
		name := r.Method + " " + route
		if x.api != "" {
			name = route
		}
		span.SetName(name)
		span.SetAttributes(attrRoute.String(route))
	}
	span.SetAttributes(attrStatusCode.Int(status))
	resource, token := requestSubject(r, x, door.Subject)
	if resource != "" && token != 0 {
		span.SetAttributes(attrResource.String(string(resource)), attrToken.String(token.String()))
	}
	if x.problem != "" {
		span.SetAttributes(attrProblem.String(x.problem))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status)+" "+x.problem)
	}
	span.End()
}

// StartClientSpan starts a client span named name under ctx's span, when
// the request is traced; otherwise it returns ctx and a nil span, which
// EndClientSpan ignores. Callers set the span's attributes when it is not
// nil, so that a request that is not traced does not build them.
func StartClientSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	x := exchangeOf(ctx)
	if x == nil || x.tracing == nil {
		return ctx, nil
	}
	return x.tracing.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
}

// EndClientSpan records result (as the metrics count it) on span and
// ends it; an error result sets the status Error with err. A nil span is
// a request that is not traced.
func EndClientSpan(span trace.Span, result string, failed bool, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attrResult.String(result))
	if failed && err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// InjectTraceparent writes ctx's span context into h as traceparent (and
// tracestate), replacing any the client sent. It does nothing when ctx
// carries no valid span context.
func InjectTraceparent(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceS3 starts the client span "s3 "+operation of an S3 request that a
// front door sends itself rather than through the engine's stores (the
// S3 API's bucket reads), under the span of ctx's request, with the
// bucket (none for "") as the store decorators' spans have it. It does
// nothing when the request is not traced. The function it returns ends
// the span with the store's answer, as the decorators' results name it:
// "ok" for a 2xx status, "not_found" for a 404, else "error", which with
// err (no answer) or a 5xx sets the span's status Error.
func TraceS3(ctx context.Context, operation, bucket string) (context.Context, func(status int, err error)) {
	ctx, span := StartClientSpan(ctx, "s3 "+operation)
	if span == nil {
		return ctx, func(int, error) {}
	}
	if bucket != "" {
		span.SetAttributes(attrBucket.String(bucket))
	}
	return ctx, func(status int, err error) {
		result := s3Error
		switch {
		case err != nil:
		case status/100 == 2:
			result = s3OK
		case status == http.StatusNotFound:
			result = s3NotFound
		}
		if err == nil && status >= 500 {
			err = fmt.Errorf("status %d", status)
		}
		EndClientSpan(span, result, err != nil, err)
	}
}
