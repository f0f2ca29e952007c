package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"fencegate/internal/config"
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
	{"events-subscribers.yaml", "events-subscribers.yaml:3: events.max_subscribers: 0: must be from 1 to 4096"},
	{"identity-duplicate.yaml", `identity-duplicate.yaml:6: auth.identities[1].name: identity "ci" is defined twice (first at line 3)`},
	{"identity-no-credentials.yaml", "identity-no-credentials.yaml:3: auth.identities[0]: no api_keys, client_certs or s3_keys"},
	{"listen.yaml", `listen.yaml:2: http.listen: "8080": want host:port`},
	{"log-level.yaml", `log-level.yaml:2: log.level: "loud": want debug, info, warn or error`},
	{"multipart-part-size.yaml", "multipart-part-size.yaml:4: multipart.part_size: 4MiB: must be 5MiB to 5GiB, S3's limits on a part"},
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
	{"partner-unbound-path.yaml", `partner-unbound-path.yaml:5: partners[0].resource: "header" without resource_path, and identity "payer" may write only part of the route (grant "partner/pay/acct-a1")`},
	{"partner-upstream-ftp.yaml", `partner-upstream-ftp.yaml:7: partners[1].upstream: scheme "ftp" not allowed, want http or https`},
	{"partner-upstream-userinfo.yaml", "partner-upstream-userinfo.yaml:3: partners[0].upstream: \"https://user:xxxxx@api.payments.example/v1\" has user info"},
	{"password-twice.yaml", "password-twice.yaml:5: etcd.password_env: set etcd.password or etcd.password_env, not both"},
	{"repeated-key.yaml", "repeated-key.yaml:4: log.level: repeated (first at line 2)"},
	{"s3-key-duplicate.yaml", `s3-key-duplicate.yaml:12: auth.identities[1].s3_keys[0].access_key_id: access key id "AKIAETL0000000000001" is configured twice (first at line 7)`},
	{"s3-key-two-secrets.yaml", "s3-key-two-secrets.yaml:9: auth.identities[0].s3_keys[0].secret_env: set secret_file or secret_env, not both"},
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
			_, err := config.LoadFile(path, env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("config.LoadFile(%s) = %v; want an error containing %q", path, err, tt.want)
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

// goodEnv is the environment the good configs refer to.
var goodEnv = map[string]string{
	"ETCD_PASSWORD":    "etcd-secret",
	"S3_SECRET_KEY":    "s3-secret",
	"PAYMENTS_API_KEY": "pay-123",
	"ECHO_API_KEY":     "echo-456",
	"CI_S3_SECRET":     "ci-s3-secret-wJalrXUtnFEMI",
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
			if _, err := config.LoadFile(path, envMap(goodEnv)); err != nil {
				t.Fatalf("config.LoadFile(%s): %v", path, err)
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

// writeConfig writes data to a config file in a temporary directory.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fencegate.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readmePath is the file whose Configuration section shows full.yaml and
// lists every flag.
var readmePath = filepath.Join("..", "..", "docs", "configuration.md")

// TestReadmeConfiguration: the README's example config is full.yaml, which
// TestFullConfigDecodes loads, and its table lists every flag of serve
// with its environment variable.
func TestReadmeConfiguration(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
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

// TestUnboundHeaderRoutes: a route that takes its resource from
// X-Fence-Resource without resource_path, while an identity may write
// only part of the route, is refused by the loader, by `config check` and
// by serve's and dev's start-up, at the route's resource line: that
// identity could name a resource it may write in the header and act on
// another in the path. unbound_path: true says the partner's path names
// no resource, and loads. Grants of the whole route (or none) leave
// nothing to get around.
func TestUnboundHeaderRoutes(t *testing.T) {
	const refusal = `:5: partners[0].resource: "header" without resource_path, and identity "sender" may write only part of the route (grant "partner/mailer/a1")`
	for _, tc := range []struct {
		name     string
		resource string   // the route's resource lines
		grants   []string // sender's grants; nil leaves auth out
		want     string   // in the error; "" means it loads
	}{
		{"header, unbound, grant of one resource", "resource: header", []string{`{prefix: partner/mailer/a1, operations: [write]}`}, refusal},
		{"header, unbound, admin grant of one resource", "resource: header", []string{`{prefix: partner/mailer/a1, operations: [admin]}`}, refusal},
		{"header, unbound, grant of one resource after a read grant of the route", "resource: header",
			[]string{`{prefix: partner/mailer/, operations: [read]}`, `{prefix: partner/mailer/a1, operations: [write]}`}, refusal},
		{"header, unbound_path: true, grant of one resource", "resource: header\n    unbound_path: true", []string{`{prefix: partner/mailer/a1, operations: [write]}`}, ""},
		{"header, bound, grant of one resource", "resource: header\n    resource_path: accounts/{resource}", []string{`{prefix: partner/mailer/a1, operations: [write]}`}, ""},
		{"header, unbound, grant of the whole route", "resource: header", []string{`{prefix: partner/mailer/, operations: [write]}`}, ""},
		{"header, unbound, grant of the route's name without its slash", "resource: header", []string{`{prefix: partner/mailer, operations: [write]}`}, ""},
		{"header, unbound, grant of the whole route and of one resource", "resource: header",
			[]string{`{prefix: partner/mailer/a1, operations: [write]}`, `{prefix: partner/, operations: [write]}`}, ""},
		{"header, unbound, grant of every route", "resource: header", []string{`{prefix: "", operations: [admin]}`}, ""},
		{"header, unbound, read grant of one resource", "resource: header", []string{`{prefix: partner/mailer/a1, operations: [read]}`}, ""},
		{"header, unbound, grant of another route's resource", "resource: header", []string{`{prefix: partner/mailer-eu/a1, operations: [write]}`}, ""},
		{"header, unbound, no auth", "resource: header", nil, ""},
		{"template, grant of one resource", "resource: accounts/{account}", []string{`{prefix: partner/mailer/accounts/a1, operations: [write]}`}, ""},
		{"unbound_path with resource_path", "resource: header\n    resource_path: accounts/{resource}\n    unbound_path: true", nil,
			":7: partners[0].unbound_path: set resource_path or unbound_path, not both"},
		{"unbound_path with a template", "resource: accounts/{account}\n    unbound_path: true", nil,
			`:6: partners[0].unbound_path: only with resource "header"`},
		{"unbound_path not a bool", "resource: header\n    unbound_path: yes-please", nil,
			`:6: partners[0].unbound_path: "yes-please": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fmt.Sprintf("partners:\n  - name: mailer\n    upstream: http://mailer.internal:8025\n    methods: [POST]\n    %s\npartner_answers: {bucket: answers}\n", tc.resource)
			if tc.grants != nil {
				file += fmt.Sprintf("auth:\n  identities:\n    - name: sender\n      grants: [%s]\n      api_keys: [\"sha256:%064x\"]\n", strings.Join(tc.grants, ", "), 1)
			}
			path := writeConfig(t, file)
			var stdout bytes.Buffer
			err := runEnv(t.Context(), []string{"config", "check", path}, envMap(nil), &stdout, &bytes.Buffer{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("config check = %v; want ok", err)
			case tc.want == "":
				if out := stdout.String(); !strings.HasPrefix(out, path+": ok\n") || strings.Contains(out, "warning: partner route") {
					t.Errorf("config check printed %q; want %q first, and no warning of the route", out, path+": ok")
				}
			case err == nil || !strings.Contains(err.Error(), path+tc.want):
				t.Errorf("config check = %v; want an error containing %q", err, path+tc.want)
			case !errors.As(err, new(*usageError)):
				t.Errorf("config check = %T; want a *usageError (exit 2)", err)
			}
		})
	}
}

// TestConfigCheckWarnsOfPartnersWithoutAnswerStore: partner routes without
// partner_answers are valid, but answers' bodies over what etcd keeps are
// then not kept for replay: config check says so, and not once the file
// names an answer store.
func TestConfigCheckWarnsOfPartnersWithoutAnswerStore(t *testing.T) {
	const route = "partners:\n  - name: mailer\n    upstream: http://mailer.internal:8025\n    methods: [POST]\n    resource: lists/{list}\n"
	for _, tc := range []struct {
		name, file string
		warn       bool
	}{
		{"without partner_answers", route, true},
		{"with partner_answers", route + "partner_answers: {bucket: answers, prefix: replay/}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.file)
			var stdout bytes.Buffer
			if err := runEnv(t.Context(), []string{"config", "check", path}, envMap(nil), &stdout, &bytes.Buffer{}); err != nil {
				t.Fatalf("config check: %v; want ok", err)
			}
			if warned := strings.Contains(stdout.String(), "without partner_answers"); warned != tc.warn {
				t.Errorf("config check printed %q; want a warning about partner_answers: %v", stdout.String(), tc.warn)
			}
		})
	}
}

// TestConfigCheckWarnsOfS3GrantsOnGCSBuckets: a grant of s3/BUCKET/ is
// valid, but covers no object once BUCKET is in GCS (its objects are
// gcs/BUCKET/...): config check says so, and not for a grant of gcs/BUCKET/.
func TestConfigCheckWarnsOfS3GrantsOnGCSBuckets(t *testing.T) {
	const file = "buckets:\n  - {name: ledgers, store: gcs}\nauth:\n  identities:\n    - name: ci\n      grants:\n        - {prefix: %s, operations: [write]}\n" +
		`      api_keys: ["sha256:0000000000000000000000000000000000000000000000000000000000000001"]` + "\n"
	for _, tc := range []struct {
		prefix string
		warn   bool
	}{
		{"s3/ledgers/", true},
		{"s3/ledgers/2026/", true},
		{"gcs/ledgers/", false},
		{"s3/ledgers-old/", false},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			path := writeConfig(t, fmt.Sprintf(file, tc.prefix))
			var stdout bytes.Buffer
			if err := runEnv(t.Context(), []string{"config", "check", path}, envMap(nil), &stdout, &bytes.Buffer{}); err != nil {
				t.Fatalf("config check: %v; want ok", err)
			}
			const warning = `identity "ci": grant "`
			if warned := strings.Contains(stdout.String(), warning+tc.prefix+`" covers no object: bucket "ledgers" is in gcs`); warned != tc.warn {
				t.Errorf("config check printed %q; want a warning about the grant: %v", stdout.String(), tc.warn)
			}
		})
	}
}
