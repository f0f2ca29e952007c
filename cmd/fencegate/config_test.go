package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"fencegate/gateway"
)

// badConfigs are the files in testdata/config/bad and a fragment of the
// error each must give: its line and the field's path at least.
var badConfigs = []struct {
	file string
	want string
}{
	{"alias.yaml", "alias.yaml:3: http.read_header_timeout: YAML aliases are not supported"},
	{"api-key-duplicate.yaml", "api-key-duplicate.yaml:10: auth.identities[1].api_keys[0]: the same key is configured twice (first at line 6)"},
	{"api-key-length.yaml", "api-key-length.yaml:6: auth.identities[0].api_keys[0]: sha256: has 62 hex digits; want 64"},
	{"api-key-plain.yaml", "api-key-plain.yaml:6: auth.identities[0].api_keys[0]: not a key hash"},
	{"buffer-over-body.yaml", "buffer-over-body.yaml:2: limits.buffer_bytes: 2MiB must not exceed limits.max_body_bytes 1MiB"},
	{"duration-zero.yaml", "duration-zero.yaml:2: http.shutdown_timeout: 0s: must be above zero"},
	{"duration.yaml", `duration.yaml:3: etcd.request_timeout: "2" is not a duration`},
	{"empty.yaml", "empty.yaml:1: the file is empty"},
	{"etcd-endpoint.yaml", `etcd-endpoint.yaml:4: etcd.endpoints[1]: "unix:///var/run/etcd.sock": want a URL`},
	{"identity-duplicate.yaml", `identity-duplicate.yaml:6: auth.identities[1].name: identity "ci" is defined twice (first at line 3)`},
	{"identity-no-credentials.yaml", "identity-no-credentials.yaml:3: auth.identities[0]: no api_keys and no client_certs"},
	{"listen.yaml", `listen.yaml:2: http.listen: "8080": want host:port`},
	{"log-level.yaml", `log-level.yaml:2: log.level: "loud": want debug, info, warn or error`},
	{"operation.yaml", `operation.yaml:6: auth.identities[0].grants[0].operations[1]: unknown operation "upload"`},
	{"partner-add-header.yaml", "partner-add-header.yaml:8: partners[0].add_headers.x-fence-token: X-Fence-Token is set by the gateway"},
	{"partner-duplicate.yaml", `partner-duplicate.yaml:6: partners[1].name: route "payments" is defined twice (first at line 2)`},
	{"partner-idempotency.yaml", `partner-idempotency.yaml:6: partners[0].idempotency_key: "always": want required or optional`},
	{"partner-method.yaml", `partner-method.yaml:4: partners[0].methods[1]: unknown method "FETCH"`},
	{"partner-missing-env.yaml", "partner-missing-env.yaml:7: partners[0].add_headers.Authorization: environment variable FENCEGATE_TEST_UNSET_KEY is not set"},
	{"partner-missing-fields.yaml", "partner-missing-fields.yaml:2: partners[0].upstream: missing"},
	{"partner-name.yaml", `partner-name.yaml:2: partners[0].name: "Payments_API": want lower-case letters`},
	{"partner-resource.yaml", `partner-resource.yaml:5: partners[0].resource: template "accounts/all": no {variable}`},
	{"partner-resource-path.yaml", `partner-resource-path.yaml:6: partners[0].resource_path: only with resource "header"`},
	{"partner-resource-path-variable.yaml", `partner-resource-path-variable.yaml:6: partners[0].resource_path: "lists/{list}": {list}: the only variable is {resource}`},
	{"partner-upstream-ftp.yaml", `partner-upstream-ftp.yaml:7: partners[1].upstream: scheme "ftp" not allowed, want http or https`},
	{"partner-upstream-userinfo.yaml", "partner-upstream-userinfo.yaml:3: partners[0].upstream: \"https://user:xxxxx@api.payments.example/v1\" has user info"},
	{"password-twice.yaml", "password-twice.yaml:5: etcd.password_env: set etcd.password or etcd.password_env, not both"},
	{"repeated-key.yaml", "repeated-key.yaml:4: log.level: repeated (first at line 2)"},
	{"size.yaml", `size.yaml:2: limits.max_body_bytes: "5GB": want a number of bytes`},
	{"count.yaml", `count.yaml:2: limits.max_lock_waiters: "-5": want a whole number, 0 or more`},
	{"tls-cert-without-key.yaml", "tls-cert-without-key.yaml:3: http.tls.cert_file: needs http.tls.key_file"},
	{"tls-missing-file.yaml", "tls-missing-file.yaml:4: etcd.tls.ca_file: stat "},
	{"token-checks.yaml", "token-checks.yaml:2: token_checks.reports: \"reports=held\": held needs a lock name"},
	{"token-checks-route.yaml", `token-checks-route.yaml:2: token_checks: token check for partner/payment: the config file defines no partner route "payment"`},
	{"tracing-endpoint.yaml", `tracing-endpoint.yaml:2: tracing.otlp_endpoint: "ftp://collector:4317": want http://host:port`},
	{"tracing-sample-ratio.yaml", "tracing-sample-ratio.yaml:5: tracing.sample_ratio: 2: must be from 0 to 1"},
	{"two-documents.yaml", "two-documents.yaml:3: a second YAML document"},
	{"unknown-nested.yaml", "unknown-nested.yaml:3: etcd.endpionts: unknown field (want one of endpoints, prefix"},
	{"unknown-top-level.yaml", "unknown-top-level.yaml:3: metrics: unknown field"},
	{"wrong-type.yaml", "wrong-type.yaml:2: etcd: want a mapping, got a list"},
	{"yaml-syntax.yaml", "yaml-syntax.yaml:5: YAML: mapping values are not allowed"},
}

// TestBadConfigs: every bad file is refused by the loader, by `config
// check` and by serve's and dev's start-up, with an error that names the
// file, the line and the field, and is a usage error (exit 2).
func TestBadConfigs(t *testing.T) {
	dir := filepath.Join("testdata", "config", "bad")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(badConfigs, func(c struct{ file, want string }) bool { return c.file == filepath.Base(f) }) {
			t.Errorf("%s has no entry in badConfigs", f)
		}
	}
	if len(badConfigs) < 12 {
		t.Errorf("%d bad configs; want at least 12", len(badConfigs))
	}
	env := envMap(map[string]string{"ETCD_PASSWORD": "p"})
	for _, tt := range badConfigs {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			_, err := loadConfigFile(path, env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("loadConfigFile(%s) = %v; want an error containing %q", path, err, tt.want)
			}
			for _, args := range [][]string{
				{"config", "check", path},
				{"serve", "--config", path},
				{"dev", "--config", path},
			} {
				var stdout bytes.Buffer
				err := runEnv(t.Context(), args, env, &stdout, &bytes.Buffer{})
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("run(%q) = %v; want an error containing %q", args, err, tt.want)
				}
				if !errors.As(err, new(*usageError)) {
					t.Errorf("run(%q) = %T; want a *usageError (exit 2)", args, err)
				}
				if stdout.Len() > 0 {
					t.Errorf("run(%q) printed %q on stdout; want nothing", args, stdout.String())
				}
			}
		})
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
}

// TestGoodConfigs: every file in testdata/config/good loads, passes
// `config check`, and gives serve a valid config.
func TestGoodConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "config", "good", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("good configs: %v, %v; want at least 3", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, err := loadConfigFile(path, envMap(goodEnv)); err != nil {
				t.Fatalf("loadConfigFile(%s): %v", path, err)
			}
			var stdout bytes.Buffer
			if err := runEnv(t.Context(), []string{"config", "check", path}, envMap(goodEnv), &stdout, &bytes.Buffer{}); err != nil {
				t.Fatalf("config check %s: %v", path, err)
			}
			if !strings.HasPrefix(stdout.String(), path+": ok\n") {
				t.Errorf("config check %s printed %q; want %q first", path, stdout.String(), path+": ok")
			}
			// Serve needs etcd endpoints: from the file, or here the flag.
			if _, err := parseServe([]string{"--config", path, "--etcd-endpoints", "https://127.0.0.1:2379"}, envMap(goodEnv), &bytes.Buffer{}); err != nil {
				t.Errorf("serve --config %s: %v", path, err)
			}
		})
	}
}

// TestFullConfigDecodes checks what full.yaml turns into, field by field:
// the flags' values, the partner routes and auth.
func TestFullConfigDecodes(t *testing.T) {
	path := filepath.Join("testdata", "config", "good", "full.yaml")
	cfg, err := parseServe([]string{"--config", path}, envMap(goodEnv), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseServe --config %s: %v", path, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.listen, "0.0.0.0:8443"},
		{"drain delay", cfg.http.drainDelay, 5 * time.Second},
		{"read timeout", cfg.http.readTimeout, 10 * time.Minute},
		{"tls cert (relative to the file)", cfg.http.tlsCert, filepath.Join("testdata", "config", "good", "certs", "server.crt")},
		{"tls loaded", cfg.http.tls != nil && len(cfg.http.tls.Certificates) == 1, true},
		{"mTLS: client certs verified if given", cfg.http.tls != nil && cfg.http.tls.ClientAuth.String() == "VerifyClientCertIfGiven", true},
		{"etcd endpoints", strings.Join(cfg.etcd.endpoints, ","), "https://etcd-1:2379,https://etcd-2:2379,https://etcd-3:2379"},
		{"etcd username", cfg.etcd.username, "fencegate"},
		{"etcd password (password_env)", cfg.etcd.password, "etcd-secret"},
		{"etcd tls", cfg.etcd.tls != nil && cfg.etcd.tls.RootCAs != nil && len(cfg.etcd.tls.Certificates) == 1, true},
		{"etcd request timeout", cfg.etcd.requestTimeout, 2 * time.Second},
		{"s3 endpoint", cfg.s3.Endpoint, "https://s3.internal:7070"},
		{"s3 path style", cfg.s3.UsePathStyle, true},
		{"s3 secret (secret_key_env)", cfg.s3.SecretAccessKey, "s3-secret"},
		{"buffer bytes", cfg.gateway.bufferBytes, int64(8 << 20)},
		{"buffer budget bytes", cfg.gateway.bufferBudgetBytes, int64(256 << 20)},
		{"max header bytes", cfg.gateway.maxHeaderBytes, 64 << 10},
		{"max sessions per identity", cfg.gateway.maxSessionsPerIdentity, 200},
		{"max locks per session", cfg.gateway.maxLocksPerSession, 16},
		{"max lock waiters (0: no limit)", cfg.gateway.maxLockWaiters, 0},
		{"transfer chunk timeout", cfg.gateway.transferChunkTimeout, 20 * time.Second},
		{"max requests per client", cfg.gateway.maxRequestsPerClient, 32},
		{"s3 max conns", cfg.s3.MaxConnsPerHost, 512},
		{"s3 conn wait timeout", cfg.s3.ConnWaitTimeout, 3 * time.Second},
		{"tombstones for absent objects", cfg.gateway.tombstonesForAbsent, true},
		{"log format", cfg.log.format, "json"},
		{"otlp endpoint", cfg.tracing.endpoint, "http://otel-collector:4317"},
		{"trace sample ratio", cfg.tracing.sampleRatio, 0.1},
		{"token checks", cfg.tokenChecks.String(), "reports=held:report-writer,logs=plausible,partner/payments=held:billing,*=none"},
		{"partner routes", len(cfg.features.partners), 2},
		{"identities", len(cfg.features.auth.Identities), 2},
		{"api keys", len(cfg.features.auth.APIKeys), 2},
		{"client cert", cfg.features.auth.ClientCerts, []gateway.ClientCert{{CommonName: "ci-runner", Identity: "ci"}}},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	pay := cfg.features.partners[0]
	wantPay := gateway.PartnerRoute{
		Name:                   "payments",
		Methods:                []string{"POST"},
		Resource:               "accounts/{account}",
		Timeout:                30 * time.Second,
		MaxWait:                5 * time.Second,
		RequireIdempotencyKey:  true,
		IdempotencyTTL:         24 * time.Hour,
		MaxBodyBytes:           1 << 20,
		MaxStoredResponseBytes: 1 << 20,
		StripHeaders:           []string{"X-Debug"},
		AddHeaders:             http.Header{"Authorization": {"Bearer pay-123"}},
	}
	gotPay := pay
	gotPay.Upstream = nil
	if !equal(gotPay, wantPay) || pay.Upstream.String() != "https://api.payments.example/v1" {
		t.Errorf("partners[0] = %+v (upstream %v); want %+v (upstream https://api.payments.example/v1)", gotPay, pay.Upstream, wantPay)
	}
	if mailer := cfg.features.partners[1]; mailer.Resource != "header" || mailer.ResourcePath != "lists/{resource}" || mailer.RequireIdempotencyKey || mailer.Timeout != 0 {
		t.Errorf("partners[1] = %+v; want resource header bound to lists/{resource}, idempotency key optional, timeout left to the gateway's default", mailer)
	}
	ci := cfg.features.auth.Identities[0]
	wantGrants := []gateway.Grant{
		{Prefix: "s3/reports/", Operations: []gateway.Operation{gateway.OpRead, gateway.OpWrite, gateway.OpDelete}},
		{Prefix: "report-writer", Operations: []gateway.Operation{gateway.OpLock}},
	}
	if ci.Name != "ci" || !equal(ci.Grants, wantGrants) {
		t.Errorf("identities[0] = %+v; want ci with %+v", ci, wantGrants)
	}
	if k := cfg.features.auth.APIKeys[0]; hashAPIKey("ci-runner-key") != "sha256:"+hexOf(k.SHA256[:]) || k.Identity != "ci" {
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
	cfg, err := parseServe([]string{"--listen", "127.0.0.1:9300"}, envMap(env), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen (flag over env over file)", cfg.listen, "127.0.0.1:9300"},
		{"idle timeout (env over file)", cfg.http.idleTimeout, 5 * time.Minute},
		{"etcd password (env over file)", cfg.etcd.password, "from-env"},
		{"read timeout (file over default)", cfg.http.readTimeout, 3 * time.Minute},
		{"etcd endpoints (file)", strings.Join(cfg.etcd.endpoints, ","), "http://file:2379"},
		{"log level (file)", cfg.log.level.String(), "DEBUG"},
		{"write timeout (default)", cfg.http.writeTimeout, 10 * time.Minute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	// Without FENCEGATE_ETCD_PASSWORD, password_env's variable is used.
	delete(env, "FENCEGATE_ETCD_PASSWORD")
	cfg, err = parseServe(nil, envMap(env), &bytes.Buffer{})
	if err != nil || cfg.etcd.password != "from-file" {
		t.Errorf("parseServe = %q, %v; want the password from FILE_PASSWORD", cfg.etcd.password, err)
	}
	// --config on the command line wins over FENCEGATE_CONFIG.
	other := writeConfig(t, "etcd:\n  endpoints: [http://other:2379]\n")
	cfg, err = parseServe([]string{"--config", other}, envMap(env), &bytes.Buffer{})
	if err != nil || strings.Join(cfg.etcd.endpoints, ",") != "http://other:2379" {
		t.Errorf("parseServe --config other = %v, %v; want the other file's endpoints", cfg.etcd.endpoints, err)
	}
}

// TestConfigMergedChecks: checks that span the file and the flags still
// run after the merge, and name where each value came from.
func TestConfigMergedChecks(t *testing.T) {
	certs := filepath.Join("testdata", "config", "good", "certs")
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
			_, err := parseServe(tt.args, envMap(nil), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseServe(%q) = %v; want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
	// With the client CA given by flags, the same file is accepted.
	args := []string{"--config", clientCerts, "--tls-cert", abs("server.crt"), "--tls-key", abs("server.key"), "--tls-client-ca", abs("ca.crt")}
	if _, err := parseServe(args, envMap(nil), &bytes.Buffer{}); err != nil {
		t.Errorf("parseServe(%q) = %v; want nil", args, err)
	}
}

// TestDevConfig: dev takes the file's gateway settings, partner routes
// and auth, and reports the etcd and S3 settings as unused.
func TestDevConfig(t *testing.T) {
	path := filepath.Join("testdata", "config", "good", "full.yaml")
	cfg, err := parseDev([]string{"--config", path, "--listen", "127.0.0.1:0"}, envMap(goodEnv), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseDev --config %s: %v", path, err)
	}
	if cfg.listen != "127.0.0.1:0" || cfg.http.drainDelay != 5*time.Second || cfg.log.format != "json" || cfg.http.tls == nil {
		t.Errorf("dev config = %+v; want the flag's listen and the file's drain delay, log format and TLS", cfg)
	}
	if len(cfg.features.partners) != 2 || cfg.features.auth == nil || cfg.tokenChecks.String() == "" {
		t.Errorf("dev features = %+v, token checks %q; want the file's 2 routes, auth and token checks", cfg.features, cfg.tokenChecks.String())
	}
	for _, want := range []string{"etcd.endpoints", "etcd.password_env", "s3.endpoint", "s3.region"} {
		if !slices.Contains(cfg.ignored, want) {
			t.Errorf("dev ignored %q; want %s among them", cfg.ignored, want)
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

// TestCheckUpstream covers the partner upstream URL rules.
func TestCheckUpstream(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"https://api.example.com/v1", ""},
		{"http://10.0.0.1:8080", ""},
		{"HTTPS://api.example.com", ""},
		{"ftp://api.example.com", `scheme "ftp" not allowed`},
		{"api.example.com", `scheme "" not allowed`},
		{"https://", "has no host"},
		{"https:api.example.com", "has no host"},
		{"https://:443", "has no host"},
		{"https://u:p@api.example.com", "has user info"},
		{"https://api.example.com/?key=1", "has a query"},
		{"https://api.example.com/?", "has a query"},
		{"https://api.example.com/#frag", "has a fragment"},
		{"https://api.example.com/#", "has a fragment"},
		{"https://api example.com", "is not a URL"},
	}
	for _, tt := range tests {
		_, err := checkUpstream(tt.in)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("checkUpstream(%q) = %v; want error containing %q", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("checkUpstream(%q) = %v: the password is in the message", tt.in, err)
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
		files, _ := filepath.Glob(filepath.Join("testdata", "config", dir, "*.yaml"))
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
	dir := filepath.Join("testdata", "config", "good")
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

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// writeConfig writes data to a config file in a temporary directory.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadmeConfiguration: the README's example config is full.yaml, which
// TestFullConfigDecodes loads, and its table lists every flag of serve
// with its environment variable.
func TestReadmeConfiguration(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(filepath.Join("testdata", "config", "good", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, append(append([]byte("```yaml\n"), full...), "```\n"...)) {
		t.Errorf("the README's Configuration does not show testdata/config/good/full.yaml as its example")
	}
	var help bytes.Buffer
	if err := runEnv(t.Context(), []string{"serve", "-h"}, envMap(nil), &help, &bytes.Buffer{}); err == nil {
		t.Fatal("serve -h did not return flag.ErrHelp")
	}
	flags := regexp.MustCompile(`(?m)^  --([a-z0-9-]+).*\[\$([A-Z0-9_]+)\]$`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 30 {
		t.Fatalf("serve -h lists %d flags; want 30 or more:\n%s", len(flags), help.String())
	}
	for _, m := range flags {
		row := regexp.MustCompile("(?m)^\\| `--" + regexp.QuoteMeta(m[1]) + "[ `].*\\| `" + m[2] + "` \\|")
		if !row.Match(readme) {
			t.Errorf("the README's flag table has no row for --%s with $%s", m[1], m[2])
		}
	}
}

// TestConfigCheckWarnsOfUnboundHeaderRoutes: `config check` passes a file
// whose route takes its resource from X-Fence-Resource without
// resource_path, but warns when a grant covers only part of the route: its
// holder could name a resource it may write in the header and act on
// another in the path.
func TestConfigCheckWarnsOfUnboundHeaderRoutes(t *testing.T) {
	const warning = `partner route "mailer" takes its resource from X-Fence-Resource without resource_path, and identity "sender" may write only "partner/mailer/a1*"`
	for _, tc := range []struct {
		name        string
		resource    string // the route's resource and resource_path lines
		grant       string // sender's grant; "" leaves auth out
		wantWarning string // in the warning line; "" means none
	}{
		{"header, unbound, grant of one resource", "resource: header", `{prefix: partner/mailer/a1, operations: [write]}`, warning},
		{"header, unbound, admin grant of one resource", "resource: header", `{prefix: partner/mailer/a1, operations: [admin]}`, `identity "sender" may write only "partner/mailer/a1*"`},
		{"header, bound", "resource: header\n    resource_path: accounts/{resource}", `{prefix: partner/mailer/a1, operations: [write]}`, ""},
		{"header, unbound, grant of the whole route", "resource: header", `{prefix: partner/mailer/, operations: [write]}`, ""},
		{"header, unbound, grant of every route", "resource: header", `{prefix: "", operations: [admin]}`, ""},
		{"header, unbound, read grant of one resource", "resource: header", `{prefix: partner/mailer/a1, operations: [read]}`, ""},
		{"header, unbound, grant of another route's resource", "resource: header", `{prefix: partner/mailer-eu/a1, operations: [write]}`, ""},
		{"header, unbound, no auth", "resource: header", "", ""},
		{"template, grant of one resource", "resource: accounts/{account}", `{prefix: partner/mailer/accounts/a1, operations: [write]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fmt.Sprintf("partners:\n  - name: mailer\n    upstream: http://mailer.internal:8025\n    methods: [POST]\n    %s\n", tc.resource)
			if tc.grant != "" {
				file += fmt.Sprintf("auth:\n  identities:\n    - name: sender\n      grants: [%s]\n      api_keys: [\"sha256:%064x\"]\n", tc.grant, 1)
			}
			path := writeConfig(t, file)
			var stdout bytes.Buffer
			if err := runEnv(t.Context(), []string{"config", "check", path}, envMap(nil), &stdout, &bytes.Buffer{}); err != nil {
				t.Fatalf("config check: %v; want ok (with or without a warning)", err)
			}
			out := stdout.String()
			if !strings.HasPrefix(out, path+": ok\n") {
				t.Errorf("config check printed %q; want %q first", out, path+": ok")
			}
			warned := strings.Contains(out, path+": warning: ")
			switch {
			case tc.wantWarning == "" && warned:
				t.Errorf("config check printed %q; want no warning", out)
			case tc.wantWarning != "" && (!warned || !strings.Contains(out, tc.wantWarning)):
				t.Errorf("config check printed %q; want a %q line with %q", out, path+": warning: ", tc.wantWarning)
			}
		})
	}
}
