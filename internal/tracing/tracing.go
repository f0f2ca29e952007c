// Package tracing starts fencegate's OpenTelemetry tracing: with a
// collector's endpoint, spans (gateway.Config.Tracer) are exported over
// OTLP/gRPC, through a batch span processor, as service fencegate.
// Without one (the default) there is no tracer at all, and the gateway
// skips tracing.
package tracing

import (
	"context"
	"crypto/tls"
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

// Config says where spans go. The zero Config is tracing off.
type Config struct {
	// Endpoint is the OTLP/gRPC collector's URL: http:// (plain gRPC) or
	// https:// (TLS) and a host (see ValidateEndpoint); "" turns tracing
	// off.
	Endpoint string
	// SampleRatio is the share of new traces sampled, from 0 to 1 (see
	// ValidateSampleRatio); a request that continues a trace follows its
	// parent's decision.
	SampleRatio float64
}

// DefaultSampleRatio samples every new trace.
const DefaultSampleRatio = 1

// shutdownTimeout bounds the export of the last spans at exit.
const shutdownTimeout = 5 * time.Second

// ValidateEndpoint checks a collector URL: http:// or https:// with a host,
// and nothing else. Its message does not name the setting: the caller
// does.
func ValidateEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want http://host:port (plain gRPC) or https://host:port (TLS), such as http://127.0.0.1:4317", endpoint)
	}
	return nil
}

// ValidateSampleRatio checks a sample ratio: from 0 to 1.
func ValidateSampleRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return fmt.Errorf("%v: must be from 0 to 1", ratio)
	}
	return nil
}

// Tracing is a running tracer provider; the zero Tracing is tracing off.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil: off
}

// Start starts exporting spans to c's collector, as service fencegate of
// the given version, or returns tracing off when c has no endpoint. The
// exporter connects lazily: a collector that is down loses spans, it
// does not stop the gateway.
func Start(ctx context.Context, c Config, version string) (Tracing, error) {
	if c.Endpoint == "" {
		return Tracing{}, nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return Tracing{}, fmt.Errorf("OTLP endpoint: %w", err)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return Tracing{}, fmt.Errorf("OTLP exporter for %s: %w", c.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "fencegate"),
		attribute.String("service.version", version),
	))
	if err != nil {
		return Tracing{}, fmt.Errorf("tracing resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
	)
	return Tracing{provider: provider}, nil
}

// Tracer returns the gateway's tracer, nil when tracing is off.
func (t Tracing) Tracer() trace.Tracer {
	if t.provider == nil {
		return nil
	}
	return t.provider.Tracer("fencegate/gateway")
}

// Shutdown exports the spans not yet sent and stops the exporter, within
// a few seconds, logging a failure to logger.
func (t Tracing) Shutdown(logger *slog.Logger) {
	if t.provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans not exported at exit", "err", err)
	}
}
