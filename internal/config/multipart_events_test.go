package config

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
)

// TestMultipartAndEventsFile: the multipart and events sections give
// the gateway's multipart and event feed settings, and a bad value is
// refused naming the file, the line and the field.
func TestMultipartAndEventsFile(t *testing.T) {
	d := gateway.DefaultConfig()
	tests := []struct {
		name string
		yaml string // after etcd's line
		// want is the error's start ("f.yaml:LINE: path: ..."), "" when
		// the file is valid.
		want string
		// check is what the gateway's config must hold when it is.
		check func(gateway.Config) bool
	}{
		{"defaults", "", "", func(c gateway.Config) bool {
			return c.MultipartThreshold == d.MultipartThreshold && c.MultipartPartSize == d.MultipartPartSize && c.UploadTTL == d.UploadTTL &&
				c.EventSubscribers == d.EventSubscribers && c.EventBuffer == d.EventBuffer &&
				c.EventHistory == d.EventHistory && c.EventHistoryBytes == d.EventHistoryBytes && c.TicketExpiry == api.DefaultTicketExpiry
		}},
		{"history set", "events: {history: 500, history_bytes: 1MiB}\n", "", func(c gateway.Config) bool {
			return c.EventHistory == 500 && c.EventHistoryBytes == 1<<20
		}},
		{"history 0: live only", "events: {history: 0}\n", "", func(c gateway.Config) bool { return c.EventHistory < 0 }},
		{"history too long", "events:\n  history: 1000001\n", "f.yaml:4: events.history: 1000001: must be from 0 to 1000000", nil},
		{"history bytes too few", "events:\n  history_bytes: 1KiB\n", "f.yaml:4: events.history_bytes: 1KiB: must be from 64KiB to 1GiB", nil},
		{"all set", "multipart: {threshold: 100MiB, part_size: 8MiB, upload_ttl: 2h}\nevents: {max_subscribers: 3, buffer: 16}\n", "", func(c gateway.Config) bool {
			return c.MultipartThreshold == 100<<20 && c.MultipartPartSize == 8<<20 && c.UploadTTL == 2*time.Hour && c.EventSubscribers == 3 && c.EventBuffer == 16
		}},
		{"threshold 0: every body in one PUT", "multipart: {threshold: 0}\n", "", func(c gateway.Config) bool { return c.MultipartThreshold < 0 }},
		{"part size at S3's bounds", "multipart: {part_size: 5MiB}\n", "", func(c gateway.Config) bool { return c.MultipartPartSize == 5<<20 }},
		{"part size at S3's upper bound", "multipart: {part_size: 5GiB}\n", "", func(c gateway.Config) bool { return c.MultipartPartSize == 5<<30 }},
		{"one subscriber, one event", "events: {max_subscribers: 1, buffer: 1}\n", "", func(c gateway.Config) bool { return c.EventSubscribers == 1 && c.EventBuffer == 1 }},

		{"negative threshold", "multipart:\n  threshold: -1\n", "f.yaml:4: multipart.threshold: -1: must be at least 0", nil},
		{"threshold not a size", "multipart:\n  threshold: big\n", `f.yaml:4: multipart.threshold: "big"`, nil},
		{"part size below S3's", "multipart:\n  part_size: 4MiB\n", "f.yaml:4: multipart.part_size: 4MiB: must be 5MiB to 5GiB", nil},
		{"part size above S3's", "multipart:\n  part_size: 6GiB\n", "f.yaml:4: multipart.part_size: 6GiB: must be 5MiB to 5GiB", nil},
		{"part size zero", "multipart:\n  part_size: 0\n", "f.yaml:4: multipart.part_size: 0: must be at least 1", nil},
		{"upload ttl zero", "multipart:\n  upload_ttl: 0s\n", "f.yaml:4: multipart.upload_ttl: 0s: must be above zero", nil},
		{"upload ttl under a second", "multipart:\n  upload_ttl: 500ms\n", "f.yaml:4: multipart.upload_ttl: 500ms: must be at least a second", nil},
		{"upload ttl negative", "multipart:\n  upload_ttl: -1h\n", "f.yaml:4: multipart.upload_ttl: -1h0m0s: must be above zero", nil},
		{"unknown multipart field", "multipart:\n  parts: 3\n", "f.yaml:4: multipart.parts: unknown field (want one of threshold, part_size, upload_ttl)", nil},
		{"no subscribers", "events:\n  max_subscribers: 0\n", "f.yaml:4: events.max_subscribers: 0: must be from 1 to 4096", nil},
		{"too many subscribers", "events:\n  max_subscribers: 5000\n", "f.yaml:4: events.max_subscribers: 5000: must be from 1 to 4096", nil},
		{"no buffer", "events:\n  buffer: 0\n", "f.yaml:4: events.buffer: 0: must be from 1 to 65536", nil},
		{"buffer too large", "events:\n  buffer: 100000\n", "f.yaml:4: events.buffer: 100000: must be from 1 to 65536", nil},
		{"buffer not a number", "events:\n  buffer: lots\n", `f.yaml:4: events.buffer: "lots": want a whole number`, nil},
		{"ticket expiry", "objects:\n  ticket_expiry: 30s\n", "", func(c gateway.Config) bool { return c.TicketExpiry == 30*time.Second }},
		{"ticket expiry not whole seconds", "objects:\n  ticket_expiry: 1500ms\n", "f.yaml:4: objects.ticket_expiry: 1.5s: must be whole seconds from 1s to 168h0m0s", nil},
		{"ticket expiry too long", "objects:\n  ticket_expiry: 200h\n", "f.yaml:4: objects.ticket_expiry: 200h0m0s: must be whole seconds from 1s to 168h0m0s", nil},
		{"ticket expiry zero", "objects:\n  ticket_expiry: 0s\n", "f.yaml:4: objects.ticket_expiry: 0s: must be above zero", nil},
		{"unknown events field", "events:\n  subscribers: 3\n", "f.yaml:4: events.subscribers: unknown field (want one of max_subscribers, buffer, history, history_bytes)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := "etcd:\n  endpoints: [http://127.0.0.1:2379]\n" + tt.yaml
			_, err := parseConfig("f.yaml", t.TempDir(), []byte(data), envMap(nil))
			if tt.want != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("parseConfig(%q) = %v; want one error starting %q", tt.yaml, err, tt.want)
				}
				// serve refuses it the same way, naming the field.
				path := writeConfig(t, data)
				if _, err := ParseServe([]string{"--config", path}, envMap(nil), &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tt.want, "f.yaml")) {
					t.Errorf("ParseServe --config = %v; want an error containing %q", err, strings.TrimPrefix(tt.want, "f.yaml"))
				}
				return
			}
			if err != nil {
				t.Fatalf("parseConfig(%q) = %v; want nil", tt.yaml, err)
			}
			cfg, err := ParseServe([]string{"--config", writeConfig(t, data)}, envMap(nil), &bytes.Buffer{}, nil)
			if err != nil {
				t.Fatalf("ParseServe --config: %v", err)
			}
			if !tt.check(cfg.Gateway) {
				t.Errorf("gateway config from %q: threshold %d, part size %d, upload TTL %v, subscribers %d, buffer %d; not what the file says",
					tt.yaml, cfg.Gateway.MultipartThreshold, cfg.Gateway.MultipartPartSize, cfg.Gateway.UploadTTL, cfg.Gateway.EventSubscribers, cfg.Gateway.EventBuffer)
			}
		})
	}
}

// TestMultipartAndEventsFlags: the flags of the same settings, their
// bounds (each error naming the flag), and their precedence over the
// environment and the file.
func TestMultipartAndEventsFlags(t *testing.T) {
	base := []string{"--etcd-endpoints", "http://127.0.0.1:2379"}
	tests := []struct {
		args []string
		want string // the error's part, "" when valid
	}{
		{[]string{"--events-max-subscribers", "0"}, "--events-max-subscribers 0: must be from 1 to 4096"},
		{[]string{"--events-max-subscribers", "4097"}, "--events-max-subscribers 4097: must be from 1 to 4096"},
		{[]string{"--events-buffer", "-1"}, "--events-buffer -1: must be from 1 to 65536"},
		{[]string{"--events-buffer", "65537"}, "--events-buffer 65537: must be from 1 to 65536"},
		{[]string{"--multipart-threshold", "-1"}, "--multipart-threshold -1: must be at least 0"},
		{[]string{"--multipart-part-size", "1MiB"}, "--multipart-part-size 1MiB: must be 5MiB to 5GiB"},
		{[]string{"--multipart-part-size", "0"}, "--multipart-part-size 0: must be at least 1"},
		{[]string{"--upload-ttl", "0s"}, "--upload-ttl 0s: must be above zero"},
		{[]string{"--upload-ttl", "10ms"}, "--upload-ttl 10ms: must be at least a second"},
		{[]string{"--ticket-expiry", "0s"}, "--ticket-expiry 0s: must be above zero"},
		{[]string{"--ticket-expiry", "2500ms"}, "--ticket-expiry 2.5s: must be whole seconds from 1s to 168h0m0s"},
		{[]string{"--ticket-expiry", "20s"}, ""},
		{[]string{"--events-history", "-1"}, "--events-history -1: must be from 0 to 1000000"},
		{[]string{"--events-history-bytes", "2GiB"}, "--events-history-bytes 2GiB: must be from 64KiB to 1GiB"},
		{[]string{"--events-max-subscribers", "4096", "--events-buffer", "65536", "--multipart-threshold", "0", "--upload-ttl", "1s"}, ""},
		{[]string{"--events-history", "0", "--events-history-bytes", "64KiB"}, ""},
	}
	for _, tt := range tests {
		_, err := ParseServe(append(base, tt.args...), envMap(nil), &bytes.Buffer{}, nil)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ParseServe(%q) = %v; want nil", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ParseServe(%q) = %v; want an error containing %q", tt.args, err, tt.want)
		}
	}

	// A flag wins over the environment, which wins over the file.
	path := writeConfig(t, `
etcd: {endpoints: ["http://127.0.0.1:2379"]}
multipart: {threshold: 1GiB, part_size: 32MiB, upload_ttl: 3h}
events: {max_subscribers: 5, buffer: 50, history: 300}
`)
	env := envMap(map[string]string{"FENCEGATE_EVENTS_BUFFER": "60", "FENCEGATE_UPLOAD_TTL": "4h"})
	cfg, err := ParseServe([]string{"--config", path, "--events-buffer", "70", "--multipart-part-size", "64MiB"}, env, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"events buffer (flag over env over file)", cfg.Gateway.EventBuffer, 70},
		{"upload ttl (env over file)", cfg.Gateway.UploadTTL, 4 * time.Hour},
		{"part size (flag over file)", cfg.Gateway.MultipartPartSize, int64(64 << 20)},
		{"threshold (file)", cfg.Gateway.MultipartThreshold, int64(1 << 30)},
		{"max subscribers (file)", cfg.Gateway.EventSubscribers, 5},
		{"history (file)", cfg.Gateway.EventHistory, 300},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	// A bad value from the environment is named with its variable.
	_, err = ParseServe(base, envMap(map[string]string{"FENCEGATE_EVENTS_MAX_SUBSCRIBERS": "0"}), &bytes.Buffer{}, nil)
	if want := "FENCEGATE_EVENTS_MAX_SUBSCRIBERS: --events-max-subscribers 0: must be from 1 to 4096"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ParseServe with FENCEGATE_EVENTS_MAX_SUBSCRIBERS=0 = %v; want %q", err, want)
	}
}
