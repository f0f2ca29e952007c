package config

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/backends/gcs"
	"fencegate/edge"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// testdataDir holds the config files of the tests: good/ and bad/. They
// stay next to the command whose README points at them.
var testdataDir = filepath.Join("..", "..", "cmd", "fencegate", "testdata", "config")

// envMap is a LookupEnv over a map.
func envMap(m map[string]string) LookupEnv {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// TestConfigErrorsAreAllReported: a file with several problems gets all
// of them, in line order, each on its own line with file and line.
func TestConfigErrorsAreAllReported(t *testing.T) {
	data := `http:
  listen: nowhere
  idle_timeout: -1s
etcd:
  endpoints: [ftp://x:1]
  colour: blue
partners:
  - name: a
    upstream: https://a.example
    methods: [post]
    resource: header
`
	_, err := parseConfig("f.yaml", t.TempDir(), []byte(data), envMap(nil))
	if err == nil {
		t.Fatal("parseConfig accepted a file with five problems")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"f.yaml:2: http.listen: ",
		"f.yaml:3: http.idle_timeout: -1s: must be above zero",
		"f.yaml:5: etcd.endpoints[0]: ",
		"f.yaml:6: etcd.colour: unknown field",
		`f.yaml:10: partners[0].methods[0]: unknown method "post"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("parseConfig: %d errors:\n%v\nwant %d", len(lines), err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q; want it to start with %q", i, lines[i], w)
		}
	}
}

// goodEnv is the environment the good configs refer to.
var goodEnv = map[string]string{
	"ETCD_PASSWORD":    "etcd-secret",
	"S3_SECRET_KEY":    "s3-secret",
	"PAYMENTS_API_KEY": "pay-123",
	"ECHO_API_KEY":     "echo-456",
	"CI_S3_SECRET":     "ci-s3-secret-wJalrXUtnFEMI",
}

// TestFullConfigDecodes checks what full.yaml turns into, field by field:
// the flags' values, the partner routes and auth.
func TestFullConfigDecodes(t *testing.T) {
	path := filepath.Join(testdataDir, "good", "full.yaml")
	cfg, err := ParseServe([]string{"--config", path}, envMap(goodEnv), &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatalf("parseServe --config %s: %v", path, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, "0.0.0.0:8443"},
		{"drain delay", cfg.HTTP.DrainDelay, 5 * time.Second},
		{"read timeout", cfg.HTTP.ReadTimeout, 10 * time.Minute},
		{"tls cert (relative to the file)", cfg.HTTP.TLSCert, filepath.Join(testdataDir, "good", "certs", "server.crt")},
		{"tls loaded", cfg.HTTP.TLS != nil && len(cfg.HTTP.TLS.Certificates) == 1, true},
		{"mTLS: client certs verified if given", cfg.HTTP.TLS != nil && cfg.HTTP.TLS.ClientAuth.String() == "VerifyClientCertIfGiven", true},
		{"etcd endpoints", strings.Join(cfg.Etcd.Endpoints, ","), "https://etcd-1:2379,https://etcd-2:2379,https://etcd-3:2379"},
		{"etcd username", cfg.Etcd.Username, "fencegate"},
		{"etcd password (password_env)", cfg.Etcd.Password, "etcd-secret"},
		{"etcd tls", cfg.Etcd.TLS != nil && cfg.Etcd.TLS.RootCAs != nil && len(cfg.Etcd.TLS.Certificates) == 1, true},
		{"etcd request timeout", cfg.Store.RequestTimeout, 2 * time.Second},
		{"s3 endpoint", cfg.S3.Endpoint, "https://s3.internal:7070"},
		{"s3 path style", cfg.S3.UsePathStyle, true},
		{"s3 secret (secret_key_env)", cfg.S3.SecretAccessKey, "s3-secret"},
		{"buffer bytes", cfg.Gateway.BufferBytes, int64(8 << 20)},
		{"buffer budget bytes", cfg.Gateway.BufferBudgetBytes, int64(256 << 20)},
		{"max header bytes", cfg.Gateway.MaxHeaderBytes, 64 << 10},
		{"max sessions per identity", cfg.Store.MaxSessionsPerIdentity, 200},
		{"max locks per session", cfg.Store.MaxLocksPerSession, 16},
		{"max lock waiters (0: no limit, the gateway's negative)", cfg.Gateway.MaxLockWaiters, -1},
		{"transfer chunk timeout", cfg.Gateway.TransferChunkTimeout, 20 * time.Second},
		{"max requests per client", cfg.Gateway.MaxRequestsPerClient, 32},
		{"s3 max conns", cfg.S3.MaxConnsPerHost, 512},
		{"s3 conn wait timeout", cfg.S3.ConnWaitTimeout, 3 * time.Second},
		{"tombstones for absent objects", cfg.Gateway.TombstonesForAbsent, true},
		{"multipart threshold", cfg.Gateway.MultipartThreshold, int64(128 << 20)},
		{"multipart part size", cfg.Gateway.MultipartPartSize, int64(32 << 20)},
		{"upload ttl", cfg.Gateway.UploadTTL, 12 * time.Hour},
		{"event subscribers", cfg.Gateway.EventSubscribers, 16},
		{"event buffer", cfg.Gateway.EventBuffer, 2048},
		{"mark retention", cfg.Marks.Retention, 12 * time.Hour},
		{"tombstone retention", cfg.Marks.TombstoneRetention, 720 * time.Hour},
		{"mark eviction interval", cfg.Marks.Interval, 5 * time.Minute},
		{"etag cache bound: half the mark retention", cfg.Gateway.ETagCacheMaxAge, 6 * time.Hour},
		{"log format", cfg.Log.Format, "json"},
		{"otlp endpoint", cfg.Tracing.Endpoint, "http://otel-collector:4317"},
		{"trace sample ratio", cfg.Tracing.SampleRatio, 0.1},
		{"token checks", TokenChecks(cfg.Store.Policies).String(), "reports=held:report-writer,logs=plausible,partner/payments=held:billing,*=none"},
		{"partner routes", len(cfg.Partners), 2},
		{"partner answers", cfg.Answers, PartnerAnswers{Bucket: "fencegate-answers", Prefix: "fencegate/answers/"}},
		{"partner identity budget", cfg.Gateway.PartnerIdentityBudget, partners.PartnerBudget{Records: 200000, Bytes: 512 << 20}},
		{"buckets", cfg.Buckets, []Bucket{
			{Name: "reports", Store: api.StoreS3},
			{Name: "ledgers", Store: api.StoreGCS},
			{Name: "ledgers-staging", Store: api.StoreGCS, GCS: gcs.Config{Endpoint: "http://127.0.0.1:4443/storage/v1/", WithoutAuthentication: true}},
		}},
		{"s3 api listen", cfg.S3API.Listen, "0.0.0.0:9443"},
		{"s3 api domain", cfg.S3API.Domain, "s3.fencegate.example"},
		{"s3 api region", cfg.S3API.Region, "us-east-1"},
		{"s3 api keys", cfg.S3API.Keys != nil && cfg.S3API.Keys.Len() == 1, true},
		{"ci's s3 key (secret_env)", cfg.Auth.Identities[0].S3Keys, []edge.S3Key{{AccessKeyID: "AKIAFENCEGATECI00001", SecretAccessKey: "ci-s3-secret-wJalrXUtnFEMI"}}},
		{"identities", len(cfg.Auth.Identities), 2},
		{"api keys", len(cfg.Auth.APIKeys), 2},
		{"client cert", cfg.Auth.ClientCerts, []edge.ClientCert{{CommonName: "ci-runner", Identity: "ci"}}},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	pay := cfg.Partners[0]
	wantPay := partners.PartnerRoute{
		Name:                   "payments",
		Methods:                []string{"POST"},
		Resource:               "accounts/{account}",
		Timeout:                30 * time.Second,
		MaxWait:                5 * time.Second,
		RequireIdempotencyKey:  true,
		IdempotencyTTL:         24 * time.Hour,
		MaxBodyBytes:           1 << 20,
		MaxStoredResponseBytes: 1 << 20,
		Budget:                 partners.PartnerBudget{Records: 50000, Bytes: 128 << 20},
		StripHeaders:           []string{"X-Debug"},
		AddHeaders:             http.Header{"Authorization": {"Bearer pay-123"}},
	}
	gotPay := pay
	gotPay.Upstream = nil
	if !equal(gotPay, wantPay) || pay.Upstream.String() != "https://api.payments.example/v1" {
		t.Errorf("partners[0] = %+v (upstream %v); want %+v (upstream https://api.payments.example/v1)", gotPay, pay.Upstream, wantPay)
	}
	if mailer := cfg.Partners[1]; mailer.Resource != "header" || mailer.ResourcePath != "lists/{resource}" || mailer.RequireIdempotencyKey || mailer.Timeout != 0 {
		t.Errorf("partners[1] = %+v; want resource header bound to lists/{resource}, idempotency key optional, timeout left to the gateway's default", mailer)
	}
	ci := cfg.Auth.Identities[0]
	wantGrants := []edge.Grant{
		{Prefix: "s3/reports/", Operations: []edge.Operation{edge.OpRead, edge.OpWrite, edge.OpDelete}},
		{Prefix: "report-writer", Operations: []edge.Operation{edge.OpLock}},
	}
	if ci.Name != "ci" || !equal(ci.Grants, wantGrants) {
		t.Errorf("identities[0] = %+v; want ci with %+v", ci, wantGrants)
	}
	if k := cfg.Auth.APIKeys[0]; k.SHA256 != sha256.Sum256([]byte("ci-runner-key")) || k.Identity != "ci" {
		t.Errorf("api key 0 = %x for %q; want the hash of ci-runner-key for ci", k.SHA256, k.Identity)
	}
}

// TestConfigPrecedence: a flag wins over the environment, which wins over
// the file, which wins over the default.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, `
http:
  listen: 127.0.0.1:9100
  idle_timeout: 7m
  read_timeout: 3m
etcd:
  endpoints: [http://file:2379]
  username: u
  password_env: FILE_PASSWORD
log:
  level: debug
`)
	env := map[string]string{
		"FENCEGATE_CONFIG":        path,
		"FENCEGATE_IDLE_TIMEOUT":  "5m",
		"FENCEGATE_LISTEN":        "127.0.0.1:9200",
		"FENCEGATE_ETCD_PASSWORD": "from-env",
		"FILE_PASSWORD":           "from-file",
	}
	cfg, err := ParseServe([]string{"--listen", "127.0.0.1:9300"}, envMap(env), &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen (flag over env over file)", cfg.Listen, "127.0.0.1:9300"},
		{"idle timeout (env over file)", cfg.HTTP.IdleTimeout, 5 * time.Minute},
		{"etcd password (env over file)", cfg.Etcd.Password, "from-env"},
		{"read timeout (file over default)", cfg.HTTP.ReadTimeout, 3 * time.Minute},
		{"etcd endpoints (file)", strings.Join(cfg.Etcd.Endpoints, ","), "http://file:2379"},
		{"log level (file)", cfg.Log.Level.String(), "DEBUG"},
		{"write timeout (default)", cfg.HTTP.WriteTimeout, 10 * time.Minute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	// Without FENCEGATE_ETCD_PASSWORD, password_env's variable is used.
	delete(env, "FENCEGATE_ETCD_PASSWORD")
	cfg, err = ParseServe(nil, envMap(env), &bytes.Buffer{}, nil)
	if err != nil || cfg.Etcd.Password != "from-file" {
		t.Errorf("parseServe = %q, %v; want the password from FILE_PASSWORD", cfg.Etcd.Password, err)
	}
	// --config on the command line wins over FENCEGATE_CONFIG.
	other := writeConfig(t, "etcd:\n  endpoints: [http://other:2379]\n")
	cfg, err = ParseServe([]string{"--config", other}, envMap(env), &bytes.Buffer{}, nil)
	if err != nil || strings.Join(cfg.Etcd.Endpoints, ",") != "http://other:2379" {
		t.Errorf("parseServe --config other = %v, %v; want the other file's endpoints", cfg.Etcd.Endpoints, err)
	}
}

// TestConfigMergedChecks: checks that span the file and the flags still
// run after the merge, and name where each value came from.
func TestConfigMergedChecks(t *testing.T) {
	certs := filepath.Join(testdataDir, "good", "certs")
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join(certs, name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clientCerts := writeConfig(t, `
etcd: {endpoints: [http://127.0.0.1:2379]}
auth:
  identities:
    - name: ci
      grants: [{prefix: "", operations: [read]}]
      client_certs: [ci-runner]
`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"client certs without a client CA", []string{"--config", clientCerts}, "auth.identities[0].client_certs: client certificates need http.tls.client_ca_file"},
		{"file buffer over flag max body", []string{"--config", writeConfig(t, "etcd: {endpoints: [http://a:1]}\nlimits: {buffer_bytes: 2MiB}\n"), "--max-body-bytes", "1MiB"}, "--buffer-bytes 2MiB must not exceed --max-body-bytes 1MiB"},
		{"file buffer over flag buffer budget", []string{"--config", writeConfig(t, "etcd: {endpoints: [http://a:1]}\nlimits: {buffer_bytes: 2MiB}\n"), "--buffer-budget-bytes", "1MiB"}, "--buffer-budget-bytes 1MiB must be at least --buffer-bytes 2MiB"},
		{"tls key without cert", []string{"--config", writeConfig(t, "etcd: {endpoints: [http://a:1]}\n"), "--tls-key", abs("server.key")}, "--tls-cert and --tls-key go together"},
		{"missing config file", []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, "nope.yaml: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseServe(tt.args, envMap(nil), &bytes.Buffer{}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseServe(%q) = %v; want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
	// With the client CA given by flags, the same file is accepted.
	args := []string{"--config", clientCerts, "--tls-cert", abs("server.crt"), "--tls-key", abs("server.key"), "--tls-client-ca", abs("ca.crt")}
	if _, err := ParseServe(args, envMap(nil), &bytes.Buffer{}, nil); err != nil {
		t.Errorf("parseServe(%q) = %v; want nil", args, err)
	}
}

// TestDevConfig: dev takes the file's gateway settings, partner routes
// and auth, and reports the etcd and S3 settings as unused.
func TestDevConfig(t *testing.T) {
	path := filepath.Join(testdataDir, "good", "full.yaml")
	// The file's s3_api.listen (0.0.0.0) is not loopback: dev would refuse it.
	cfg, err := ParseDev([]string{"--config", path, "--listen", "127.0.0.1:0", "--s3-listen", "127.0.0.1:0"}, envMap(goodEnv), &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatalf("parseDev --config %s: %v", path, err)
	}
	if cfg.Listen != "127.0.0.1:0" || cfg.HTTP.DrainDelay != 5*time.Second || cfg.Log.Format != "json" || cfg.HTTP.TLS == nil {
		t.Errorf("dev config = %+v; want the flag's listen and the file's drain delay, log format and TLS", cfg)
	}
	if len(cfg.Partners) != 2 || cfg.Auth == nil || TokenChecks(cfg.Store.Policies).String() == "" {
		t.Errorf("dev features = %+v, token checks %q; want the file's 2 routes, auth and token checks", cfg.Features, TokenChecks(cfg.Store.Policies).String())
	}
	for _, want := range []string{"etcd.endpoints", "etcd.password_env", "s3.endpoint", "s3.region"} {
		if !slices.Contains(cfg.Ignored, want) {
			t.Errorf("dev ignored %q; want %s among them", cfg.Ignored, want)
		}
	}
}

// TestDevStores: --stores is s3 (the default) or s3,gcs, which maps the
// bucket dev-gcs to GCS in place of the file's buckets section.
func TestDevStores(t *testing.T) {
	file := writeConfig(t, "buckets:\n  - {name: ledgers, store: gcs}\n")
	for _, tc := range []struct {
		args        []string
		wantStores  []string
		wantBuckets []Bucket
		wantErr     string
	}{
		{args: nil, wantStores: []string{"s3"}, wantBuckets: []Bucket{}},
		{args: []string{"--stores", "s3,gcs"}, wantStores: []string{"s3", "gcs"}, wantBuckets: []Bucket{{Name: "dev-gcs", Store: "gcs"}}},
		{args: []string{"--stores", "s3,gcs", "--config", file}, wantStores: []string{"s3", "gcs"}, wantBuckets: []Bucket{{Name: "dev-gcs", Store: "gcs"}}},
		{args: []string{"--stores", "gcs"}, wantErr: `--stores "gcs": s3 is always run`},
		{args: []string{"--stores", "s3,azure"}, wantErr: `--stores "s3,azure": unknown store "azure"`},
	} {
		cfg, err := ParseDev(tc.args, envMap(nil), &bytes.Buffer{}, nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseDev(%q) = %v; want an error containing %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !equal(cfg.Stores, tc.wantStores) || !equal(cfg.Buckets, tc.wantBuckets) {
			t.Errorf("ParseDev(%q) = stores %q, buckets %+v, %v; want %q, %+v", tc.args, cfg.Stores, cfg.Buckets, err, tc.wantStores, tc.wantBuckets)
		}
	}
}

// TestExpandEnv covers ${NAME} in add_headers values.
func TestExpandEnv(t *testing.T) {
	env := envMap(map[string]string{"KEY": "k1", "EMPTY": ""})
	tests := []struct {
		in, want, wantErr string
	}{
		{"Bearer ${KEY}", "Bearer k1", ""},
		{"${KEY}-${KEY}", "k1-k1", ""},
		{"no reference", "no reference", ""},
		{"cost: $5", "cost: $5", ""},
		{"${MISSING}", "", "environment variable MISSING is not set"},
		{"${EMPTY}", "", "environment variable EMPTY is not set"},
		{"${1BAD}", "", "not an environment variable reference"},
		{"${KEY", "", "unclosed ${"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, env)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("expandEnv(%q) = %q, %v; want %q, error containing %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestConfigErrorsKeepSecrets: a plain key pasted into api_keys and a
// password in add_headers never appear in an error.
func TestConfigErrorsKeepSecrets(t *testing.T) {
	data := `auth:
  identities:
    - name: ci
      grants: [{prefix: "", operations: [read]}]
      api_keys: ["very-secret-plain-key"]
partners:
  - name: p
    upstream: https://p.example
    methods: [POST]
    resource: header
    add_headers:
      X-Key: "${SECRET} trailing-space "
  - name: q
    upstream: https://q.example
    methods: [POST]
    resource: header
    add_headers: "sk_live_in_the_wrong_place"
`
	_, err := parseConfig("f.yaml", t.TempDir(), []byte(data), envMap(map[string]string{"SECRET": "hunter2"}))
	if err == nil {
		t.Fatal("parseConfig accepted a plain key")
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("parseConfig: %d errors:\n%v\nwant 3", n, err)
	}
	for _, secret := range []string{"very-secret-plain-key", "hunter2", "sk_live_in_the_wrong_place"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q quotes the secret %q", err, secret)
		}
	}
}

// FuzzLoadConfig: no input makes the loader panic, and every error it
// gives names the file and a line.
func FuzzLoadConfig(f *testing.F) {
	for _, dir := range []string{"good", "bad"} {
		files, _ := filepath.Glob(filepath.Join(testdataDir, dir, "*.yaml"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("partners: [{name: a, upstream: 'http://[::1]:80', methods: [GET], resource: '{x}', add_headers: {A: '${B}'}}]"))
	f.Add([]byte("auth: {identities: [{name: a, grants: [{prefix: '', operations: [admin]}], api_keys: [], client_certs: ['']}]}"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("token_checks: {'*': none, '*': held}\n"))
	errorLine := regexp.MustCompile(`^fuzz\.yaml:[0-9]+: `)
	dir := filepath.Join(testdataDir, "good")
	env := envMap(goodEnv)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseConfig("fuzz.yaml", dir, data, env)
		if err == nil {
			if cfg == nil {
				t.Fatal("parseConfig = nil, nil")
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !errorLine.MatchString(line) {
				t.Fatalf("parseConfig error line %q does not start with fuzz.yaml:LINE:", line)
			}
		}
	})
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// writeConfig writes data to a config file in a temporary directory.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeConfigSources(t *testing.T) {
	env := envMap(map[string]string{
		"FENCEGATE_LISTEN":         "127.0.0.1:9000",
		"FENCEGATE_ETCD_ENDPOINTS": "http://e1:2379, http://e2:2379",
		"FENCEGATE_BUFFER_BYTES":   "1MiB",
		"FENCEGATE_S3_PATH_STYLE":  "true",
		"FENCEGATE_LOG_LEVEL":      "debug",
		"FENCEGATE_S3_REGION":      "", // empty counts as unset
		"FENCEGATE_IDLE_TIMEOUT":   "5m",
	})
	cfg, err := ParseServe([]string{"--listen", "127.0.0.1:9001", "--idle-timeout=1m"}, env, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen (flag over env)", cfg.Listen, "127.0.0.1:9001"},
		{"idle timeout (flag over env)", cfg.HTTP.IdleTimeout, time.Minute},
		{"etcd endpoints (env)", strings.Join(cfg.Etcd.Endpoints, " "), "http://e1:2379 http://e2:2379"},
		{"buffer bytes (env)", cfg.Gateway.BufferBytes, int64(1 << 20)},
		{"path style (env)", cfg.S3.UsePathStyle, true},
		{"log level (env)", cfg.Log.Level.String(), "DEBUG"},
		{"s3 region (default)", cfg.S3.Region, "us-east-1"},
		{"etcd prefix (default)", cfg.Store.Prefix, "fencegate/"},
		{"max body (default)", cfg.Gateway.MaxBodyBytes, int64(5 << 30)},
		{"max header (default)", cfg.Gateway.MaxHeaderBytes, 64 << 10},
		{"max sessions per identity (default)", cfg.Store.MaxSessionsPerIdentity, 1000},
		{"max locks per session (default)", cfg.Store.MaxLocksPerSession, 64},
		{"max lock waiters (default)", cfg.Gateway.MaxLockWaiters, 1000},
		{"transfer chunk timeout (default)", cfg.Gateway.TransferChunkTimeout, 10 * time.Second},
		{"s3 max conns (default)", cfg.S3.MaxConnsPerHost, 256},
		{"max requests per client (default)", cfg.Gateway.MaxRequestsPerClient, 128},
		{"s3 conn wait timeout (default)", cfg.S3.ConnWaitTimeout, 5 * time.Second},
		{"read header timeout (default)", cfg.HTTP.ReadHeaderTimeout, 10 * time.Second},
		{"read timeout (default)", cfg.HTTP.ReadTimeout, 10 * time.Minute},
		{"write timeout (default)", cfg.HTTP.WriteTimeout, 10 * time.Minute},
		{"shutdown timeout (default)", cfg.HTTP.ShutdownTimeout, 30 * time.Second},
		{"etcd request timeout (default)", cfg.Store.RequestTimeout, 2 * time.Second},
		{"log format (default)", cfg.Log.Format, "text"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"65536", 65536, false},
		{"64KiB", 64 << 10, false},
		{"8MiB", 8 << 20, false},
		{"5GiB", 5 << 30, false},
		{"1TiB", 1 << 40, false},
		{"10B", 10, false},
		{"-1", -1, false}, // parses; validation rejects it by flag name
		{"", 0, true},
		{"8MB", 0, true},
		{"1.5GiB", 0, true},
		{"99999999999TiB", 0, true},
	}
	for _, tt := range tests {
		var b byteSize
		err := b.Set(tt.in)
		if (err != nil) != tt.wantErr || err == nil && int64(b) != tt.want {
			t.Errorf("Set(%q) = %d, %v; want %d, error %v", tt.in, b, err, tt.want, tt.wantErr)
		}
	}
	for n, want := range map[int64]string{0: "0", 8 << 20: "8MiB", 5 << 30: "5GiB", 1000: "1000", 3 << 10: "3KiB"} {
		if got := byteSize(n).String(); got != want {
			t.Errorf("byteSize(%d).String() = %q; want %q", n, got, want)
		}
	}
}

func TestTokenChecksFlag(t *testing.T) {
	var got TokenChecks
	if err := got.Set(" reports=held:report-writer, logs=plausible,*=plausible,legacy=none, partner/payments=held:billing,partner/mailer=none "); err != nil {
		t.Fatal(err)
	}
	want := TokenChecks{
		{Prefix: "s3/reports/", Check: tokenstore.CheckHeld, Lock: "report-writer"},
		{Prefix: "s3/logs/", Check: tokenstore.CheckPlausible},
		{Prefix: "", Check: tokenstore.CheckPlausible},
		{Prefix: "s3/legacy/", Check: tokenstore.CheckNone},
		{Prefix: "partner/payments/", Check: tokenstore.CheckHeld, Lock: "billing"},
		{Prefix: "partner/mailer/", Check: tokenstore.CheckNone},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Set = %+v; want %+v", got, want)
	}
	if s := got.String(); s != "reports=held:report-writer,logs=plausible,*=plausible,legacy=none,partner/payments=held:billing,partner/mailer=none" {
		t.Errorf("String() = %q", s)
	}
	if err := got.Set(""); err != nil || len(got) != 0 {
		t.Errorf("Set(\"\") = %v, %+v; want an empty list", err, got)
	}
	for _, bad := range []string{
		"reports", "reports=strict", "reports=held", "reports=held:a/b", "reports=plausible:x",
		"Bad_Bucket=none", "a=none,a=plausible", "*=none,*=held:x",
		"partner/=none", "partner/Pay=none", "partner/pay/x=none", "partner/-pay=none",
		"partner/pay=none,partner/pay=plausible",
	} {
		var c TokenChecks
		if err := c.Set(bad); err == nil {
			t.Errorf("Set(%q) succeeded; want an error", bad)
		}
	}
}

// TestTokenChecksFollowBucketStores: a token check names a bucket; when
// the buckets section puts that bucket in GCS, the check applies to its
// resources there (gcs/BUCKET/...), not to the S3 name no write carries.
func TestTokenChecksFollowBucketStores(t *testing.T) {
	path := writeConfig(t, "buckets:\n  - {name: ledgers, store: gcs}\ntoken_checks:\n  ledgers: held:ledger-writer\n  reports: plausible\n")
	cfg, err := ParseServe([]string{"--config", path, "--etcd-endpoints", "http://127.0.0.1:2379"}, envMap(nil), &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []tokenstore.Policy{
		{Prefix: "gcs/ledgers/", Check: tokenstore.CheckHeld, Lock: "ledger-writer"},
		{Prefix: "s3/reports/", Check: tokenstore.CheckPlausible},
	}
	if !reflect.DeepEqual(cfg.Store.Policies, want) {
		t.Errorf("policies = %+v; want %+v", cfg.Store.Policies, want)
	}
}

// TestTokenChecksNameDefinedRoutes: an entry for a partner route that the
// config does not define is an error, lest a misspelt name leave the real
// route unchecked.
func TestTokenChecksNameDefinedRoutes(t *testing.T) {
	var checks TokenChecks
	if err := checks.Set("reports=plausible,partner/payments=held:billing"); err != nil {
		t.Fatal(err)
	}
	routes := []partners.PartnerRoute{{Name: "mailer"}, {Name: "payments"}}
	if err := checks.validateRoutes(routes); err != nil {
		t.Errorf("validateRoutes(mailer, payments) = %v; want nil", err)
	}
	if err := checks.validateRoutes(routes[:1]); err == nil || !strings.Contains(err.Error(), `"payments"`) {
		t.Errorf("validateRoutes(mailer) = %v; want an error naming payments", err)
	}
}

// TestServeTakesTokenChecks: --token-checks and its environment variable
// reach the token store's config; a bad value is a usage error.
func TestServeTakesTokenChecks(t *testing.T) {
	env := func(m map[string]string) LookupEnv {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	base := map[string]string{"FENCEGATE_ETCD_ENDPOINTS": "http://127.0.0.1:2379"}
	cfg, err := ParseServe([]string{"--token-checks", "reports=held:w"}, env(base), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Store.Policies) != 1 || cfg.Store.Policies[0].Lock != "w" {
		t.Fatalf("token checks %+v", cfg.Store.Policies)
	}
	base["FENCEGATE_TOKEN_CHECKS"] = "*=plausible"
	if cfg, err = ParseServe(nil, env(base), nil, nil); err != nil || len(cfg.Store.Policies) != 1 || cfg.Store.Policies[0].Check != tokenstore.CheckPlausible {
		t.Fatalf("from the environment: %+v, %v", cfg.Store.Policies, err)
	}
	if _, err := ParseServe([]string{"--token-checks", "reports=strict"}, env(base), nil, nil); err == nil {
		t.Fatal("a bad --token-checks was accepted")
	}
}
