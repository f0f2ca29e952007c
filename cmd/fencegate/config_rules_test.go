package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// route is a valid partner route, lines 2 to 5 of a file that starts with
// "partners:"; a case adds its line 6.
const route = `partners:
  - name: pay
    upstream: https://api.example.com/v1
    methods: [POST]
    resource: accounts/{account}
`

// identity is a valid auth section, lines 1 to 6; a case adds line 7.
const identity = `auth:
  identities:
    - name: ci
      grants:
        - {prefix: s3/reports/, operations: [read]}
      api_keys: ["sha256:0000000000000000000000000000000000000000000000000000000000000001"]
`

// TestConfigCheckNamesFieldAndLine feeds `fencegate config check` one bad
// value per rule of the config (each partner, auth, limit and TLS rule)
// and checks that the message names the file's line and the field. Where
// the setting is a flag too, the same value given by flag names the flag,
// and given by its environment variable names the variable.
func TestConfigCheckNamesFieldAndLine(t *testing.T) {
	certs, err := filepath.Abs(filepath.Join("testdata", "config", "good", "certs"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, ca := filepath.Join(certs, "server.crt"), filepath.Join(certs, "server.key"), filepath.Join(certs, "ca.crt")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file string // the config file, or what follows route or identity
		want string // after "fencegate.yaml:"
		// flag and env give the same value as the file; "" for a
		// setting that only the file has.
		flag    []string
		env     map[string]string
		wantArg string // in the error of the flag, and of the variable after "VARIABLE: "
		wantEnv string // the variable that the error of env names
	}{
		// Partner routes: partners.PartnerRoute.Validate, ValidatePartnerRoutes and ParseUpstream.
		{name: "partner name", file: strings.Replace(route, "name: pay", "name: Pay_Ment", 1), want: `2: partners[0].name: "Pay_Ment": want lower-case letters`},
		{name: "partner upstream scheme", file: strings.Replace(route, "https://api.example.com/v1", "ftp://api.example.com", 1), want: `3: partners[0].upstream: scheme "ftp" not allowed`},
		{name: "partner upstream user info", file: strings.Replace(route, "https://api", "https://u:secret@api", 1), want: `3: partners[0].upstream: "https://u:xxxxx@api.example.com/v1" has user info`},
		{name: "partner upstream query", file: strings.Replace(route, "/v1", "/v1?k=1", 1), want: `3: partners[0].upstream: "https://api.example.com/v1?k=1" has a query`},
		{name: "partner upstream fragment", file: strings.Replace(route, "/v1", "/v1#", 1), want: `3: partners[0].upstream: "https://api.example.com/v1" has a fragment`},
		{name: "partner upstream base path", file: strings.Replace(route, "/v1", "/v1/../admin", 1), want: `3: partners[0].upstream: "https://api.example.com/v1/../admin": base path`},
		{name: "partner method", file: strings.Replace(route, "[POST]", "[POST, FETCH]", 1), want: `4: partners[0].methods[1]: unknown method "FETCH"`},
		{name: "partner method twice", file: strings.Replace(route, "[POST]", "[POST, POST]", 1), want: `4: partners[0].methods[1]: POST is listed twice`},
		{name: "partner resource", file: strings.Replace(route, "accounts/{account}", "accounts", 1), want: `5: partners[0].resource: template "accounts": no {variable}`},
		{name: "partner resource_path with a template", file: route + "    resource_path: accounts/{resource}\n", want: `6: partners[0].resource_path: only with resource "header"`},
		{name: "partner resource_path variable", file: strings.Replace(route, "accounts/{account}", "header", 1) + "    resource_path: lists/{list}\n", want: `6: partners[0].resource_path: "lists/{list}": {list}: the only variable is {resource}`},
		{name: "partner max body", file: route + "    max_body_bytes: 2GiB\n", want: "6: partners[0].max_body_bytes: 2GiB is over 1GiB"},
		{name: "partner stored response", file: route + "    max_stored_response_bytes: 2MiB\n", want: "6: partners[0].max_stored_response_bytes: 2MiB is over 1MiB"},
		{name: "partner strip header", file: route + `    strip_headers: ["X Debug"]` + "\n", want: `6: partners[0].strip_headers[0]: "X Debug" is not a header name`},
		{name: "partner forward header", file: route + "    forward_headers: [Cookie]\n", want: "6: partners[0].forward_headers[0]: Cookie is never forwarded"},
		{name: "partner forward header stripped too", file: route + "    strip_headers: [X-Real-IP]\n    forward_headers: [X-Real-IP]\n", want: "7: partners[0].forward_headers[0]: X-Real-Ip is in strip_headers too"},
		{name: "partner add header set by the gateway", file: route + "    add_headers: {idempotency-key: k}\n", want: "6: partners[0].add_headers.idempotency-key: Idempotency-Key is set by the gateway"},
		{name: "partner add header name", file: route + `    add_headers: {"X Key": k}` + "\n", want: `6: partners[0].add_headers."X Key": "X Key" is not a header name`},
		{name: "partner add header value", file: route + `    add_headers: {X-Key: " k"}` + "\n", want: "6: partners[0].add_headers.X-Key: not a valid header value"},
		{name: "partner idempotency key", file: route + "    idempotency_key: always\n", want: `6: partners[0].idempotency_key: "always": want required or optional`},
		{name: "partner timeout", file: route + "    timeout: 0s\n", want: "6: partners[0].timeout: 0s: must be above zero"},
		{name: "partner name twice", file: route + strings.TrimPrefix(route, "partners:\n"), want: `6: partners[1].name: route "pay" is defined twice (first at line 2)`},

		// Auth: edge.Auth.Validate.
		{name: "identity name", file: strings.Replace(identity, "name: ci", "name: c i", 1), want: `3: auth.identities[0].name: "c i": want letters, digits`},
		{name: "identity twice", file: identity + strings.Replace(strings.TrimPrefix(identity, "auth:\n  identities:\n"), "001", "002", 1), want: `7: auth.identities[1].name: identity "ci" is defined twice (first at line 3)`},
		{name: "grant operation", file: strings.Replace(identity, "[read]", "[read, upload]", 1), want: `5: auth.identities[0].grants[0].operations[1]: unknown operation "upload"`},
		{name: "grant prefix", file: strings.Replace(identity, "prefix: s3/reports/", `prefix: "s3/\u0001"`, 1), want: "5: auth.identities[0].grants[0].prefix: control characters in a prefix"},
		{name: "api key not a hash", file: strings.Replace(identity, `"sha256:0000000000000000000000000000000000000000000000000000000000000001"`, "plain-key", 1), want: "6: auth.identities[0].api_keys[0]: not a key hash"},
		{name: "api key twice", file: identity + strings.TrimPrefix(strings.Replace(identity, "name: ci", "name: cd", 1), "auth:\n  identities:\n"),
			want: "10: auth.identities[1].api_keys[0]: the same key is configured twice (first at line 6)"},
		{name: "client certificate twice", file: identity + "      client_certs: [runner, runner]\n", want: `7: auth.identities[0].client_certs[1]: common name "runner" is mapped twice (first at line 7)`},
		{name: "client certificate name", file: identity + `      client_certs: ["run\u0001ner"]` + "\n", want: "7: auth.identities[0].client_certs[0]: control characters in a common name"},
		{name: "identity without credentials", file: strings.Replace(identity, `      api_keys: ["sha256:0000000000000000000000000000000000000000000000000000000000000001"]`+"\n", "", 1), want: "3: auth.identities[0]: no api_keys, client_certs or s3_keys"},

		// Limits: the flags' bounds and gateway.Config.Validate.
		{name: "buffer bytes", file: "limits:\n  buffer_bytes: 0\n", want: "2: limits.buffer_bytes: 0: must be at least 1",
			flag: []string{"--buffer-bytes", "0"}, env: map[string]string{"FENCEGATE_BUFFER_BYTES": "0"}, wantArg: "--buffer-bytes 0: must be at least 1", wantEnv: "FENCEGATE_BUFFER_BYTES"},
		{name: "buffer budget bytes", file: "limits:\n  buffer_budget_bytes: 0\n", want: "2: limits.buffer_budget_bytes: 0: must be at least 1",
			flag: []string{"--buffer-budget-bytes", "0"}, env: map[string]string{"FENCEGATE_BUFFER_BUDGET_BYTES": "0"}, wantArg: "--buffer-budget-bytes 0: must be at least 1", wantEnv: "FENCEGATE_BUFFER_BUDGET_BYTES"},
		{name: "max body bytes", file: "limits:\n  max_body_bytes: 0\n", want: "2: limits.max_body_bytes: 0: must be at least 1",
			flag: []string{"--max-body-bytes", "0"}, env: map[string]string{"FENCEGATE_MAX_BODY_BYTES": "0"}, wantArg: "--max-body-bytes 0: must be at least 1", wantEnv: "FENCEGATE_MAX_BODY_BYTES"},
		{name: "max header bytes", file: "limits:\n  max_header_bytes: 100\n", want: "2: limits.max_header_bytes: 100: must be from 1KiB to 16MiB",
			flag: []string{"--max-header-bytes", "100"}, env: map[string]string{"FENCEGATE_MAX_HEADER_BYTES": "100"}, wantArg: "--max-header-bytes 100: must be from 1KiB to 16MiB", wantEnv: "FENCEGATE_MAX_HEADER_BYTES"},
		{name: "buffer over max body", file: "limits:\n  max_body_bytes: 1MiB\n  buffer_bytes: 2MiB\n", want: "3: limits.buffer_bytes: 2MiB must not exceed limits.max_body_bytes 1MiB",
			flag: []string{"--max-body-bytes", "1MiB", "--buffer-bytes", "2MiB"}, env: map[string]string{"FENCEGATE_MAX_BODY_BYTES": "1MiB", "FENCEGATE_BUFFER_BYTES": "2MiB"}, wantArg: "--buffer-bytes 2MiB must not exceed --max-body-bytes 1MiB", wantEnv: "FENCEGATE_BUFFER_BYTES"},
		{name: "budget under buffer", file: "limits:\n  buffer_bytes: 2MiB\n  buffer_budget_bytes: 1MiB\n", want: "3: limits.buffer_budget_bytes: 1MiB must be at least limits.buffer_bytes 2MiB",
			flag: []string{"--buffer-bytes", "2MiB", "--buffer-budget-bytes", "1MiB"}, env: map[string]string{"FENCEGATE_BUFFER_BYTES": "2MiB", "FENCEGATE_BUFFER_BUDGET_BYTES": "1MiB"}, wantArg: "--buffer-budget-bytes 1MiB must be at least --buffer-bytes 2MiB", wantEnv: "FENCEGATE_BUFFER_BUDGET_BYTES"},
		{name: "requests per client", file: "limits:\n  max_requests_per_client: -1\n", want: `2: limits.max_requests_per_client: "-1": want a whole number, 0 or more`,
			flag: []string{"--max-requests-per-client", "-1"}, env: map[string]string{"FENCEGATE_MAX_REQUESTS_PER_CLIENT": "-1"}, wantArg: "--max-requests-per-client -1: must not be negative", wantEnv: "FENCEGATE_MAX_REQUESTS_PER_CLIENT"},
		{name: "lock waiters", file: "limits:\n  max_lock_waiters: -1\n", want: `2: limits.max_lock_waiters: "-1": want a whole number, 0 or more`,
			flag: []string{"--max-lock-waiters", "-1"}, env: map[string]string{"FENCEGATE_MAX_LOCK_WAITERS": "-1"}, wantArg: "--max-lock-waiters -1: must not be negative", wantEnv: "FENCEGATE_MAX_LOCK_WAITERS"},
		{name: "transfer chunk timeout", file: "limits:\n  transfer_chunk_timeout: 0s\n", want: "2: limits.transfer_chunk_timeout: 0s: must be above zero",
			flag: []string{"--transfer-chunk-timeout", "0s"}, env: map[string]string{"FENCEGATE_TRANSFER_CHUNK_TIMEOUT": "0s"}, wantArg: "--transfer-chunk-timeout 0s: must be above zero", wantEnv: "FENCEGATE_TRANSFER_CHUNK_TIMEOUT"},

		// Partner answers and budgets.
		{name: "partner answers without bucket", file: "partner_answers: {prefix: a/}\n", want: "1: partner_answers.bucket: missing"},
		{name: "partner answers prefix", file: "partner_answers: {bucket: answers, prefix: a}\n", want: `1: partner_answers: prefix "a": want it to end with '/'`},
		{name: "partner identity budget records", file: "partner_identity_budget: {records: -1}\n", want: `1: partner_identity_budget.records: "-1": want a whole number, 0 or more`},
		{name: "partner route budget bytes", file: route + "    budget: {bytes: lots}\n", want: `6: partners[0].budget.bytes: "lots"`},

		// Buckets: the store of each bucket.
		{name: "bucket mapped twice", file: "buckets:\n  - {name: ledgers, store: gcs}\n  - {name: ledgers, store: s3}\n", want: `3: buckets[1].name: bucket "ledgers" is mapped twice (first at line 2)`},
		{name: "bucket unknown store", file: "buckets:\n  - {name: ledgers, store: azure}\n", want: `2: buckets[0].store: "azure": unknown store (want s3 or gcs)`},
		{name: "bucket without store", file: "buckets:\n  - {name: ledgers}\n", want: "2: buckets[0].store: missing"},
		{name: "bucket name", file: "buckets:\n  - {name: Ledgers, store: gcs}\n", want: `2: buckets[0].name: "Ledgers": bucket name may hold only a-z`},
		{name: "bucket endpoint on s3", file: "buckets:\n  - name: ledgers\n    store: s3\n    endpoint: http://127.0.0.1:4443/storage/v1/\n", want: "4: buckets[0].endpoint: only with store gcs (an s3 bucket takes the s3 section's settings)"},
		{name: "bucket gcs endpoint", file: "buckets:\n  - name: ledgers\n    store: gcs\n    endpoint: http://127.0.0.1:4443\n", want: `4: buckets[0].endpoint: "http://127.0.0.1:4443": want the JSON API's base URL`},
		{name: "partner answers in gcs", file: "buckets:\n  - {name: answers, store: gcs}\npartner_answers: {bucket: answers}\n", want: `3: partner_answers.bucket: bucket "answers" is in gcs (buckets[0]); answers are kept in S3`},

		// Marks: the mark evictor's settings (retention.Config).
		// (Every duration is a valid --mark-retention: negative keeps marks for ever.)
		{name: "mark retention", file: "marks:\n  retention: soon\n", want: `2: marks.retention: "soon" is not a duration`},
		{name: "tombstone retention", file: "marks:\n  tombstone_retention: -1h\n", want: "2: marks.tombstone_retention: -1h0m0s: must not be negative",
			flag: []string{"--tombstone-retention", "-1h"}, env: map[string]string{"FENCEGATE_TOMBSTONE_RETENTION": "-1h"}, wantArg: "--tombstone-retention -1h0m0s: must not be negative", wantEnv: "FENCEGATE_TOMBSTONE_RETENTION"},
		{name: "mark eviction interval", file: "marks:\n  eviction_interval: 0s\n", want: "2: marks.eviction_interval: 0s: must be above zero",
			flag: []string{"--mark-eviction-interval", "0s"}, env: map[string]string{"FENCEGATE_MARK_EVICTION_INTERVAL": "0s"}, wantArg: "--mark-eviction-interval 0s: must be above zero", wantEnv: "FENCEGATE_MARK_EVICTION_INTERVAL"},

		// TLS: tlsfiles.Server and tlsfiles.Client, and the files going together.
		{name: "listener cert without key", file: "http:\n  tls:\n    cert_file: " + cert + "\n", want: "3: http.tls.cert_file: needs http.tls.key_file",
			flag: []string{"--tls-cert", cert}, env: map[string]string{"FENCEGATE_TLS_CERT": cert}, wantArg: "--tls-cert and --tls-key go together", wantEnv: "FENCEGATE_TLS_CERT"},
		{name: "listener client CA without cert", file: "http:\n  tls:\n    client_ca_file: " + ca + "\n", want: "3: http.tls.client_ca_file: needs http.tls.cert_file and key_file",
			flag: []string{"--tls-client-ca", ca}, env: map[string]string{"FENCEGATE_TLS_CLIENT_CA": ca}, wantArg: "--tls-client-ca needs --tls-cert and --tls-key", wantEnv: "FENCEGATE_TLS_CLIENT_CA"},
		{name: "listener cert not PEM", file: "http:\n  tls:\n    cert_file: " + notPEM + "\n    key_file: " + key + "\n", want: "3: http.tls: server certificate:",
			flag: []string{"--tls-cert", notPEM, "--tls-key", key}, env: map[string]string{"FENCEGATE_TLS_CERT": notPEM, "FENCEGATE_TLS_KEY": key}, wantArg: "--tls-cert, --tls-key, --tls-client-ca: server certificate:", wantEnv: "FENCEGATE_TLS_CERT"},
		{name: "listener cert missing", file: "http:\n  tls:\n    cert_file: /nonexistent/server.crt\n    key_file: " + key + "\n", want: "3: http.tls.cert_file: stat /nonexistent/server.crt",
			flag: []string{"--tls-cert", "/nonexistent/server.crt", "--tls-key", key}, env: map[string]string{"FENCEGATE_TLS_CERT": "/nonexistent/server.crt", "FENCEGATE_TLS_KEY": key}, wantArg: "--tls-cert, --tls-key, --tls-client-ca: server certificate:", wantEnv: "FENCEGATE_TLS_CERT"},
		{name: "listener client CA not PEM", file: "http:\n  tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n    client_ca_file: " + notPEM + "\n", want: "3: http.tls: client CAs: " + notPEM + ": no PEM certificates",
			flag: []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", notPEM}, env: map[string]string{"FENCEGATE_TLS_CERT": cert, "FENCEGATE_TLS_KEY": key, "FENCEGATE_TLS_CLIENT_CA": notPEM}, wantArg: "--tls-cert, --tls-key, --tls-client-ca: client CAs:", wantEnv: "FENCEGATE_TLS_CERT"},
		{name: "etcd CA not PEM", file: "etcd:\n  endpoints: [https://127.0.0.1:2379]\n  tls:\n    ca_file: " + notPEM + "\n", want: "4: etcd.tls.ca_file: CA file: " + notPEM + ": no PEM certificates",
			flag: []string{"--etcd-ca", notPEM}, env: map[string]string{"FENCEGATE_ETCD_CA": notPEM}, wantArg: "--etcd-ca: CA file:", wantEnv: "FENCEGATE_ETCD_CA"},
		{name: "etcd cert without key", file: "etcd:\n  endpoints: [https://127.0.0.1:2379]\n  tls:\n    cert_file: " + cert + "\n", want: "4: etcd.tls.cert_file: needs etcd.tls.key_file",
			flag: []string{"--etcd-cert", cert}, env: map[string]string{"FENCEGATE_ETCD_CERT": cert}, wantArg: "--etcd-cert and --etcd-key go together", wantEnv: "FENCEGATE_ETCD_CERT"},
		{name: "etcd http with TLS", file: "etcd:\n  endpoints: [http://127.0.0.1:2379]\n  tls:\n    ca_file: " + ca + "\n", want: `2: etcd.endpoints[0]: "http://127.0.0.1:2379" is http:// but etcd.tls is set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			want := path + ":" + tt.want
			err := runEnv(t.Context(), []string{"config", "check", path}, envMap(nil), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, new(*usageError)) {
				t.Errorf("config check of\n%s= %v; want a usage error containing %q", tt.file, err, want)
			}
			if tt.flag == nil {
				return
			}
			serve := []string{"serve", "--etcd-endpoints", "https://127.0.0.1:2379"}
			err = runEnv(t.Context(), append(serve, tt.flag...), envMap(nil), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantArg) {
				t.Errorf("serve %q = %v; want an error containing %q", tt.flag, err, tt.wantArg)
			}
			err = runEnv(t.Context(), serve, envMap(tt.env), &bytes.Buffer{}, &bytes.Buffer{})
			if want := tt.wantEnv + ": " + tt.wantArg; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("serve with %v = %v; want an error containing %q", tt.env, err, want)
			}
		})
	}
}
