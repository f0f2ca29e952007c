package helm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

var etcdEndpoints = []any{"https://etcd-0.etcd:2379", "https://etcd-1.etcd:2379", "https://etcd-2.etcd:2379"}

// valueSets are the installs the chart is rendered for: each must render
// objects that are valid and that pass checkRelease.
var valueSets = []struct {
	name   string
	values map[string]any
}{
	{"etcd endpoints only", map[string]any{"etcd": map[string]any{"endpoints": etcdEndpoints}}},
	{"etcd TLS and auth, S3 keys, credentials from a Secret of the chart", map[string]any{
		"etcd":        map[string]any{"endpoints": etcdEndpoints, "username": "fencegate", "tls": map[string]any{"secretName": "etcd-client"}},
		"s3":          map[string]any{"endpoint": "https://s3.internal:7070", "pathStyle": true, "accessKey": "fencegate-gw"},
		"credentials": map[string]any{"env": map[string]any{"ETCD_PASSWORD": "p", "S3_SECRET_KEY": "s"}},
	}},
	{"everything on", map[string]any{
		"replicaCount": 3,
		"etcd":         map[string]any{"endpoints": etcdEndpoints, "tls": map[string]any{"secretName": "etcd-ca", "clientCert": false}},
		"s3Api":        map[string]any{"enabled": true, "domain": "s3.fencegate.example"},
		"serverTLS":    map[string]any{"secretName": "fencegate-tls"},
		"credentials":  map[string]any{"existingSecret": "fencegate-credentials"},
		"shutdown":     map[string]any{"drainDelaySeconds": 10, "timeoutSeconds": 120},
		"config": map[string]any{
			"limits": map[string]any{"buffer_budget_bytes": "512MiB"},
			"log":    map[string]any{"format": "json"},
			"partners": []any{map[string]any{"name": "payments", "upstream": "https://api.payments.example/v1",
				"methods": []any{"POST"}, "resource": "accounts/{account}"}},
		},
		"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}},
		"networkPolicy": map[string]any{"enabled": true, "from": []any{
			map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "clients"}}}}},
		"resources":   map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "512Mi"}, "limits": map[string]any{"memory": "1Gi"}},
		"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "gateways", "effect": "NoSchedule"}},
		"affinity": map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
			map[string]any{"weight": 100, "podAffinityTerm": map[string]any{"topologyKey": "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "fencegate"}}}}}}},
		"podAnnotations": map[string]any{"example.com/team": "storage"},
	}},
	{"no disruption budget", map[string]any{"etcd": map[string]any{"endpoints": etcdEndpoints}, "podDisruptionBudget": map[string]any{"enabled": false}}},
}

func TestChartRendersValidObjects(t *testing.T) {
	s := loadSchemas(t)
	for _, c := range valueSets {
		t.Run(c.name, func(t *testing.T) {
			objects, err := render(c.values)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			for _, o := range objects {
				if err := validateObject(s, o); err != nil {
					t.Error(err)
				}
			}
			if err := checkRelease(objects, c.values); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestChartRefusesInvalidValues renders values that make an invalid
// object, or none: each must be reported.
func TestChartRefusesInvalidValues(t *testing.T) {
	s := loadSchemas(t)
	base := func(extra map[string]any) map[string]any {
		values := map[string]any{"etcd": map[string]any{"endpoints": etcdEndpoints}}
		for k, v := range extra {
			values[k] = v
		}
		return values
	}
	for _, c := range []struct {
		name    string
		values  map[string]any
		wantErr string
	}{
		{"no etcd endpoints", map[string]any{}, "etcd.endpoints"},
		// The OpenAPI schema's required fields: a NodeSelector has terms.
		{"a node affinity without terms", base(map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{}}}}), "nodeSelectorTerms"},
		// The Go types' fields: a misspelt field is refused.
		{"a misspelt security context field", base(map[string]any{"securityContext": map[string]any{"readOnlyRootFileSystem": true}}), `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"an annotation that is not a string", base(map[string]any{"podAnnotations": map[string]any{"example.com/weight": 3}}), "annotations"},
		{"a CPU that is not a quantity", base(map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "lots"}}}), "quantities must match"},
		{"a port that is not a number", base(map[string]any{"service": map[string]any{"port": "http"}}), "port"},
		// The CRD's pattern of a duration.
		{"a ServiceMonitor interval that is not a duration", base(map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "often"}}), "spec.endpoints[0].interval"},
		// The release's own checks.
		{"a grace period that does not exceed the shutdown", base(map[string]any{"shutdown": map[string]any{"extraGraceSeconds": 0}}), "terminationGracePeriodSeconds"},
		{"one replica", base(map[string]any{"replicaCount": 1}), "replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objects, err := render(c.values)
			if err == nil {
				var errs []error
				for _, o := range objects {
					errs = append(errs, validateObject(s, o))
				}
				errs = append(errs, checkRelease(objects, c.values))
				err = errors.Join(errs...)
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("values %v: %v; want an error naming %q", c.values, err, c.wantErr)
			}
		})
	}
}

// checkRelease checks what the objects must say together: at least two
// gateways, probes on /readyz and /healthz, a grace period longer than
// the drain delay and the shutdown timeout of the configuration the
// gateways load, Services and a disruption budget that select the
// gateways' pods, and the Secret and ConfigMap that the pods use.
func checkRelease(objects []object, values map[string]any) error {
	var deployment appsv1.Deployment
	var configMaps, secrets []string
	var config string
	var services []corev1.Service
	var pdbs []policyv1.PodDisruptionBudget
	for _, o := range objects {
		var err error
		switch o.kind {
		case "Deployment":
			err = yaml.Unmarshal(o.manifest, &deployment)
		case "ConfigMap":
			var cm corev1.ConfigMap
			err = yaml.Unmarshal(o.manifest, &cm)
			configMaps = append(configMaps, cm.Name)
			config = cm.Data["fencegate.yaml"]
		case "Secret":
			secrets = append(secrets, o.name)
		case "Service":
			var svc corev1.Service
			err = yaml.Unmarshal(o.manifest, &svc)
			services = append(services, svc)
		case "PodDisruptionBudget":
			var pdb policyv1.PodDisruptionBudget
			err = yaml.Unmarshal(o.manifest, &pdb)
			pdbs = append(pdbs, pdb)
		}
		if err != nil {
			return err
		}
	}
	var errs []error
	if replicas := deployment.Spec.Replicas; replicas == nil || *replicas < 2 {
		errs = append(errs, fmt.Errorf("Deployment: replicas %s; want at least 2, so that a gateway can restart while another serves", show(replicas)))
	}
	pod := deployment.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		return errors.Join(append(errs, fmt.Errorf("Deployment: %d containers; want 1", len(pod.Spec.Containers)))...)
	}
	container := pod.Spec.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", container.ReadinessProbe, "/readyz"}, {"liveness", container.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
			errs = append(errs, fmt.Errorf("Deployment: the %s probe is not GET %s", p.name, p.path))
		}
	}
	errs = append(errs, checkGracePeriod(pod.Spec, config))

	ports := map[string]bool{}
	for _, p := range container.Ports {
		ports[p.Name] = true
	}
	for _, svc := range services {
		if !selects(svc.Spec.Selector, pod.Labels) {
			errs = append(errs, fmt.Errorf("Service %s: selector %v does not select the pods (%v)", svc.Name, svc.Spec.Selector, pod.Labels))
		}
		for _, p := range svc.Spec.Ports {
			if !ports[p.TargetPort.String()] {
				errs = append(errs, fmt.Errorf("Service %s: target port %s is not a port of the container", svc.Name, p.TargetPort.String()))
			}
		}
	}
	wantServices := 1
	if s3Api, _ := values["s3Api"].(map[string]any); s3Api["enabled"] == true {
		wantServices = 2
	}
	if len(services) != wantServices {
		errs = append(errs, fmt.Errorf("%d Services; want %d (the REST API, and the S3 API when it is on)", len(services), wantServices))
	}
	if pdb, _ := values["podDisruptionBudget"].(map[string]any); pdb["enabled"] != false && len(pdbs) != 1 {
		errs = append(errs, fmt.Errorf("%d PodDisruptionBudgets; want 1", len(pdbs)))
	}
	for _, pdb := range pdbs {
		if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s does not select the pods", pdb.Name))
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && !slices.Contains(configMaps, v.ConfigMap.Name) {
			errs = append(errs, fmt.Errorf("volume %s: ConfigMap %s is not in the release", v.Name, v.ConfigMap.Name))
		}
	}
	credentials, _ := values["credentials"].(map[string]any)
	for _, from := range container.EnvFrom {
		if from.SecretRef != nil && credentials["existingSecret"] == nil && !slices.Contains(secrets, from.SecretRef.Name) {
			errs = append(errs, fmt.Errorf("envFrom: Secret %s is not in the release", from.SecretRef.Name))
		}
	}
	return errors.Join(errs...)
}

// checkGracePeriod checks that Kubernetes waits longer than the gateway
// may take to stop: on SIGTERM it fails /readyz for http.drain_delay,
// then lets requests finish for up to http.shutdown_timeout (30s when
// the configuration does not say). A shorter grace period kills it with
// requests in flight.
func checkGracePeriod(pod corev1.PodSpec, config string) error {
	var file struct {
		HTTP struct {
			DrainDelay      string `json:"drain_delay"`
			ShutdownTimeout string `json:"shutdown_timeout"`
		} `json:"http"`
	}
	if err := yaml.Unmarshal([]byte(config), &file); err != nil {
		return fmt.Errorf("fencegate.yaml: %w", err)
	}
	var stop time.Duration
	for _, d := range []struct{ value, fallback string }{{file.HTTP.DrainDelay, "0s"}, {file.HTTP.ShutdownTimeout, "30s"}} {
		if d.value == "" {
			d.value = d.fallback
		}
		v, err := time.ParseDuration(d.value)
		if err != nil {
			return fmt.Errorf("fencegate.yaml: %w", err)
		}
		stop += v
	}
	if grace := pod.TerminationGracePeriodSeconds; grace == nil || time.Duration(*grace)*time.Second <= stop {
		return fmt.Errorf("Deployment: terminationGracePeriodSeconds %s does not exceed the drain delay and shutdown timeout, %v", show(grace), stop)
	}
	return nil
}

// show formats an optional number: its value, or "unset".
func show[T int32 | int64](v *T) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}

// selects reports whether a selector's labels are all among labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
