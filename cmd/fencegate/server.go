package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// headerSlack is added to the gateway's header limit for the http.Server's
// own: the server refuses larger headers with a bare 431, so the gateway's
// limit, which answers with a problem body, must come first.
const headerSlack = 64 << 10

// httpConfig holds the http.Server's timeouts and the shutdown's.
type httpConfig struct {
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration
	drainDelay        time.Duration
	// tlsCert, tlsKey and tlsClientCA are the files of --tls-cert,
	// --tls-key and --tls-client-ca; tls is loaded from them by loadTLS,
	// nil for plain HTTP.
	tlsCert, tlsKey, tlsClientCA string
	tls                          *tls.Config
}

func addHTTPFlags(fs *flag.FlagSet, c *httpConfig) {
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 10*time.Second, "bound on reading a request's headers")
	fs.DurationVar(&c.readTimeout, "read-timeout", 10*time.Minute, "bound on reading a whole request, body included (0: none)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 10*time.Minute, "bound on a request from the end of its headers to the end of the response (0: none)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept open")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM `file` of the server's certificate chain: serve HTTPS (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM `file` of the server certificate's private key")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM `file` of the CAs whose client certificates are verified, when a client\n"+
		"sends one (mTLS; clients without one may still use a bearer API key)")
	addShutdownFlags(fs, c)
}

// loadTLS loads the listener's TLS configuration from the flags' files.
func (c *httpConfig) loadTLS() error {
	switch {
	case c.tlsCert == "" && c.tlsKey == "" && c.tlsClientCA == "":
		return nil
	case c.tlsCert == "" || c.tlsKey == "":
		return errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
	}
	cfg, err := serverTLS(c.tlsCert, c.tlsKey, c.tlsClientCA)
	if err != nil {
		return fmt.Errorf("--tls-cert, --tls-key, --tls-client-ca: %w", err)
	}
	c.tls = cfg
	return nil
}

// serverTLS loads a server certificate and key and, if clientCAFile is
// not empty, the CAs of client certificates. Clients are asked for a
// certificate and one they send must verify (tls.VerifyClientCertIfGiven):
// a client without one can still authenticate with a bearer key.
func serverTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if clientCAFile != "" {
		pool, err := loadCertPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CAs: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// loadCertPool reads the PEM certificates in file.
func loadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates in it", file)
	}
	return pool, nil
}

// addShutdownFlags adds the flags of a graceful shutdown.
func addShutdownFlags(fs *flag.FlagSet, c *httpConfig) {
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long requests in flight may take to finish")
	fs.DurationVar(&c.drainDelay, "drain-delay", 0, "on SIGTERM or SIGINT, how long to keep accepting requests, with /readyz failing,\nbefore closing the listener (for load balancers to notice)")
}

// check validates the timeouts, naming the flag at fault.
func (c httpConfig) check() error {
	return errors.Join(
		positive("read-header-timeout", c.readHeaderTimeout),
		notNegative("read-timeout", c.readTimeout),
		notNegative("write-timeout", c.writeTimeout),
		positive("idle-timeout", c.idleTimeout),
		positive("shutdown-timeout", c.shutdownTimeout),
		notNegative("drain-delay", c.drainDelay),
	)
}

// notNegative checks that the duration flag name is not below zero.
func notNegative(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--%s %v: must not be negative", name, d)
	}
	return nil
}

// logConfig says how to log.
type logConfig struct {
	level  slog.Level
	format string
}

func addLogFlags(fs *flag.FlagSet, c *logConfig) {
	fs.TextVar(&c.level, "log-level", slog.LevelInfo, "least `level` logged: debug, info, warn or error")
	fs.StringVar(&c.format, "log-format", "text", "log `format`: text or json")
}

func (c logConfig) check() error {
	if c.format != "text" && c.format != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.format)
	}
	return nil
}

// newLogger returns a logger writing to w as c says, through a logWriter;
// closing it writes the lines still pending.
func newLogger(w io.Writer, c logConfig) (*slog.Logger, io.Closer) {
	lw := newLogWriter(w, logFlushDelay)
	opts := &slog.HandlerOptions{Level: c.level}
	handler := func(w io.Writer) slog.Handler {
		if c.format == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
	return slog.New(lw.handler(handler(lw), handler(&lw.batch))), lw
}

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
func serveHTTP(ctx context.Context, logger *slog.Logger, ln net.Listener, c httpConfig, gw *wiredGateway) error {
	srv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: c.readHeaderTimeout,
		ReadTimeout:       c.readTimeout,
		WriteTimeout:      c.writeTimeout,
		IdleTimeout:       c.idleTimeout,
		MaxHeaderBytes:    gw.limits.maxHeaderBytes + headerSlack,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests keep the background context: cancelling ctx starts a
		// graceful shutdown, it does not abort requests in flight.
	}
	served := make(chan error, 1)
	if c.tls != nil {
		certs, err := newCertReloader(c.tlsCert, c.tlsKey, logger)
		if err != nil {
			return err
		}
		srv.TLSConfig = c.tls.Clone()
		srv.TLSConfig.Certificates = nil
		srv.TLSConfig.GetCertificate = certs.getCertificate
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}

	logger.Info("shutting down: draining", "drain_delay", c.drainDelay, "shutdown_timeout", c.shutdownTimeout)
	gw.SetDraining()
	if c.drainDelay > 0 {
		time.Sleep(c.drainDelay)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		<-served
		return fmt.Errorf("shutdown: requests in flight did not finish within %v: %w", c.shutdownTimeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	logger.Info("shut down")
	return nil
}
