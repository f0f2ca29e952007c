package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Server loads a server certificate and key and, if clientCAFile is not
// empty, the CAs of client certificates. Clients are asked for a
// certificate and one they send must verify (tls.VerifyClientCertIfGiven):
// a client without one can still authenticate with a bearer key.
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if clientCAFile != "" {
		pool, err := CertPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CAs: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// CertPool reads the PEM certificates in file.
func CertPool(file string) (*x509.CertPool, error) {
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

// ErrCAFile wraps a CA file that does not load, in Client's errors;
// ErrKeyPair a client certificate and key that do not.
var (
	ErrCAFile  = errors.New("CA file")
	ErrKeyPair = errors.New("client certificate")
)

// Client loads a client's TLS configuration: the CAs that sign the
// server's certificate from caFile ("": the system's roots), and the
// client certificate of certFile and keyFile (both or neither). It
// returns nil when no file is given: plain TCP, or TLS with the system's
// roots for https:// endpoints.
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := CertPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCAFile, err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKeyPair, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
