package helm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const chartDir = "fencegate"

// object is one rendered Kubernetes object: the template it came from,
// its kind, name and manifest.
type object struct {
	template, apiVersion, kind, name string
	manifest                         []byte
}

// render renders the chart with values over its defaults, as helm
// install does, and returns its objects.
func render(values map[string]any) ([]object, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(chart, values, chartutil.ReleaseOptions{Name: "gw", Namespace: "fencegate", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chart, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objects []object
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for doc := range strings.SplitSeq(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			objects = append(objects, object{template: name, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name, manifest: []byte(doc)})
		}
	}
	return objects, nil
}

// kinds maps each kind the chart may render to its Go type and its
// definition in the Kubernetes OpenAPI document. A ServiceMonitor is a
// prometheus-operator CRD, whose schema no Go module of theirs that the
// module proxy serves holds: it is decoded strictly into their Go type,
// and its durations are checked as the CRD's pattern checks them
// (checkServiceMonitor).
var kinds = map[string]struct {
	newObject  func() any
	definition string // "": none
}{
	"apps/v1/Deployment":                      {func() any { return new(appsv1.Deployment) }, "io.k8s.api.apps.v1.Deployment"},
	"v1/Service":                              {func() any { return new(corev1.Service) }, "io.k8s.api.core.v1.Service"},
	"v1/ConfigMap":                            {func() any { return new(corev1.ConfigMap) }, "io.k8s.api.core.v1.ConfigMap"},
	"v1/Secret":                               {func() any { return new(corev1.Secret) }, "io.k8s.api.core.v1.Secret"},
	"policy/v1/PodDisruptionBudget":           {func() any { return new(policyv1.PodDisruptionBudget) }, "io.k8s.api.policy.v1.PodDisruptionBudget"},
	"networking.k8s.io/v1/NetworkPolicy":      {func() any { return new(networkingv1.NetworkPolicy) }, "io.k8s.api.networking.v1.NetworkPolicy"},
	"monitoring.coreos.com/v1/ServiceMonitor": {func() any { return new(monitoringv1.ServiceMonitor) }, ""},
}

// validateObject checks an object twice: decoded strictly into its Go
// type (a field the type does not have, or a value of the wrong type, is
// an error, as in the API server), and validated against its OpenAPI schema (types, required
// fields, enums and patterns, which the Go types do not check).
func validateObject(s *schemas, o object) error {
	kind, ok := kinds[o.apiVersion+"/"+o.kind]
	if !ok {
		return fmt.Errorf("%s: kind %s/%s has no schema here", o.template, o.apiVersion, o.kind)
	}
	data, err := yaml.YAMLToJSON(o.manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", o.template, err)
	}
	// As the API server decodes: field names match exactly (encoding/json
	// would take readOnlyRootFileSystem for readOnlyRootFilesystem), and
	// an unknown or repeated field is an error.
	typed := kind.newObject()
	strictErrs, err := sigsjson.UnmarshalStrict(data, typed, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err = errors.Join(append(strictErrs, err)...); err != nil {
		return fmt.Errorf("%s: %s %s: %w", o.template, o.kind, o.name, err)
	}
	if sm, ok := typed.(*monitoringv1.ServiceMonitor); ok {
		if err := checkServiceMonitor(sm); err != nil {
			return fmt.Errorf("%s: %s %s: %w", o.template, o.kind, o.name, err)
		}
		return nil
	}
	def, ok := s.definitions[kind.definition]
	if !ok {
		return fmt.Errorf("the Kubernetes OpenAPI document has no %s", kind.definition)
	}
	schema := s.resolve(&def)
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	result := validate.NewSchemaValidator(schema, nil, o.kind, strfmt.Default, s.resolveRefs).Validate(doc)
	if result.HasErrors() {
		var msgs []string
		for _, err := range result.Errors {
			msgs = append(msgs, err.Error())
		}
		return fmt.Errorf("%s: %s %s: %s", o.template, o.kind, o.name, strings.Join(msgs, "; "))
	}
	return nil
}

// schemas are the definitions of the Kubernetes OpenAPI document
// (api/openapi-spec/swagger.json) of the release whose k8s.io/api this
// module requires, from the k8s.io/kubernetes module of that release,
// fetched with go mod download.
type schemas struct {
	definitions map[string]spec.Schema
	resolveRefs validate.Option
}

var (
	loadOnce   sync.Once
	loaded     *schemas
	loadFailed error
)

func loadSchemas(t *testing.T) *schemas {
	t.Helper()
	loadOnce.Do(func() { loaded, loadFailed = newSchemas() })
	if loadFailed != nil {
		t.Fatalf("the Kubernetes schemas: %v", loadFailed)
	}
	return loaded
}

func newSchemas() (*schemas, error) {
	apiVersion, err := goCommand("list", "-m", "-f", "{{.Version}}", "k8s.io/api")
	if err != nil {
		return nil, err
	}
	// k8s.io/api v0.N.M is Kubernetes v1.N.M.
	kubernetes := "k8s.io/kubernetes@v1." + strings.TrimPrefix(strings.TrimSpace(apiVersion), "v0.")
	out, err := goCommand("mod", "download", "-json", kubernetes)
	var module struct{ Dir, Error string }
	if jsonErr := json.Unmarshal([]byte(out), &module); err == nil && jsonErr != nil {
		err = jsonErr
	}
	if err == nil && module.Error != "" {
		err = errors.New(module.Error)
	}
	if err != nil {
		return nil, fmt.Errorf("go mod download %s (the Go module proxy must be reachable): %w", kubernetes, err)
	}
	data, err := os.ReadFile(filepath.Join(module.Dir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions map[string]spec.Schema `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("swagger.json: %w", err)
	}
	s := &schemas{definitions: doc.Definitions}
	// kube-openapi's validator does not follow $ref: each nested
	// validator is made here, with the reference resolved in the
	// definitions, and passes this option on.
	newValidator := func(schema *spec.Schema, root any, path string, formats strfmt.Registry) validate.ValueValidator {
		return validate.NewSchemaValidator(s.resolve(schema), root, path, formats, s.resolveRefs)
	}
	s.resolveRefs = func(o *validate.SchemaValidatorOptions) {
		o.NewValidatorForField = func(_ string, schema *spec.Schema, root any, path string, formats strfmt.Registry, _ ...validate.Option) validate.ValueValidator {
			return newValidator(schema, root, path, formats)
		}
		o.NewValidatorForIndex = func(_ int, schema *spec.Schema, root any, path string, formats strfmt.Registry, _ ...validate.Option) validate.ValueValidator {
			return newValidator(schema, root, path, formats)
		}
	}
	return s, nil
}

// resolve follows schema's $ref to its definition.
func (s *schemas) resolve(schema *spec.Schema) *spec.Schema {
	for ref := schema.Ref.String(); ref != ""; ref = schema.Ref.String() {
		def, ok := s.definitions[strings.TrimPrefix(ref, "#/definitions/")]
		if !ok {
			return &spec.Schema{SchemaProps: spec.SchemaProps{Not: &spec.Schema{}}} // matches nothing: an unknown reference fails
		}
		schema = &def
	}
	if schema.Format == "int-or-string" {
		// What the API server accepts for an IntOrString, which the
		// validator's formats do not know: an integer or a string.
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"integer", "string"}}}
	}
	return schema
}

// checkServiceMonitor checks what the ServiceMonitor CRD's schema
// checks beyond its Go type: each endpoint's interval and scrape timeout
// match its Duration pattern, which is Prometheus's duration syntax.
func checkServiceMonitor(sm *monitoringv1.ServiceMonitor) error {
	var errs []error
	for i, e := range sm.Spec.Endpoints {
		for field, d := range map[string]monitoringv1.Duration{"interval": e.Interval, "scrapeTimeout": e.ScrapeTimeout} {
			if d == "" {
				continue
			}
			if _, err := model.ParseDuration(string(d)); err != nil {
				errs = append(errs, fmt.Errorf("spec.endpoints[%d].%s: %w", i, field, err))
			}
		}
	}
	return errors.Join(errs...)
}

// goCommand runs the go command in this module and returns its output.
func goCommand(args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
