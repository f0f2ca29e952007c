package tlsfiles

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for cn to certFile and, unless
// keyFile is "", its key to keyFile, both with modification time mod.
func writePair(t *testing.T, certFile, keyFile, cn string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), mod)
	if keyFile != "" {
		writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), mod)
	}
}

func writeFile(t *testing.T, name string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// TestCertReloader replaces the certificate files under a running reloader:
// the new pair is served once the check interval has passed (not before),
// a pair that does not load is logged once and the last good pair is still
// served, and a TLS client sees the new certificate in a real handshake.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	mod := time.Now().Add(-time.Hour).Truncate(time.Second)
	writePair(t, certFile, keyFile, "one", mod)
	var logs bytes.Buffer
	r, err := NewReloader(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r.now = func() time.Time { return clock }
	r.nextStat = clock.Add(certStatInterval)

	// A TLS listener that takes its certificate from the reloader only
	// (httptest's would serve its own to a client that sends no name).
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the test looks at the certificate itself
		DisableKeepAlives: true,                                  // a handshake each request
	}}
	served := func() string {
		t.Helper()
		resp, err := client.Get("https://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}

	steps := []struct {
		name    string
		change  func()
		advance time.Duration
		want    string
		logged  string // in the log since the last step; "" for nothing
	}{
		{name: "first pair", want: "one"},
		{
			name:   "replaced, before the check interval",
			change: func() { mod = mod.Add(time.Second); writePair(t, certFile, keyFile, "two", mod) },
			want:   "one",
		},
		{name: "replaced, after the check interval", advance: certStatInterval, want: "two", logged: "server certificate reloaded"},
		{
			name: "a certificate without its key",
			change: func() {
				mod = mod.Add(time.Second)
				writePair(t, certFile, "", "three", mod) // the key file still holds two's key
			},
			advance: certStatInterval, want: "two", logged: "server certificate not reloaded",
		},
		{name: "the same bad pair is logged once", advance: certStatInterval, want: "two"},
		{
			name:    "a file missing for a moment",
			change:  func() { os.Remove(keyFile) },
			advance: certStatInterval, want: "two",
		},
		{
			name:    "a good pair again",
			change:  func() { mod = mod.Add(time.Second); writePair(t, certFile, keyFile, "four", mod) },
			advance: certStatInterval, want: "four", logged: "server certificate reloaded",
		},
	}
	for _, s := range steps {
		logs.Reset()
		if s.change != nil {
			s.change()
		}
		clock = clock.Add(s.advance)
		if got := served(); got != s.want {
			t.Fatalf("%s: served the certificate of %q; want %q", s.name, got, s.want)
		}
		switch got := logs.String(); {
		case s.logged == "" && got != "":
			t.Errorf("%s: logged %q; want nothing", s.name, got)
		case s.logged != "" && strings.Count(got, s.logged) != 1:
			t.Errorf("%s: logged %q; want one line with %q", s.name, got, s.logged)
		}
	}
}

func TestNewCertReloaderRefusesABadPair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := NewReloader(certFile, keyFile, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("NewReloader with no files = nil error")
	}
	writePair(t, certFile, keyFile, "one", time.Now())
	writePair(t, certFile, "", "two", time.Now()) // cert two, key one
	if _, err := NewReloader(certFile, keyFile, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("NewReloader with a key that does not match = nil error")
	}
}
