package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"fencegate/internal/logging"
	"fencegate/internal/tracing"
)

func addLogFlags(fs *flag.FlagSet, c *logging.Config) {
	fs.TextVar(&c.Level, "log-level", slog.LevelInfo, "least `level` logged: debug, info, warn or error")
	fs.StringVar(&c.Format, "log-format", logging.FormatText, "log `format`: text or json")
}

// validateLog checks the log flags.
func validateLog(c logging.Config) error {
	if err := logging.ValidateFormat(c.Format); err != nil {
		return fmt.Errorf("--log-format %w", err)
	}
	return nil
}

// addTracingFlags adds --otlp-endpoint and --trace-sample-ratio to fs.
func addTracingFlags(fs *flag.FlagSet, c *tracing.Config) {
	fs.StringVar(&c.Endpoint, "otlp-endpoint", "", "OpenTelemetry collector `URL` for traces over OTLP/gRPC, such as http://127.0.0.1:4317\n"+
		"(http://: plain gRPC, https://: TLS; empty: no tracing)")
	fs.Float64Var(&c.SampleRatio, "trace-sample-ratio", tracing.DefaultSampleRatio, "share of new traces sampled (`ratio`, from 0 to 1); a request with a\n"+
		"traceparent follows its parent's decision")
}

// validateTracing checks the tracing flags.
func validateTracing(c tracing.Config) error {
	var errs []error
	if c.Endpoint != "" {
		if err := tracing.ValidateEndpoint(c.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("--otlp-endpoint %w", err))
		}
	}
	if err := tracing.ValidateSampleRatio(c.SampleRatio); err != nil {
		errs = append(errs, fmt.Errorf("--trace-sample-ratio %w", err))
	}
	return errors.Join(errs...)
}
