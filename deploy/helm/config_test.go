package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// buildFencegate builds the gateway's binary from the main module, one
// directory up from deploy/.
func buildFencegate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencegate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fencegate")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fencegate: %v\n%s", err, out)
	}
	return bin
}

// TestChartConfigIsOneFencegateAccepts renders the chart and checks its
// ConfigMap's fencegate.yaml with the gateway's own `fencegate config
// check`, with the environment its Secret gives: a configuration that
// the gateway refuses would leave every pod failing at start. (Value
// sets with TLS name files that exist only in the pod, which config
// check opens: they are left out here.)
func TestChartConfigIsOneFencegateAccepts(t *testing.T) {
	fencegate := buildFencegate(t)
	env := append(os.Environ(), "ETCD_PASSWORD=p", "S3_SECRET_KEY=s", "PAYMENTS_API_KEY=k", "CI_S3_SECRET=c")
	endpoints := map[string]any{"endpoints": etcdEndpoints}
	for _, c := range []struct {
		name     string
		values   map[string]any
		wantPass bool
		wantOut  string // in config check's output
	}{
		{"etcd endpoints only", map[string]any{"etcd": endpoints}, true, "etcd.endpoints"},
		{"auth, S3 keys and the S3 API, partner routes", map[string]any{
			"etcd":  map[string]any{"endpoints": etcdEndpoints, "username": "fencegate"},
			"s3":    map[string]any{"endpoint": "https://s3.internal:7070", "pathStyle": true, "accessKey": "fencegate-gw"},
			"s3Api": map[string]any{"enabled": true},
			"config": map[string]any{
				"partners": []any{map[string]any{"name": "payments", "upstream": "https://api.payments.example/v1",
					"methods": []any{"POST"}, "resource": "accounts/{account}",
					"add_headers": map[string]any{"Authorization": "Bearer ${PAYMENTS_API_KEY}"}}},
				"auth": map[string]any{"identities": []any{map[string]any{"name": "ci",
					"grants":   []any{map[string]any{"prefix": "s3/reports/", "operations": []any{"read", "write"}}},
					"api_keys": []any{"sha256:94c136dbfe4850ebcf8d88ca74f0becec7f197b1171cb1ab159da5449146c774"},
					"s3_keys":  []any{map[string]any{"access_key_id": "AKIAFENCEGATECI00001", "secret_env": "CI_S3_SECRET"}}}}},
			},
		}, true, "partner"},
		{"a limit that is not a size", map[string]any{"etcd": endpoints, "config": map[string]any{"limits": map[string]any{"buffer_bytes": "lots"}}}, false, "limits.buffer_bytes"},
		{"a field fencegate does not have", map[string]any{"etcd": endpoints, "config": map[string]any{"http": map[string]any{"shutdown_timout": "10s"}}}, false, "shutdown_timout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objects, err := render(c.values)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			var config string
			for _, o := range objects {
				if o.kind == "ConfigMap" {
					var cm corev1.ConfigMap
					if err := yaml.Unmarshal(o.manifest, &cm); err != nil {
						t.Fatal(err)
					}
					config = cm.Data["fencegate.yaml"]
				}
			}
			path := filepath.Join(t.TempDir(), "fencegate.yaml")
			if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(fencegate, "config", "check", path)
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			if passed := err == nil; passed != c.wantPass || !strings.Contains(out.String(), c.wantOut) {
				t.Errorf("fencegate config check: passed %v, output:\n%s\nwant passed %v and output naming %q; fencegate.yaml:\n%s", passed, out.String(), c.wantPass, c.wantOut, config)
			}
		})
	}
}
