package config

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"time"

	"fencegate/internal/tlsfiles"
)

// HTTP holds the http.Server's timeouts, the shutdown's, and the
// listener's TLS.
type HTTP struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration // 0: none
	WriteTimeout      time.Duration // 0: none
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	DrainDelay        time.Duration // 0: none
	// TLSCert, TLSKey and TLSClientCA are the files of --tls-cert,
	// --tls-key and --tls-client-ca; TLS is loaded from them, nil for
	// plain HTTP.
	TLSCert, TLSKey, TLSClientCA string
	TLS                          *tls.Config
}

func addHTTPFlags(fs *flag.FlagSet, c *HTTP) {
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "bound on reading a request's headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", 10*time.Minute, "bound on reading a whole request, body included (0: none)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 10*time.Minute, "bound on a request from the end of its headers to the end of the response (0: none)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept open")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM `file` of the server's certificate chain: serve HTTPS (with --tls-key)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM `file` of the server certificate's private key")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", "", "PEM `file` of the CAs whose client certificates are verified, when a client\n"+
		"sends one (mTLS; clients without one may still use a bearer API key)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long requests in flight may take to finish")
	fs.DurationVar(&c.DrainDelay, "drain-delay", 0, "on SIGTERM or SIGINT, how long to keep accepting requests, with /readyz failing,\nbefore closing the listener (for load balancers to notice)")
}

// loadTLS loads the listener's TLS configuration from the flags' files.
func (c *HTTP) loadTLS() error {
	switch {
	case c.TLSCert == "" && c.TLSKey == "" && c.TLSClientCA == "":
		return nil
	case c.TLSCert == "" && c.TLSKey == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates need a TLS listener")
	case c.TLSCert == "" || c.TLSKey == "":
		return errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
	}
	cfg, err := tlsfiles.Server(c.TLSCert, c.TLSKey, c.TLSClientCA)
	if err != nil {
		return fmt.Errorf("--tls-cert, --tls-key, --tls-client-ca: %w", err)
	}
	c.TLS = cfg
	return nil
}

// validate checks the timeouts, naming the flag at fault.
func (c HTTP) validate() error {
	return errors.Join(
		positive("read-header-timeout", c.ReadHeaderTimeout),
		notNegative("read-timeout", c.ReadTimeout),
		notNegative("write-timeout", c.WriteTimeout),
		positive("idle-timeout", c.IdleTimeout),
		positive("shutdown-timeout", c.ShutdownTimeout),
		notNegative("drain-delay", c.DrainDelay),
	)
}

// positive checks that the duration flag name is above zero.
func positive(name string, d time.Duration) error {
	if err := validateDuration(d, aboveZero); err != nil {
		return fmt.Errorf("--%s %w", name, err)
	}
	return nil
}

// notNegative checks that the duration flag name is not below zero.
func notNegative(name string, d time.Duration) error {
	if err := validateDuration(d, zeroOrMore); err != nil {
		return fmt.Errorf("--%s %w", name, err)
	}
	return nil
}
