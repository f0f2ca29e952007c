package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"
)

// Tracing: with --otlp-endpoint, serve and dev export OpenTelemetry spans
// (gateway.Config.Tracer) over OTLP/gRPC, through a batch span processor,
// as service fencegate. Without it (the default) there is no tracer at
// all, and the gateway skips tracing.

// tracingConfig is the tracing flags' values.
type tracingConfig struct {
	// endpoint is the OTLP/gRPC collector's URL: http:// (plain gRPC) or
	// https:// (TLS) and a host; "" turns tracing off.
	endpoint string
	// sampleRatio is the share of new traces sampled, from 0 to 1; a
	// request that continues a trace follows its parent's decision.
	sampleRatio float64
}

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// addTracingFlags adds --otlp-endpoint and --trace-sample-ratio to fs.
func addTracingFlags(fs *flag.FlagSet, c *tracingConfig) {
	fs.StringVar(&c.endpoint, "otlp-endpoint", "", "OpenTelemetry collector `URL` for traces over OTLP/gRPC, such as http://127.0.0.1:4317\n"+
		"(http://: plain gRPC, https://: TLS; empty: no tracing)")
	fs.Float64Var(&c.sampleRatio, "trace-sample-ratio", 1, "share of new traces sampled (`ratio`, from 0 to 1); a request with a\n"+
		"traceparent follows its parent's decision")
}

// check checks the tracing flags.
func (c tracingConfig) check() error {
	var errs []error
	if c.endpoint != "" {
		if err := checkOTLPEndpoint(c.endpoint); err != nil {
			errs = append(errs, fmt.Errorf("--otlp-endpoint %w", err))
		}
	}
	if err := checkSampleRatio(c.sampleRatio); err != nil {
		errs = append(errs, fmt.Errorf("--trace-sample-ratio %w", err))
	}
	return errors.Join(errs...)
}

// checkOTLPEndpoint checks a collector URL: http:// or https:// with a
// host, and nothing else.
func checkOTLPEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want http://host:port (plain gRPC) or https://host:port (TLS), such as http://127.0.0.1:4317", endpoint)
	}
	return nil
}

// checkSampleRatio checks a sample ratio: from 0 to 1.
func checkSampleRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return fmt.Errorf("%v: must be from 0 to 1", ratio)
	}
	return nil
}

// tracing is a running tracer provider; the zero tracing is tracing off.
type tracing struct {
	provider *sdktrace.TracerProvider // nil: off
}

// startTracing starts exporting spans to c's collector, or returns
// tracing off when c has no endpoint. The exporter connects lazily: a
// collector that is down loses spans, it does not stop the gateway.
func startTracing(ctx context.Context, c tracingConfig) (tracing, error) {
	if c.endpoint == "" {
		return tracing{}, nil
	}
	u, err := url.Parse(c.endpoint)
	if err != nil {
		return tracing{}, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return tracing{}, fmt.Errorf("OTLP exporter for %s: %w", c.endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "fencegate"),
		attribute.String("service.version", buildVersion()),
	))
	if err != nil {
		return tracing{}, fmt.Errorf("tracing resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.sampleRatio))),
	)
	return tracing{provider: provider}, nil
}

// tracer returns the gateway's tracer, nil when tracing is off.
func (t tracing) tracer() trace.Tracer {
	if t.provider == nil {
		return nil
	}
	return t.provider.Tracer("fencegate/gateway")
}

// shutdown exports the spans not yet sent and stops the exporter, within
// tracingShutdownTimeout.
func (t tracing) shutdown(logger *slog.Logger) {
	if t.provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not exported at exit", "err", err)
	}
}
