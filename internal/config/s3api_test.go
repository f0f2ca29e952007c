package config

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fencegate/s3api/sigv4"
)

// s3KeysAuth is an auth section whose identity etl has the S3 keys keys
// (YAML list items, indented for it).
func s3KeysAuth(keys string) string {
	return `auth:
  identities:
    - name: etl
      grants: [{prefix: s3/etl/, operations: [read, write]}]
      s3_keys:
` + keys
}

// TestS3KeysConfig: an identity's s3_keys take the secret from exactly
// one of secret_file (relative to the file, one trailing newline
// dropped) and secret_env; every problem names the file, the line and the
// field, and no error quotes a secret.
func TestS3KeysConfig(t *testing.T) {
	const fileSecret, envSecret = "file-secret-wJalrXUtnFEMI/K7MDENG", "env-secret-bPxRfiCYEXAMPLEKEY"
	dir := t.TempDir()
	for name, content := range map[string]string{
		"etl.secret":    fileSecret + "\n",
		"crlf.secret":   fileSecret + "\r\n",
		"empty.secret":  "\n",
		"two.secret":    fileSecret + "\n" + envSecret + "\n",
		"spaced.secret": "secret with spaces " + fileSecret,
		"huge.secret":   strings.Repeat(fileSecret, 200),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := envMap(map[string]string{"ETL_S3_SECRET": envSecret, "EMPTY": "", "SPACED": "a b"})
	tests := []struct {
		name    string
		keys    string
		want    map[string]string // access key id to secret, when valid
		wantErr string
	}{
		{"secret_file, relative", "        - {access_key_id: AKIAETL0000000000001, secret_file: etl.secret}\n",
			map[string]string{"AKIAETL0000000000001": fileSecret}, ""},
		{"secret_file with CRLF", "        - {access_key_id: AKIAETL0000000000001, secret_file: crlf.secret}\n",
			map[string]string{"AKIAETL0000000000001": fileSecret}, ""},
		{"secret_file, absolute, and secret_env", "        - {access_key_id: etl-one, secret_file: " + filepath.Join(dir, "etl.secret") + "}\n        - {access_key_id: etl-two, secret_env: ETL_S3_SECRET}\n",
			map[string]string{"etl-one": fileSecret, "etl-two": envSecret}, ""},
		{"both sources", "        - access_key_id: AKIAETL0000000000001\n          secret_file: etl.secret\n          secret_env: ETL_S3_SECRET\n",
			nil, "f.yaml:8: auth.identities[0].s3_keys[0].secret_env: set secret_file or secret_env, not both"},
		{"no source", "        - {access_key_id: AKIAETL0000000000001}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0]: no secret: set secret_file or secret_env"},
		{"no id", "        - {secret_env: ETL_S3_SECRET}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].access_key_id: missing"},
		{"id with a slash", "        - {access_key_id: AKIA/ETL, secret_env: ETL_S3_SECRET}\n",
			nil, `f.yaml:6: auth.identities[0].s3_keys[0].access_key_id: "AKIA/ETL": want 3 to 128 letters`},
		{"id twice", "        - {access_key_id: etl-one, secret_env: ETL_S3_SECRET}\n        - {access_key_id: etl-one, secret_file: etl.secret}\n",
			nil, "f.yaml:7: auth.identities[0].s3_keys[1].access_key_id: access key id \"etl-one\" is configured twice (first at line 6)"},
		{"missing file", "        - {access_key_id: etl-one, secret_file: nope.secret}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_file: open " + filepath.Join(dir, "nope.secret") + ": no such file"},
		{"empty file", "        - {access_key_id: etl-one, secret_file: empty.secret}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_file: " + filepath.Join(dir, "empty.secret") + " is empty"},
		{"two lines in the file", "        - {access_key_id: etl-one, secret_file: two.secret}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_file: the secret access key has spaces, control characters or more than one line"},
		{"spaces in the file", "        - {access_key_id: etl-one, secret_file: spaced.secret}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_file: the secret access key has spaces"},
		{"huge file", "        - {access_key_id: etl-one, secret_file: huge.secret}\n",
			nil, "huge.secret: larger than 4KiB"},
		{"unset variable", "        - {access_key_id: etl-one, secret_env: NOPE}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_env: environment variable NOPE is not set"},
		{"empty variable", "        - {access_key_id: etl-one, secret_env: EMPTY}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_env: environment variable EMPTY is not set"},
		{"variable with a space", "        - {access_key_id: etl-one, secret_env: SPACED}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret_env: the secret access key has spaces"},
		{"not a variable name", "        - {access_key_id: etl-one, secret_env: $ETL}\n",
			nil, `f.yaml:6: auth.identities[0].s3_keys[0].secret_env: "$ETL" is not an environment variable name`},
		{"the secret inline", "        - {access_key_id: etl-one, secret: " + envSecret + "}\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys[0].secret: unknown field (want one of access_key_id, secret_file, secret_env)"},
		{"empty list", "        []\n",
			nil, "f.yaml:6: auth.identities[0].s3_keys: empty; want S3 access keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseConfig("f.yaml", dir, []byte(s3KeysAuth(tt.keys)), env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseConfig = %v; want an error containing %q", err, tt.wantErr)
				}
				for _, secret := range []string{fileSecret, envSecret, "a b"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("parseConfig = %v; quotes a secret", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("parseConfig = %v", err)
			}
			got := map[string]string{}
			for _, k := range f.auth.Identities[0].S3Keys {
				got[k.AccessKeyID] = string(k.SecretAccessKey)
			}
			if !equal(got, tt.want) {
				t.Errorf("s3 keys = %q; want %q", got, tt.want)
			}
			var summary bytes.Buffer
			f.PrintSummary(&summary)
			if !strings.Contains(summary.String(), "S3 access keys") {
				t.Errorf("summary %q does not count the S3 access keys", summary.String())
			}
			for _, secret := range tt.want {
				if strings.Contains(summary.String(), secret) {
					t.Errorf("summary %q quotes a secret", summary.String())
				}
			}
		})
	}
}

// TestS3APISettings: the S3 API is off for serve unless --s3-listen (or
// s3_api.listen) is set, and then needs S3 keys; dev serves it by
// default, with its own key without an auth section, the file's keys
// with one, and not at all when the file's identities have none.
func TestS3APISettings(t *testing.T) {
	withKeys := writeConfig(t, s3KeysAuth("        - {access_key_id: etl-one, secret_env: ETL_S3_SECRET}\n")+`s3_api:
  listen: 127.0.0.1:9100
  domain: s3.fencegate.example
  region: eu-west-3
`)
	withoutKeys := writeConfig(t, `auth:
  identities:
    - name: ci
      grants: [{prefix: "", operations: [admin]}]
      api_keys: ["sha256:94c136dbfe4850ebcf8d88ca74f0becec7f197b1171cb1ab159da5449146c774"]
`)
	env := map[string]string{"ETL_S3_SECRET": "etl-secret", "FENCEGATE_ETCD_ENDPOINTS": "http://127.0.0.1:2379"}
	tests := []struct {
		name       string
		dev        bool
		args       []string
		env        map[string]string
		wantListen string
		wantDomain string
		wantRegion string
		wantKey    string // an access key id the keys know, and its identity after '='
		wantNote   string
		wantErr    string
	}{
		{name: "serve: off by default", wantRegion: DefaultS3APIRegion},
		{name: "serve: listen from the file, keys from its auth", args: []string{"--config", withKeys},
			wantListen: "127.0.0.1:9100", wantDomain: "s3.fencegate.example", wantRegion: "eu-west-3", wantKey: "etl-one=etl"},
		{name: "serve: the environment over the file", args: []string{"--config", withKeys}, env: map[string]string{"FENCEGATE_S3_LISTEN": "127.0.0.1:9200", "FENCEGATE_S3_API_REGION": "us-west-2"},
			wantListen: "127.0.0.1:9200", wantDomain: "s3.fencegate.example", wantRegion: "us-west-2", wantKey: "etl-one=etl"},
		{name: "serve: no auth section", args: []string{"--s3-listen", "127.0.0.1:9100"},
			wantErr: "--s3-listen 127.0.0.1:9100: no identity has S3 access keys"},
		{name: "serve: identities without S3 keys", args: []string{"--s3-listen", "127.0.0.1:9100", "--config", withoutKeys},
			wantErr: "no identity has S3 access keys"},
		{name: "serve: the main listener's address", args: []string{"--config", withKeys, "--listen", "127.0.0.1:9100"},
			wantErr: "s3_api.listen: --s3-listen 127.0.0.1:9100: the same address as --listen"},
		{name: "serve: domain without listener", args: []string{"--s3-domain", "s3.example.com"},
			wantErr: "--s3-domain needs --s3-listen"},
		{name: "serve: bad domain", args: []string{"--config", withKeys, "--s3-domain", "https://s3.example.com"},
			wantErr: `--s3-domain "https://s3.example.com": want a domain name`},
		{name: "serve: bad region", args: []string{"--config", withKeys, "--s3-api-region", "EU West"},
			wantErr: `--s3-api-region "EU West": want a region`},
		{name: "serve: bad listen", args: []string{"--config", withKeys, "--s3-listen", "9100"},
			wantErr: `--s3-listen "9100": want host:port`},
		{name: "dev: on by default, with dev's key", dev: true,
			wantListen: DevS3Listen, wantRegion: DefaultS3APIRegion, wantKey: DevS3Key.AccessKeyID + "=dev"},
		{name: "dev: off on request", dev: true, args: []string{"--s3-listen", ""}, wantRegion: DefaultS3APIRegion},
		{name: "dev: the file's keys, not dev's", dev: true, args: []string{"--config", withKeys, "--s3-listen", "127.0.0.1:0"},
			wantListen: "127.0.0.1:0", wantDomain: "s3.fencegate.example", wantRegion: "eu-west-3", wantKey: "etl-one=etl"},
		{name: "dev: identities without S3 keys turn it off", dev: true, args: []string{"--config", withoutKeys},
			wantRegion: DefaultS3APIRegion, wantNote: "gives no identity s3_keys: the S3 API is off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			for k, v := range tt.env {
				e[k] = v
			}
			var (
				got  S3API
				note string
				err  error
			)
			if tt.dev {
				var cfg Dev
				cfg, err = ParseDev(tt.args, envMap(e), &bytes.Buffer{}, nil)
				got, note = cfg.S3API, cfg.S3APINote
			} else {
				var cfg Serve
				cfg, err = ParseServe(tt.args, envMap(e), &bytes.Buffer{}, nil)
				got = cfg.S3API
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse(%q) = %v; want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q) = %v", tt.args, err)
			}
			if got.Listen != tt.wantListen || got.Domain != tt.wantDomain || got.Region != tt.wantRegion || !strings.Contains(note, tt.wantNote) || (tt.wantNote == "") != (note == "") {
				t.Errorf("parse(%q) = listen %q, domain %q, region %q, note %q; want %q, %q, %q, %q", tt.args, got.Listen, got.Domain, got.Region, note, tt.wantListen, tt.wantDomain, tt.wantRegion, tt.wantNote)
			}
			if tt.wantKey == "" {
				if got.Keys != nil {
					t.Errorf("parse(%q): keys %v; want none (the S3 API is off)", tt.args, got.Keys)
				}
				return
			}
			id, identity, _ := strings.Cut(tt.wantKey, "=")
			if got.Keys == nil {
				t.Fatalf("parse(%q): no keys; want %s", tt.args, tt.wantKey)
			}
			_, who, err := got.Keys.SecretKey(context.Background(), id)
			if err != nil || who != identity {
				t.Errorf("keys.SecretKey(%q) = %q, %v; want identity %q", id, who, err, identity)
			}
			if _, _, err := got.Keys.SecretKey(context.Background(), "fencegate-dev"); !errors.Is(err, sigv4.ErrUnknownAccessKey) {
				t.Errorf("keys.SecretKey(the S3 server's key) = %v; want unknown: a gateway credential is never a client's", err)
			}
		})
	}
}
