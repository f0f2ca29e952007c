package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The tests in this file hold api/openapi.yaml to the error table and the
// wire types of this package. gateway/openapi_test.go holds it to the
// router.

// openAPIDoc is the parsed api/openapi.yaml, with a resolver for its
// local $refs.
type openAPIDoc struct {
	root map[string]any
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi.yaml: openapi = %q; want 3.1.x", v)
	}
	return &openAPIDoc{root: root}
}

// resolve follows node's $ref, if it has one, to a map in the document.
func (d *openAPIDoc) resolve(t *testing.T, node any) map[string]any {
	t.Helper()
	for range 10 { // a chain of refs, never a cycle
		m, ok := node.(map[string]any)
		if !ok {
			t.Fatalf("openapi.yaml: %v is not an object", node)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		node = d.pointer(t, ref)
	}
	t.Fatalf("openapi.yaml: $ref chain too long at %v", node)
	return nil
}

// pointer returns what a local JSON pointer ("#/components/...") names.
func (d *openAPIDoc) pointer(t *testing.T, ref string) any {
	t.Helper()
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		t.Fatalf("openapi.yaml: $ref %q is not local", ref)
	}
	var node any = d.root
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := node.(map[string]any)
		if !ok || m[tok] == nil {
			t.Fatalf("openapi.yaml: $ref %q does not resolve", ref)
		}
		node = m[tok]
	}
	return node
}

// get walks keys down from node, returning nil where one is missing.
func get(node any, keys ...string) any {
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[k]
	}
	return node
}

// openAPIMethods are the operations a path item may have.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operation is one method of one path of the document.
type operation struct {
	path, method string
	op           map[string]any
}

func (o operation) String() string { return strings.ToUpper(o.method) + " " + o.path }

func (d *openAPIDoc) operations(t *testing.T) []operation {
	t.Helper()
	paths, _ := d.root["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("openapi.yaml: no paths")
	}
	var ops []operation
	for path, item := range paths {
		pi := d.resolve(t, item)
		for _, m := range openAPIMethods {
			if op, ok := pi[m]; ok {
				ops = append(ops, operation{path: path, method: m, op: d.resolve(t, op)})
			}
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.String(), b.String()) })
	return ops
}

// problemExamples returns the problem types a response names, by the keys
// of its application/problem+json examples, after checking that each
// example is the components example of that key.
func (d *openAPIDoc) problemExamples(t *testing.T, where string, resp map[string]any) []string {
	t.Helper()
	media, ok := get(resp, "content", ContentTypeProblem).(map[string]any)
	if !ok {
		return nil
	}
	if ref := get(media, "schema", "$ref"); ref != "#/components/schemas/Problem" {
		t.Errorf("%s: problem+json schema is %v; want $ref #/components/schemas/Problem", where, ref)
	}
	examples, _ := media["examples"].(map[string]any)
	if len(examples) == 0 {
		t.Errorf("%s: problem+json response names no problem type in its examples", where)
	}
	var slugs []string
	for key, ex := range examples {
		if ref := get(ex, "$ref"); ref != "#/components/examples/"+key {
			t.Errorf("%s: example %q is %v; want $ref #/components/examples/%s", where, key, ref, key)
			continue
		}
		slugs = append(slugs, key)
	}
	slices.Sort(slugs)
	return slugs
}

// tableSlugs returns every slug of the error table, internal included.
func tableSlugs() map[string]class {
	slugs := map[string]class{internalClass.slug: internalClass}
	for _, c := range classes {
		slugs[c.slug] = c
	}
	return slugs
}

// TestOpenAPIProblemTypes checks the problem types of the spec against the
// error table: the same set in both; each one's title, status and
// retryable as the table has them (in its example, which also matches its
// golden file); each named under a response of its own status; and each
// named under some operation's response.
func TestOpenAPIProblemTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	table := tableSlugs()

	// The ProblemType schema lists every type, with its title.
	inSpec := map[string]string{} // slug -> title
	oneOf, _ := get(doc.root, "components", "schemas", "ProblemType", "oneOf").([]any)
	for _, entry := range oneOf {
		typ, _ := get(entry, "const").(string)
		slug, ok := strings.CutPrefix(typ, ProblemTypePrefix)
		if !ok {
			t.Errorf("ProblemType: const %q does not start with %q", typ, ProblemTypePrefix)
			continue
		}
		title, _ := get(entry, "title").(string)
		inSpec[slug] = title
	}
	var missing, extra []string
	for _, slug := range slices.Sorted(maps.Keys(table)) {
		title, ok := inSpec[slug]
		switch {
		case !ok:
			missing = append(missing, slug)
		case title != table[slug].title:
			t.Errorf("ProblemType %s: title %q; the error table says %q", slug, title, table[slug].title)
		}
	}
	for _, slug := range slices.Sorted(maps.Keys(inSpec)) {
		if _, ok := table[slug]; !ok {
			extra = append(extra, slug)
		}
	}
	if len(missing) > 0 {
		t.Errorf("problem types in the error table (api/errors.go) but not in openapi.yaml components.schemas.ProblemType: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("problem types in openapi.yaml components.schemas.ProblemType but not in the error table (api/errors.go): %v", extra)
	}

	// components.examples has one example per type, named by its slug,
	// that agrees with the table and with the type's golden file.
	for _, slug := range slices.Sorted(maps.Keys(table)) {
		c := table[slug]
		ex, ok := get(doc.root, "components", "examples", slug, "value").(map[string]any)
		if !ok {
			t.Errorf("openapi.yaml: no components.examples.%s (a problem body of that type)", slug)
			continue
		}
		want := map[string]any{"type": ProblemTypePrefix + slug, "title": c.title, "status": c.status}
		if c.retryable {
			want["retryable"] = true
		}
		for k, v := range want {
			if fmt.Sprint(ex[k]) != fmt.Sprint(v) {
				t.Errorf("components.examples.%s: %s = %v; the error table says %v", slug, k, ex[k], v)
			}
		}
		if !c.retryable && ex["retryable"] != nil {
			t.Errorf("components.examples.%s: retryable = %v; the error table says false (omitted)", slug, ex["retryable"])
		}
		checkAgainstGolden(t, slug, ex)
	}

	// Every problem response names types of its own status, and every
	// type is named somewhere.
	named := map[string][]string{} // slug -> where
	for _, op := range doc.operations(t) {
		responses, _ := op.op["responses"].(map[string]any)
		for code, r := range responses {
			where := fmt.Sprintf("%s %s", op, code)
			slugs := doc.problemExamples(t, where, doc.resolve(t, r))
			status, err := strconv.Atoi(code)
			if err != nil {
				if len(slugs) > 0 {
					t.Errorf("%s: problem types under a %q response; name each under its status", where, code)
				}
				continue
			}
			for _, slug := range slugs {
				c, ok := table[slug]
				switch {
				case !ok:
					t.Errorf("%s: problem type %q is not in the error table", where, slug)
				case c.status != status:
					t.Errorf("%s: problem type %q is answered with %d (the error table), not %d", where, slug, c.status, status)
				}
				named[slug] = append(named[slug], where)
			}
		}
	}
	var unnamed []string
	for _, slug := range slices.Sorted(maps.Keys(table)) {
		if len(named[slug]) == 0 {
			unnamed = append(unnamed, slug)
		}
	}
	if len(unnamed) > 0 {
		t.Errorf("problem types that no operation's response names in openapi.yaml: %v", unnamed)
	}
}

// checkAgainstGolden checks that a spec example is the type's golden body
// (api/testdata/problems), plus the members every answer has: instance and
// request_id.
func checkAgainstGolden(t *testing.T, slug string, example map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "problems", slug+".json"))
	if os.IsNotExist(err) {
		return // no golden for this type: the table check above is all
	}
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]any
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("golden %s: %v", slug, err)
	}
	for k, v := range golden {
		if fmt.Sprint(example[k]) != fmt.Sprint(v) {
			t.Errorf("components.examples.%s: %s = %v; the golden file says %v", slug, k, example[k], v)
		}
	}
	for k := range example {
		if _, ok := golden[k]; !ok && k != "instance" && k != "request_id" {
			t.Errorf("components.examples.%s: member %q is not in the golden file", slug, k)
		}
	}
	for _, k := range []string{"instance", "request_id"} {
		if example[k] == nil {
			t.Errorf("components.examples.%s: no %s (every problem answer has one)", slug, k)
		}
	}
}

// TestOpenAPIGoldenTypesKnown checks that every golden problem file is of
// a type in the error table, so that none escapes the spec check above.
func TestOpenAPIGoldenTypesKnown(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "problems", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden problem files: %v", err)
	}
	table := tableSlugs()
	for _, f := range files {
		slug := strings.TrimSuffix(filepath.Base(f), ".json")
		if _, ok := table[slug]; !ok {
			t.Errorf("golden file %s is of no problem type in the error table", f)
		}
	}
}

// TestOpenAPIWireTypes checks that each JSON schema of the spec has
// exactly the members of its Go type, and that the schemas of answers
// require exactly the members that are never omitted. (Request bodies
// require what the handlers do, which the types cannot say.)
func TestOpenAPIWireTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	tests := []struct {
		schema  string
		typ     reflect.Type
		request bool
	}{
		{"Problem", reflect.TypeFor[Problem](), false},
		{"Fence", reflect.TypeFor[Fence](), false},
		{"Session", reflect.TypeFor[Session](), false},
		{"LockGrant", reflect.TypeFor[LockGrant](), false},
		{"LockState", reflect.TypeFor[LockState](), false},
		{"LockRelease", reflect.TypeFor[LockRelease](), false},
		{"SessionRequest", reflect.TypeFor[SessionRequest](), true},
		{"LockRequest", reflect.TypeFor[LockRequest](), true},
		{"UploadCompletion", reflect.TypeFor[UploadCompletion](), true},
		{"CompletedPart", reflect.TypeFor[CompletedPart](), true},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			schema := doc.resolve(t, get(doc.root, "components", "schemas", tt.schema))
			props, _ := schema["properties"].(map[string]any)
			var wantRequired []string
			members := map[string]bool{}
			for i := range tt.typ.NumField() {
				f := tt.typ.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				members[name] = true
				if props[name] == nil {
					t.Errorf("schema %s: no property %q (field %s of api.%s)", tt.schema, name, f.Name, tt.typ.Name())
				}
				if !strings.Contains(opts, "omitempty") {
					wantRequired = append(wantRequired, name)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(props)) {
				if !members[name] {
					t.Errorf("schema %s: property %q is not a member of api.%s", tt.schema, name, tt.typ.Name())
				}
			}
			if tt.request {
				return
			}
			var required []string
			list, _ := schema["required"].([]any)
			for _, r := range list {
				required = append(required, fmt.Sprint(r))
			}
			slices.Sort(required)
			slices.Sort(wantRequired)
			if !slices.Equal(required, wantRequired) {
				t.Errorf("schema %s: required = %v; want %v (the members api.%s never omits)", tt.schema, required, wantRequired, tt.typ.Name())
			}
		})
	}
}

// TestOpenAPIHeaders checks the headers the spec promises on answers: the
// request id on every answer, Retry-After on every 503, WWW-Authenticate on
// every 401; and that each header name of this package appears in the spec.
func TestOpenAPIHeaders(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, op := range doc.operations(t) {
		responses, _ := op.op["responses"].(map[string]any)
		for code, r := range responses {
			where := fmt.Sprintf("%s %s", op, code)
			headers, _ := doc.resolve(t, r)["headers"].(map[string]any)
			need := []string{"X-Request-Id"}
			switch code {
			case strconv.Itoa(http.StatusServiceUnavailable):
				need = append(need, "Retry-After")
			case strconv.Itoa(http.StatusUnauthorized):
				if get(doc.resolve(t, r), "content", ContentTypeProblem) != nil {
					need = append(need, "WWW-Authenticate")
				}
			}
			for _, h := range need {
				if headers[h] == nil {
					t.Errorf("%s: no %s header", where, h)
				}
			}
		}
	}

	// Header names are matched case-insensitively, as HTTP does.
	inSpec := map[string]bool{}
	for _, p := range get(doc.root, "components", "parameters").(map[string]any) {
		if get(p, "in") == "header" {
			inSpec[strings.ToLower(get(p, "name").(string))] = true
		}
	}
	for name := range get(doc.root, "components", "headers").(map[string]any) {
		inSpec[strings.ToLower(name)] = true
	}
	for _, h := range []string{HeaderFenceToken, HeaderFenceResource, HeaderIdempotencyKey, HeaderIdempotentReplayed, HeaderIdempotentBodyOmitted} {
		if !inSpec[strings.ToLower(h)] {
			t.Errorf("header %s: neither a header parameter nor a response header in openapi.yaml components", h)
		}
	}
}
