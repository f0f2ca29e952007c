package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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

// serveHTTP serves gw on ln until ctx is done, then shuts down gracefully:
// /readyz starts failing, the listener stays open for the drain delay,
// then closes, and requests in flight get the shutdown timeout to finish.
// It returns nil after a clean shutdown.
func serveHTTP(ctx context.Context, logger *slog.Logger, ln net.Listener, c config.HTTP, gw *wiredGateway) error {
	srv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    gw.maxHeaderBytes + headerSlack,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests keep the background context: cancelling ctx starts a
		// graceful shutdown, it does not abort requests in flight.
	}
	served := make(chan error, 1)
	if c.TLS != nil {
		certs, err := tlsfiles.NewReloader(c.TLSCert, c.TLSKey, logger)
		if err != nil {
			return err
		}
		srv.TLSConfig = c.TLS.Clone()
		srv.TLSConfig.Certificates = nil
		srv.TLSConfig.GetCertificate = certs.GetCertificate
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	select {
	case err := <-served:
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
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		<-served
		return fmt.Errorf("shutdown: requests in flight did not finish within %v: %w", c.ShutdownTimeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	logger.Info("shut down")
	return nil
}
