package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/internal/testenv"
	"fencegate/internal/tlsfiles"
)

// TestProcessRefusesBadConfig: the real process, started with a bad
// config file, exits 2 before starting anything and prints the file, the
// line and the field; `config check` and `auth hash-key` behave as the
// README says.
func TestProcessRefusesBadConfig(t *testing.T) {
	bin := buildFencegate(t)
	bad := filepath.Join("testdata", "config", "bad", "partner-upstream-ftp.yaml")
	const want = `partner-upstream-ftp.yaml:7: partners[1].upstream: scheme "ftp" not allowed, want http or https`
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	tests := []struct {
		name       string
		args       []string
		env        []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"serve --config", []string{"serve", "--config", bad, "--listen", "127.0.0.1:0"}, nil, "", 2, "", want},
		{"FENCEGATE_CONFIG, default command", nil, []string{"FENCEGATE_CONFIG=" + bad}, "", 2, "", want},
		{"dev --config", []string{"dev", "--config", bad, "--data", t.TempDir()}, nil, "", 2, "", want},
		{"config check bad", []string{"config", "check", bad}, nil, "", 2, "", want},
		{"config check good", []string{"config", "check", filepath.Join("testdata", "config", "good", "auth.yaml")}, nil, "", 0, "auth.yaml: ok\n", ""},
		{"auth hash-key", []string{"auth", "hash-key"}, nil, "ci-runner-key\n", 0,
			"sha256:94c136dbfe4850ebcf8d88ca74f0becec7f197b1171cb1ab159da5449146c774\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = append(env, tt.env...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("fencegate %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					tt.args, code, stdout.String(), stderr.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// partnerRecorder is a partner API that records what reaches it.
type partnerRecorder struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (p *partnerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r.Clone(r.Context()))
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"ok": true}`)
}

func (p *partnerRecorder) got() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.requests...)
}

// TestServeWithConfigFile runs serve with everything from a config file,
// against a real etcd, S3 server and partner: HTTPS with client
// certificates, auth by bearer key and by certificate, and a partner route
// whose API key comes from the environment.
func TestServeWithConfigFile(t *testing.T) {
	st := startStack(t, "cfg")
	partner := &partnerRecorder{}
	upstream := httptest.NewServer(partner)
	defer upstream.Close()
	certs, err := filepath.Abs(filepath.Join("testdata", "config", "good", "certs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CFGTEST_S3_SECRET", st.s3.SecretKey)
	t.Setenv("CFGTEST_PARTNER_KEY", "partner-key-123")
	addr := freeAddr(t)
	path := writeConfig(t, fmt.Sprintf(`
http:
  listen: %s
  tls:
    cert_file: %s/server.crt
    key_file: %s/server.key
    client_ca_file: %s/ca.crt
etcd:
  endpoints: [%s]
  prefix: cfgtest/
s3:
  endpoint: %s
  path_style: true
  access_key: %s
  secret_key_env: CFGTEST_S3_SECRET
log: {level: warn}
partners:
  - name: echo
    upstream: %s/base
    methods: [POST]
    resource: orders/{order}
    add_headers: {X-Api-Key: "${CFGTEST_PARTNER_KEY}"}
auth:
  identities:
    - name: writer
      grants:
        - {prefix: s3/cfg/, operations: [read, write]}
        - {prefix: partner/echo/, operations: [write]}
      api_keys: [%q]
    - name: reader
      grants: [{prefix: s3/cfg/, operations: [read]}]
      api_keys: [%q]
      client_certs: [ci-runner]
`, addr, certs, certs, certs, strings.Join(st.etcd.Endpoints(), ", "), st.s3.Endpoint(), st.s3.AccessKey,
		upstream.URL, hashAPIKey("writer-key"), hashAPIKey("reader-key")))

	r := startRun(t, "serve", "--config", path)
	base := "https://" + addr

	pool, err := tlsfiles.CertPool(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(filepath.Join(certs, "client.crt"), filepath.Join(certs, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	newClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: certs},
			DisableKeepAlives: true,
		}}
	}
	plain, withCert := newClient(), newClient(clientCert)
	testenv.WaitUntil(t, 30*time.Second, "/readyz answers 200 over HTTPS", func() bool {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("serve ended: %v", err)
		default:
		}
		resp, err := plain.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	tests := []struct {
		name       string
		client     *http.Client
		method     string
		path       string
		key        string // bearer key
		token      string
		wantStatus int
	}{
		{"no credentials", plain, http.MethodPut, "/v1/objects/cfg/a", "", "5", http.StatusUnauthorized},
		{"unknown key", plain, http.MethodPut, "/v1/objects/cfg/a", "guess", "5", http.StatusUnauthorized},
		{"reader key may not write", plain, http.MethodPut, "/v1/objects/cfg/a", "reader-key", "5", http.StatusForbidden},
		{"writer key writes", plain, http.MethodPut, "/v1/objects/cfg/a", "writer-key", "5", http.StatusCreated},
		{"writer key, other bucket", plain, http.MethodPut, "/v1/objects/other/a", "writer-key", "5", http.StatusForbidden},
		{"client certificate reads", withCert, http.MethodGet, "/v1/objects/cfg/a", "", "", http.StatusOK},
		{"client certificate may not write", withCert, http.MethodPut, "/v1/objects/cfg/a", "", "6", http.StatusForbidden},
		{"bearer key wins over the certificate", withCert, http.MethodPut, "/v1/objects/cfg/a", "writer-key", "6", http.StatusOK},
		{"partner without key", plain, http.MethodPost, "/v1/partners/echo/orders/42", "", "7", http.StatusUnauthorized},
		{"partner with writer key", plain, http.MethodPost, "/v1/partners/echo/orders/42", "writer-key", "7", http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader("body of "+tt.name))
		if err != nil {
			t.Fatal(err)
		}
		if tt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tt.key)
		}
		if tt.token != "" {
			req.Header.Set("X-Fence-Token", tt.token)
		}
		resp, err := tt.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", tt.name, tt.method, tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("%s: %s %s = %d %s; want %d", tt.name, tt.method, tt.path, resp.StatusCode, body, tt.wantStatus)
		}
		if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: Content-Type %q; want application/problem+json", tt.name, resp.Header.Get("Content-Type"))
		}
	}

	// Only the authorized partner request reached the partner, at the
	// configured upstream, with the key from the environment.
	got := partner.got()
	if len(got) != 1 {
		t.Fatalf("the partner got %d requests; want 1", len(got))
	}
	if p, key, token := got[0].URL.Path, got[0].Header.Get("X-Api-Key"), got[0].Header.Get("X-Fence-Token"); p != "/base/orders/42" || key != "partner-key-123" || token != "7" {
		t.Errorf("the partner got %s with X-Api-Key %q, X-Fence-Token %q; want /base/orders/42, partner-key-123, 7", p, key, token)
	}
	if got[0].Header.Get("Authorization") != "" {
		t.Errorf("the partner got the client's Authorization header")
	}

	// A certificate from another CA is refused in the handshake. (The
	// client is made to send it: Go's client sends only certificates that
	// the server's list of CAs names.)
	other := httptest.NewTLSServer(http.NotFoundHandler())
	otherCert := other.TLS.Certificates[0]
	other.Close()
	forced := newClient()
	forced.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &otherCert, nil
	}
	if resp, err := forced.Get(base + "/readyz"); err == nil {
		resp.Body.Close()
		t.Errorf("a client certificate from an unknown CA was accepted: %s", resp.Status)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}
