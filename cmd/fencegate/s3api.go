package main

import (
	"fmt"
	"log/slog"
	"net"

	"fencegate/internal/config"
	"fencegate/s3api"
)

// listenS3API listens on the S3 API's address; nil when it is off.
func listenS3API(c config.S3API) (net.Listener, error) {
	if c.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("s3 api: listen: %w", err)
	}
	return ln, nil
}

// withS3API returns endpoints and, when ln is not nil, the S3 API on it:
// its front door on gw, with c's keys, region and domain, and bucket
// reads and bucket administration through gw's S3 client.
func withS3API(endpoints []endpoint, ln net.Listener, c config.S3API, gw *wiredGateway, logger *slog.Logger) ([]endpoint, error) {
	if ln == nil {
		return endpoints, nil
	}
	door, err := s3api.New(s3api.Config{Region: c.Region, Domain: c.Domain, Logger: logger.With("component", "s3_api")},
		s3api.Deps{Edge: gw.Edge(), Engine: gw.Engine(), Keys: c.Keys, Buckets: gw.s3, Admin: gw.s3})
	if err != nil {
		return nil, err
	}
	return append(endpoints, endpoint{name: "s3_api", ln: ln, handler: door}), nil
}

// addrOf is ln's address for logs, "" without a listener.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}
