// Package tlsfiles loads TLS configurations from PEM files: the
// listener's (a server certificate, and the CAs of client certificates),
// a client's (etcd's CAs and client certificate), and a Reloader that
// serves the listener's certificate again once its files change.
package tlsfiles

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certStatInterval is how often, at most, a TLS handshake looks at the
// certificate files for a change.
const certStatInterval = time.Second

// Reloader serves the server certificate of a certificate file and a key
// file, and loads the pair again when either file changes, so that a renewed
// certificate (cert-manager, certbot) is served without a restart. A
// handshake looks at the files' modification times at most once per
// certStatInterval. A pair that does not load (a file half written, a key
// that does not match) is logged once and the last good pair is served
// until the files change again. The client CAs (Server) are loaded
// once, at start.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	now               func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	loaded   [2]time.Time // the files' modification times that cert, or the last failure, came from
	nextStat time.Time
}

// NewReloader loads the pair once; it fails when the pair does not
// load.
func NewReloader(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now}
	mod, err := r.modTimes()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	r.cert, r.loaded, r.nextStat = &cert, mod, r.now().Add(certStatInterval)
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); !now.Before(r.nextStat) {
		r.nextStat = now.Add(certStatInterval)
		r.reload()
	}
	return r.cert, nil
}

// reload loads the pair again if either file changed since the last load
// or failure. r.mu is held.
func (r *Reloader) reload() {
	mod, err := r.modTimes()
	if err != nil || mod == r.loaded {
		return // a file that is missing for a moment is being replaced
	}
	r.loaded = mod
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.log.Error("server certificate not reloaded: serving the previous one", "cert_file", r.certFile, "key_file", r.keyFile, "err", err)
		return
	}
	r.cert = &cert
	r.log.Info("server certificate reloaded", "cert_file", r.certFile, "key_file", r.keyFile)
}

// modTimes returns the modification times of the certificate and key files.
func (r *Reloader) modTimes() ([2]time.Time, error) {
	var mod [2]time.Time
	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return mod, fmt.Errorf("server certificate: %w", err)
		}
		mod[i] = fi.ModTime()
	}
	return mod, nil
}
