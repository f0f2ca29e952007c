package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"fencegate/internal/config"
	"fencegate/internal/tlsfiles"
)

// headerSlack is added to the gateway's header limit for the http.Server's
// own: the server refuses larger headers with a bare 431, so the gateway's
// limit, which answers with a problem body, must come first.
const headerSlack = 64 << 10

// listen listens on addr, a checked host:port.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// endpoint is a listener and the handler that serves on it: the REST
// API's (the gateway), or the S3 API's.
type endpoint struct {
	name    string // for logs: "http" or "s3_api"
	ln      net.Listener
	handler http.Handler
}

// serveHTTP serves each endpoint (the gateway's first) with the same
// timeouts, header limit and TLS until ctx is done, then shuts them all
// down gracefully: /readyz starts failing, the listeners stay open for
// the drain delay, then close, and requests in flight on any of them get
// the shutdown timeout to finish. If one endpoint stops serving, the
// others are closed too. It returns nil after a clean shutdown.
func serveHTTP(ctx context.Context, logger *slog.Logger, c config.HTTP, gw *wiredGateway, endpoints ...endpoint) error {
	var certs *tlsfiles.Reloader
	if c.TLS != nil {
		var err error
		if certs, err = tlsfiles.NewReloader(c.TLSCert, c.TLSKey, logger); err != nil {
			return err
		}
	}
	servers := make([]*http.Server, len(endpoints))
	served := make(chan error, len(endpoints))
	for i, e := range endpoints {
		srv := &http.Server{
			Handler:           e.handler,
			ReadHeaderTimeout: c.ReadHeaderTimeout,
			ReadTimeout:       c.ReadTimeout,
			WriteTimeout:      c.WriteTimeout,
			IdleTimeout:       c.IdleTimeout,
			MaxHeaderBytes:    gw.maxHeaderBytes + headerSlack,
			ErrorLog:          slog.NewLogLogger(logger.With("listener", e.name).Handler(), slog.LevelWarn),
			// Requests keep the background context: cancelling ctx starts a
			// graceful shutdown, it does not abort requests in flight.
		}
		servers[i] = srv
		if certs != nil {
			srv.TLSConfig = c.TLS.Clone()
			srv.TLSConfig.Certificates = nil
			srv.TLSConfig.GetCertificate = certs.GetCertificate
			go func() { served <- srv.ServeTLS(e.ln, "", "") }()
		} else {
			go func() { served <- srv.Serve(e.ln) }()
		}
	}
	select {
	case err := <-served:
		for _, srv := range servers {
			_ = srv.Close()
		}
		for range len(servers) - 1 {
			<-served
		}
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}

	logger.Info("shutting down: draining", "drain_delay", c.DrainDelay, "shutdown_timeout", c.ShutdownTimeout)
	gw.SetDraining()
	if c.DrainDelay > 0 {
		time.Sleep(c.DrainDelay)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownTimeout)
	defer cancel()
	shutdownErrs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() { shutdownErrs[i] = srv.Shutdown(shutdownCtx) })
	}
	wg.Wait()
	if err := errors.Join(shutdownErrs...); err != nil {
		for _, srv := range servers {
			_ = srv.Close()
		}
		for range servers {
			<-served
		}
		return fmt.Errorf("shutdown: requests in flight did not finish within %v: %w", c.ShutdownTimeout, err)
	}
	var errs []error
	for range servers {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve http: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logger.Info("shut down")
	return nil
}
