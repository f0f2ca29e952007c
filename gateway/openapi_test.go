package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.yaml.in/yaml/v3"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/partners"
	"fencegate/rest"
)

// The tests in this file hold the router to api/openapi.yaml (the spec);
// api/openapi_test.go holds the spec to the error table.
//
// How router patterns and spec paths are compared: chi's trailing "*"
// takes the rest of the path, slashes included; the spec writes it as an
// ordinary path parameter marked "x-fencegate-wildcard: true" (an object
// key, a resource, a partner path). Both are normalized to "{*}", and
// every other parameter must have the same name in both. A chi parameter
// with a regexp, "{id:[0-9]+}", compares as "{id}".
//
// Methods: OpenAPI 3.1 has operations for eight methods; chi also routes
// CONNECT and QUERY, which it cannot describe. A pattern that chi serves
// for every method it routes (r.Handle, r.HandleFunc) must declare all
// eight; a pattern that serves CONNECT or QUERY without being such an
// any-method pattern cannot be described, and fails.

const openAPIPath = "../api/openapi.yaml"

// openAPIOptions returns every Option constructor of the package, by
// name, with arguments that mount every route group:
// TestOpenAPIUsesEveryOption fails when the package gains one that is not
// here, whose routes would go unchecked. Partner route "payments" forwards
// to partner, "down" to an address that refuses connections.
func openAPIOptions(stores openAPIStores, partner, down *url.URL) map[string]Option {
	sum := func(key string) [32]byte { return sha256.Sum256([]byte(key)) }
	return map[string]Option{
		"WithAuth": WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "ci", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "s3/dev/", Operations: []edge.Operation{edge.OpRead}}}},
			},
			APIKeys: []edge.APIKey{{SHA256: sum("admin-key"), Identity: "ci"}, {SHA256: sum("reader-key"), Identity: "reader"}},
		}),
		"WithLocks": WithLocks(stores),
		// No routes of its own: the S3 front door's multipart and large PUTs.
		"WithMultipart":  WithMultipart(noMultipart{}, noMultipart{}),
		"WithInspection": WithInspection(stores),
		"WithTickets":    WithTickets(stores),
		"WithConsole":    WithConsole(openAPIConsole),
		// No routes of its own: a metric on the registry.
		"WithFenceBatchSizes": WithFenceBatchSizes(NewFenceBatchSizes()),
		// No routes of its own: where partner answers' bodies are kept.
		"WithPartnerAnswers": WithPartnerAnswers(nil),
		"WithPartners": WithPartners([]partners.PartnerRoute{
			{Name: "payments", Upstream: partner, Methods: []string{http.MethodPost}, Resource: "accounts/{account}", RequireIdempotencyKey: true},
			{Name: "down", Upstream: down, Methods: []string{http.MethodPost}, Resource: partners.ResourceFromHeader},
		}, stores, nil),
	}
}

// newOpenAPIGateway builds a gateway on stores with every option.
func newOpenAPIGateway(t *testing.T, cfg Config, stores openAPIStores, partner, down *url.URL) *Gateway {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := openAPIOptions(stores, partner, down)
	g, err := New(cfg, stores, stores, slices.Collect(maps.Values(opts))...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// anyMethod returns the methods chi routes for a pattern mounted for any
// method: a pattern served for all of them was mounted so.
func anyMethod(t *testing.T) []string {
	t.Helper()
	r := chi.NewRouter()
	r.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	var methods []string
	if err := chi.Walk(r, func(method, _ string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		methods = append(methods, method)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(methods)
	return methods
}

// specMethods are the methods an OpenAPI 3.1 path item can describe.
var specMethods = []string{
	http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
	http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodTrace,
}

var chiRegexpParam = regexp.MustCompile(`\{([^}:]+):[^}]*\}`)

// normalizeChiPattern writes a chi pattern as the spec's paths are
// normalized: a trailing "*" becomes "{*}", a regexp parameter loses its
// regexp.
func normalizeChiPattern(pattern string) string {
	pattern = chiRegexpParam.ReplaceAllString(pattern, "{$1}")
	if rest, ok := strings.CutSuffix(pattern, "/*"); ok {
		return rest + "/{*}"
	}
	return pattern
}

// routerRoutes walks the gateway's router: normalized pattern -> methods.
func routerRoutes(t *testing.T, g *Gateway) map[string][]string {
	t.Helper()
	routes := map[string][]string{}
	err := chi.Walk(g.rest.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		p := normalizeChiPattern(route)
		if !slices.Contains(routes[p], method) {
			routes[p] = append(routes[p], method)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range routes {
		slices.Sort(routes[p])
	}
	return routes
}

// specOperation is what these tests need of one operation of the spec.
type specOperation struct {
	open      bool                    // "security: []": served without authentication
	responses map[string]specResponse // by status code, or "default"
}

// specResponse is what these tests need of one response of an operation.
type specResponse struct {
	// problemTypes are the slugs its problem+json examples name.
	problemTypes []string
	// requiredHeaders are the headers it marks "required: true".
	requiredHeaders []string
	// properties and required are those of its application/json
	// schema; properties is nil when it has none.
	properties map[string]any
	required   []string
}

// specPaths reads the spec: normalized path -> method -> operation.
func specPaths(t *testing.T) map[string]map[string]specOperation {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	resolve := func(node any) map[string]any {
		m, _ := node.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			var target any = doc
			for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				tm, _ := target.(map[string]any)
				target = tm[tok]
			}
			if target == nil {
				t.Fatalf("%s: $ref %q does not resolve", openAPIPath, ref)
			}
			m, _ = target.(map[string]any)
		}
		return m
	}
	// wildcards returns the names of a parameter list's wildcard path
	// parameters.
	wildcards := func(params any) map[string]bool {
		names := map[string]bool{}
		list, _ := params.([]any)
		for _, p := range list {
			pm := resolve(p)
			if pm["in"] == "path" && pm["x-fencegate-wildcard"] == true {
				names[fmt.Sprint(pm["name"])] = true
			}
		}
		return names
	}
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatalf("%s: no paths", openAPIPath)
	}
	out := map[string]map[string]specOperation{}
	for path, item := range paths {
		pi := resolve(item)
		wild := wildcards(pi["parameters"])
		ops := map[string]specOperation{}
		for _, m := range specMethods {
			op, ok := pi[strings.ToLower(m)]
			if !ok {
				continue
			}
			om := resolve(op)
			for name := range wildcards(om["parameters"]) {
				wild[name] = true
			}
			sec, hasSec := om["security"].([]any)
			so := specOperation{open: hasSec && len(sec) == 0, responses: map[string]specResponse{}}
			responses, _ := om["responses"].(map[string]any)
			for code, r := range responses {
				rm := resolve(r)
				var sr specResponse
				content, _ := rm["content"].(map[string]any)
				problem, _ := content["application/problem+json"].(map[string]any)
				examples, _ := problem["examples"].(map[string]any)
				for slug := range examples {
					sr.problemTypes = append(sr.problemTypes, slug)
				}
				if js, ok := content["application/json"].(map[string]any); ok {
					schema := resolve(js["schema"])
					sr.properties, _ = schema["properties"].(map[string]any)
					list, _ := schema["required"].([]any)
					for _, r := range list {
						sr.required = append(sr.required, fmt.Sprint(r))
					}
				}
				headers, _ := rm["headers"].(map[string]any)
				for name, h := range headers {
					if resolve(h)["required"] == true {
						sr.requiredHeaders = append(sr.requiredHeaders, name)
					}
				}
				so.responses[code] = sr
			}
			ops[m] = so
		}
		segments := strings.Split(path, "/")
		for i, seg := range segments {
			name, ok := strings.CutPrefix(seg, "{")
			name, ok2 := strings.CutSuffix(name, "}")
			if !ok || !ok2 || !wild[name] {
				continue
			}
			if i != len(segments)-1 {
				t.Errorf("%s: %s: wildcard parameter {%s} is not the last segment; chi's * is", openAPIPath, path, name)
			}
			segments[i] = "{*}"
		}
		norm := strings.Join(segments, "/")
		if _, dup := out[norm]; dup {
			t.Errorf("%s: two paths normalize to %s", openAPIPath, norm)
		}
		out[norm] = ops
	}
	return out
}

// TestOpenAPIMatchesRouter walks the router of a gateway with every option
// and the spec's paths, and lists every pattern or method that is in one
// and not the other.
func TestOpenAPIMatchesRouter(t *testing.T) {
	nowhere := &url.URL{Scheme: "http", Host: "127.0.0.1:9"} // never called: no request is served
	router := routerRoutes(t, newOpenAPIGateway(t, Config{}, openAPIStores{}, nowhere, nowhere))
	spec := specPaths(t)
	anyMethods := anyMethod(t)

	var diffs []string
	for _, p := range sortedPaths(router) {
		methods := router[p]
		want := methods
		if slices.Equal(methods, anyMethods) {
			want = specMethods // any method: every one OpenAPI can describe
		}
		for _, m := range want {
			if !slices.Contains(specMethods, m) {
				diffs = append(diffs, fmt.Sprintf("router has %s %s, which OpenAPI 3.1 cannot describe (mount the pattern for any method, or not for %s)", m, p, m))
			}
		}
		ops, ok := spec[p]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("router has %s %s; the spec has no such path", strings.Join(methods, ","), p))
			continue
		}
		for _, m := range want {
			if _, ok := ops[m]; !ok && slices.Contains(specMethods, m) {
				diffs = append(diffs, fmt.Sprintf("router has %s %s; the spec has no such operation", m, p))
			}
		}
		for _, m := range sortedPaths(ops) {
			if !slices.Contains(want, m) {
				diffs = append(diffs, fmt.Sprintf("spec has %s %s; the router does not serve it", m, p))
			}
		}
	}
	for _, p := range sortedPaths(spec) {
		if _, ok := router[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("spec has path %s (%s); the router has no such pattern", p, strings.Join(sortedPaths(spec[p]), ",")))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("api/openapi.yaml and the router disagree (wildcards compare as {*}):\n\t%s", strings.Join(diffs, "\n\t"))
	}
	if len(router) < 5 {
		t.Errorf("router walk found only %d patterns: %v", len(router), router)
	}
}

// TestOpenAPIOpenOperations checks that the operations the spec declares
// open ("security: []") are exactly those on the paths the authentication
// middleware lets through.
func TestOpenAPIOpenOperations(t *testing.T) {
	spec := specPaths(t)
	var diffs []string
	g := newOpenAPIGateway(t, Config{}, openAPIStores{}, &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, &url.URL{Scheme: "http", Host: "127.0.0.1:1"})
	for p, ops := range spec {
		for m, op := range ops {
			open := edge.OpenPath(p) || g.rest.ConsolePath(p) // the console's files are open too
			switch {
			case op.open && !open:
				diffs = append(diffs, fmt.Sprintf("spec says %s %s needs no authentication; the gateway authenticates it", m, p))
			case !op.open && open:
				diffs = append(diffs, fmt.Sprintf("spec says %s %s needs authentication; the gateway serves it open (add security: [])", m, p))
			}
		}
	}
	for _, p := range edge.OpenPaths() {
		if _, ok := spec[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("open path %s is not in the spec", p))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Errorf("api/openapi.yaml and the authentication middleware disagree:\n\t%s", strings.Join(diffs, "\n\t"))
	}
}

// TestOpenAPIUsesEveryOption checks that newOpenAPIGateway passes every
// Option constructor of the package, so that no route group escapes
// TestOpenAPIMatchesRouter.
func TestOpenAPIUsesEveryOption(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
				found = append(found, fn.Name.Name)
			}
		}
	}
	slices.Sort(found)
	passed := sortedPaths(openAPIOptions(openAPIStores{}, &url.URL{}, &url.URL{}))
	if !slices.Equal(found, passed) {
		t.Errorf("Option constructors of package gateway: %v; openAPIOptions has %v: add every one, so that its routes are checked against the spec", found, passed)
	}
}

func sortedPaths[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// openAPIStores is every store the gateway takes, answering each call with
// a fixed value, or with errs[method] when set. It lets
// TestOpenAPIAnswers reach each answer of each route without etcd or S3.
type openAPIStores struct {
	errs   map[string]error
	cached api.Token // CachedHighWaterMark, zero: none
	exists bool      // Observe finds the object
	replay bool      // AdmitPartner answers a stored response
	// Get answers bytes 0-1 of a larger object (206).
	partial bool
	// Get and Head answer NotModified (304).
	notModified bool
}

var (
	_ FenceStore            = openAPIStores{}
	_ ObjectStore           = openAPIStores{}
	_ rest.LockService      = openAPIStores{}
	_ partners.PartnerStore = openAPIStores{}
)

func (s openAPIStores) CachedHighWaterMark(api.Resource) (api.Token, bool) {
	return s.cached, s.cached != 0
}
func (s openAPIStores) FenceCheck(context.Context, api.Resource, api.Token) error {
	return s.errs["FenceCheck"]
}
func (s openAPIStores) FenceCheckRenew(context.Context, api.Resource, api.Token) error {
	return s.errs["FenceCheck"]
}
func (s openAPIStores) CheckNotStale(context.Context, api.Resource, api.Token) error {
	return s.errs["FenceCheck"]
}
func (s openAPIStores) HighWaterMark(context.Context, api.Resource) (api.Token, error) {
	return 7, s.errs["HighWaterMark"]
}
func (s openAPIStores) Observe(context.Context, api.ObjectPath) (api.ObjectVersion, error) {
	if s.exists {
		return api.ObjectVersion{Exists: true, ETag: `"e1"`, Token: 3}, s.errs["Observe"]
	}
	return api.ObjectVersion{}, s.errs["Observe"]
}
func (s openAPIStores) PresignPut(_ context.Context, r api.TicketRequest) (api.Ticket, error) {
	return api.Ticket{Method: "PUT", URL: "http://s3.example/" + r.Path.Bucket + "/" + r.Path.Key + "?X-Amz-Signature=x",
		Headers: map[string]string{"If-None-Match": "*"}, ExpiresAt: time.Unix(1e9, 0)}, s.errs["PresignPut"]
}
func (s openAPIStores) PresignUploadParts(_ context.Context, parts []api.PartTicketRequest) ([]api.Ticket, error) {
	tickets := make([]api.Ticket, len(parts))
	for i, r := range parts {
		tickets[i] = api.Ticket{Method: "PUT", URL: fmt.Sprintf("http://s3.example/%s/%s?partNumber=%d", r.Path.Bucket, r.Path.Key, r.PartNumber), ExpiresAt: time.Unix(1e9, 0)}
	}
	return tickets, s.errs["PresignUploadParts"]
}
func (s openAPIStores) Put(context.Context, api.PutObjectInput) (string, error) {
	return `"e2"`, s.errs["Put"]
}
func (s openAPIStores) Delete(context.Context, api.ObjectPath, string) error {
	return s.errs["Delete"]
}
func (s openAPIStores) Get(context.Context, api.GetObjectInput) (*api.Object, error) {
	if err := s.errs["Get"]; err != nil {
		return nil, err
	}
	if s.notModified {
		return &api.Object{NotModified: true, ETag: `"e1"`, Token: 3}, nil
	}
	obj := &api.Object{Body: io.NopCloser(strings.NewReader("hi")), Size: 2, ETag: `"e1"`, Token: 3}
	if s.partial {
		obj.ContentRange = "bytes 0-1/10"
	}
	return obj, nil
}
func (s openAPIStores) Head(context.Context, api.GetObjectInput) (*api.Object, error) {
	if err := s.errs["Head"]; err != nil {
		return nil, err
	}
	if s.notModified {
		return &api.Object{NotModified: true, ETag: `"e1"`, Token: 3}, nil
	}
	return &api.Object{Size: 2, ETag: `"e1"`, Token: 3}, nil
}
func (s openAPIStores) CreateSession(context.Context, int64, string) (api.Session, error) {
	return api.Session{ID: 0x694d, TTL: 10}, s.errs["CreateSession"]
}
func (s openAPIStores) KeepAlive(_ context.Context, id api.SessionID, _ *string) (api.Session, error) {
	return api.Session{ID: id, TTL: 10}, s.errs["KeepAlive"]
}
func (s openAPIStores) RevokeSession(context.Context, api.SessionID, *string) error {
	return s.errs["RevokeSession"]
}
func (s openAPIStores) Acquire(_ context.Context, name string, session api.SessionID, _ *string, _ time.Duration) (api.LockGrant, error) {
	return api.LockGrant{Name: name, Token: 9, Session: session}, s.errs["Acquire"]
}
func (s openAPIStores) Release(context.Context, string, api.Token, *string) (bool, error) {
	return true, s.errs["Release"]
}
func (s openAPIStores) LockState(_ context.Context, name string, session api.SessionID, _ *string) (api.LockState, error) {
	st := api.LockState{Name: name, Held: true, QueueLength: 1}
	if session != 0 {
		st.Holder = 9
	}
	return st, s.errs["LockState"]
}
func (s openAPIStores) AdmitPartner(context.Context, api.PartnerAdmission) (api.Admission, error) {
	if err := s.errs["AdmitPartner"]; err != nil {
		return api.Admission{}, err
	}
	if s.replay {
		return api.Admission{Replay: &api.StoredResponse{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte("{}")}}, nil
	}
	return api.Admission{Finish: func(context.Context, *api.StoredResponse) error { return nil }, Expires: time.Now().Add(time.Hour)}, nil
}

// TestOpenAPIAnswers serves requests through a gateway with every option
// (stub stores, real partner servers) and checks each answer against the
// operation of the spec that chi routed it to: its status is declared (or
// the operation has a default response), its problem type is one the
// response names, and it has every header the response marks required.
// Requests that no route serves must be 404 not-found or 405
// method-not-allowed, as the spec's introduction says.
func TestOpenAPIAnswers(t *testing.T) {
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	}))
	defer partner.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connections to it are refused: 502, nothing forwarded
	partnerURL, _ := url.Parse(partner.URL)
	goneURL, _ := url.Parse(gone.URL)

	spec := specPaths(t)
	stale := &api.StaleTokenError{Resource: "s3/dev/k", Token: 3, HighWaterMark: 4}
	notOwner := fmt.Errorf("session 694d: %w: the session belongs to another identity", api.ErrForbidden)
	errs := func(method string, err error) openAPIStores {
		return openAPIStores{errs: map[string]error{method: err}}
	}

	tests := []struct {
		name       string
		method     string
		target     string
		header     map[string]string // Authorization defaults to the admin key; "" removes it
		body       string
		cfg        Config
		stores     openAPIStores
		wantStatus int
		wantType   string // problem slug, "" for none
	}{
		{name: "healthz", method: "GET", target: "/healthz", header: map[string]string{"Authorization": ""}, wantStatus: 200},
		{name: "readyz", method: "GET", target: "/readyz", header: map[string]string{"Authorization": ""}, wantStatus: 200},
		{name: "readyz failing", method: "GET", target: "/readyz", header: map[string]string{"Authorization": ""},
			cfg: Config{Readiness: []rest.Probe{{Name: "etcd", Ping: func(context.Context) error { return errors.New("no quorum") }}}}, wantStatus: 503},
		{name: "metrics", method: "GET", target: "/metrics", header: map[string]string{"Authorization": ""}, wantStatus: 200},
		{name: "headers too large", method: "GET", target: "/healthz", header: map[string]string{"X-Big": strings.Repeat("x", 70<<10)}, wantStatus: 431, wantType: "headers-too-large"},
		{name: "target too long", method: "PUT", target: "/v1/objects/dev/" + strings.Repeat("k", 9<<10), wantStatus: 414, wantType: "uri-too-long"},
		{name: "no route", method: "GET", target: "/v2/nothing", wantStatus: 404, wantType: "not-found"},
		{name: "no such method", method: "PATCH", target: "/healthz", wantStatus: 405, wantType: "method-not-allowed"},

		{name: "put created", method: "PUT", target: "/v1/objects/dev/a/b.txt", header: map[string]string{"X-Fence-Token": "5"}, body: "hello", wantStatus: 201},
		{name: "put replaced", method: "PUT", target: "/v1/objects/dev/a/b.txt", header: map[string]string{"X-Fence-Token": "5"}, body: "hello", stores: openAPIStores{exists: true}, wantStatus: 200},
		{name: "put unauthenticated", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"Authorization": "", "X-Fence-Token": "5"}, wantStatus: 401, wantType: "unauthorized"},
		{name: "put forbidden", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"Authorization": "Bearer reader-key", "X-Fence-Token": "5"}, wantStatus: 403, wantType: "forbidden"},
		{name: "put no token", method: "PUT", target: "/v1/objects/dev/k", wantStatus: 428, wantType: "missing-token"},
		{name: "put bad token", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "05"}, wantStatus: 400, wantType: "malformed-token"},
		{name: "put bad bucket", method: "PUT", target: "/v1/objects/Dev/k", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 400, wantType: "invalid-object-path"},
		{name: "put stale cached", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "5"}, stores: openAPIStores{cached: 6}, wantStatus: 409, wantType: "stale-token"},
		{name: "put stale", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("FenceCheck", stale), wantStatus: 409, wantType: "stale-token"},
		{name: "put lock not held", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("FenceCheck", api.ErrLockNotHeld), wantStatus: 409, wantType: "lock-not-held"},
		{name: "put implausible", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("FenceCheck", api.ErrImplausibleToken), wantStatus: 400, wantType: "implausible-token"},
		{name: "put fence unavailable", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("FenceCheck", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "put lost races", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("Put", api.ErrConcurrentModification), wantStatus: 409, wantType: "concurrent-modification"},
		{name: "put no bucket", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("Observe", api.ErrNotFound), wantStatus: 404, wantType: "not-found"},
		{name: "put upstream error", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("Put", api.ErrUpstream), wantStatus: 502, wantType: "upstream-error"},
		{name: "put upstream timeout", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("Put", api.ErrUpstreamTimeout), wantStatus: 504, wantType: "upstream-timeout"},
		{name: "put internal", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("Put", errors.New("boom")), wantStatus: 500, wantType: "internal"},
		{name: "put too large", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, body: "0123456789", cfg: Config{BufferBytes: 4, MaxBodyBytes: 5}, wantStatus: 413, wantType: "body-too-large"},
		{name: "put chunked over buffer", method: "PUT", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3", "Transfer-Encoding": "chunked"}, body: "0123456789", cfg: Config{BufferBytes: 4}, wantStatus: 411, wantType: "length-required"},
		{name: "ticket", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5,"content_type":"text/plain","metadata":{"owner":"ci"}}`, wantStatus: 201},
		{name: "ticket replaces", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: openAPIStores{exists: true}, wantStatus: 201},
		{name: "ticket no token", method: "POST", target: "/v1/tickets/dev/k", body: `{"size":5}`, wantStatus: 428, wantType: "missing-token"},
		{name: "ticket forbidden", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"Authorization": "Bearer reader-key", "X-Fence-Token": "5"}, body: `{"size":5}`, wantStatus: 403, wantType: "forbidden"},
		{name: "ticket stale", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "3"}, body: `{"size":5}`, stores: errs("FenceCheck", stale), wantStatus: 409, wantType: "stale-token"},
		{name: "ticket malformed body", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":"5"}`, wantStatus: 400, wantType: "invalid-request"},
		{name: "ticket too large", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":10}`, cfg: Config{BufferBytes: 4, MaxBodyBytes: 5}, wantStatus: 413, wantType: "body-too-large"},
		{name: "ticket over S3's one PUT", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":6442450944}`, cfg: Config{MaxBodyBytes: 8 << 30}, wantStatus: 413, wantType: "body-too-large"},
		{name: "ticket not implemented", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: errs("PresignPut", api.ErrNotImplemented), wantStatus: 501, wantType: "not-implemented"},
		{name: "ticket no bucket", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: errs("Observe", api.ErrNotFound), wantStatus: 404, wantType: "not-found"},
		{name: "ticket fence unavailable", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: errs("FenceCheck", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "ticket upstream error", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: errs("Observe", api.ErrUpstream), wantStatus: 502, wantType: "upstream-error"},
		{name: "ticket upstream timeout", method: "POST", target: "/v1/tickets/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"size":5}`, stores: errs("Observe", api.ErrUpstreamTimeout), wantStatus: 504, wantType: "upstream-timeout"},
		{name: "complete upload unknown", method: "POST", target: "/v1/uploads/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"upload_id":"u1","parts":[{"part_number":1,"etag":"\"e1\""}]}`, wantStatus: 500, wantType: "internal"},
		{name: "complete upload no token", method: "POST", target: "/v1/uploads/dev/k", body: `{"upload_id":"u1","parts":[{"part_number":1,"etag":"e1"}]}`, wantStatus: 428, wantType: "missing-token"},
		{name: "complete upload forbidden", method: "POST", target: "/v1/uploads/dev/k", header: map[string]string{"Authorization": "Bearer reader-key", "X-Fence-Token": "5"}, body: `{}`, wantStatus: 403, wantType: "forbidden"},
		{name: "complete upload bad body", method: "POST", target: "/v1/uploads/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: `{"upload_id":"u1","parts":[]}`, wantStatus: 400, wantType: "invalid-request"},
		{name: "complete upload body too large", method: "POST", target: "/v1/uploads/dev/k", header: map[string]string{"X-Fence-Token": "5"}, body: strings.Repeat(" ", 2<<20+1), wantStatus: 413, wantType: "body-too-large"},
		{name: "abort upload unknown", method: "DELETE", target: "/v1/uploads/dev/k?upload_id=u1", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 500, wantType: "internal"},
		{name: "abort upload no id", method: "DELETE", target: "/v1/uploads/dev/k", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 400, wantType: "invalid-request"},
		{name: "abort upload no token", method: "DELETE", target: "/v1/uploads/dev/k?upload_id=u1", wantStatus: 428, wantType: "missing-token"},
		{name: "delete", method: "DELETE", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "5"}, stores: openAPIStores{exists: true}, wantStatus: 204},
		{name: "delete stale", method: "DELETE", target: "/v1/objects/dev/k", header: map[string]string{"X-Fence-Token": "3"}, stores: errs("FenceCheck", stale), wantStatus: 409, wantType: "stale-token"},
		{name: "get", method: "GET", target: "/v1/objects/dev/k", wantStatus: 200},
		{name: "get missing", method: "GET", target: "/v1/objects/dev/k", stores: errs("Get", api.ErrNotFound), wantStatus: 404, wantType: "not-found"},
		{name: "head", method: "HEAD", target: "/v1/objects/dev/k", wantStatus: 200},
		{name: "head missing", method: "HEAD", target: "/v1/objects/dev/k", stores: errs("Head", api.ErrNotFound), wantStatus: 404},
		{name: "get range", method: "GET", target: "/v1/objects/dev/k", header: map[string]string{"Range": "bytes=0-1"}, stores: openAPIStores{partial: true}, wantStatus: 206},
		{name: "get not modified", method: "GET", target: "/v1/objects/dev/k", header: map[string]string{"If-None-Match": `"e1"`}, stores: openAPIStores{notModified: true}, wantStatus: 304},
		{name: "get bad If-Match", method: "GET", target: "/v1/objects/dev/k", header: map[string]string{"If-Match": "e1"}, wantStatus: 400, wantType: "invalid-request"},
		{name: "get precondition failed", method: "GET", target: "/v1/objects/dev/k", header: map[string]string{"If-Match": `"e0"`}, stores: errs("Get", api.ErrPreconditionFailed), wantStatus: 412, wantType: "precondition-failed"},
		{name: "get range not satisfiable", method: "GET", target: "/v1/objects/dev/k", header: map[string]string{"Range": "bytes=20-"}, stores: errs("Get", api.ErrRangeNotSatisfiable), wantStatus: 416, wantType: "range-not-satisfiable"},
		{name: "head not modified", method: "HEAD", target: "/v1/objects/dev/k", header: map[string]string{"If-None-Match": `"e1"`}, stores: openAPIStores{notModified: true}, wantStatus: 304},
		{name: "head precondition failed", method: "HEAD", target: "/v1/objects/dev/k", header: map[string]string{"If-Match": `"e0"`}, stores: errs("Head", api.ErrPreconditionFailed), wantStatus: 412},
		{name: "fence", method: "GET", target: "/v1/fences/s3/dev/k", wantStatus: 200},
		{name: "fence unavailable", method: "GET", target: "/v1/fences/s3/dev/k", stores: errs("HighWaterMark", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "list fences", method: "GET", target: "/v1/fences?prefix=s3/dev/&limit=10", wantStatus: 200},
		{name: "list fences bad limit", method: "GET", target: "/v1/fences?limit=0", wantStatus: 400, wantType: "invalid-request"},
		{name: "list fences unauthenticated", method: "GET", target: "/v1/fences", header: map[string]string{"Authorization": ""}, wantStatus: 401, wantType: "unauthorized"},
		{name: "list fences unavailable", method: "GET", target: "/v1/fences", stores: errs("Marks", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "list locks", method: "GET", target: "/v1/locks", wantStatus: 200},
		{name: "list locks after outside prefix", method: "GET", target: "/v1/locks?prefix=a&after=b", wantStatus: 400, wantType: "invalid-request"},
		{name: "list locks unavailable", method: "GET", target: "/v1/locks", stores: errs("Locks", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "list in flight", method: "GET", target: "/v1/inflight?prefix=partner/", wantStatus: 200},
		{name: "list in flight unavailable", method: "GET", target: "/v1/inflight", stores: errs("InFlight", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "console", method: "GET", target: "/ui/", header: map[string]string{"Authorization": ""}, wantStatus: 200},
		{name: "console no such file", method: "GET", target: "/ui/nothing.js", header: map[string]string{"Authorization": ""}, wantStatus: 404},
		{name: "console redirect", method: "GET", target: "/ui", header: map[string]string{"Authorization": ""}, wantStatus: 301},

		{name: "events, prefix too long", method: "GET", target: "/v1/events?prefix=" + strings.Repeat("p", 1200), wantStatus: 400, wantType: "invalid-request"},

		{name: "create session", method: "POST", target: "/v1/sessions", body: `{"ttl": 10}`, wantStatus: 201},
		{name: "create session bad body", method: "POST", target: "/v1/sessions", body: `{"ttl": "x"}`, wantStatus: 400, wantType: "invalid-request"},
		{name: "create session body too large", method: "POST", target: "/v1/sessions", body: strings.Repeat(" ", 5<<10), wantStatus: 413, wantType: "body-too-large"},
		{name: "keepalive", method: "POST", target: "/v1/sessions/694d/keepalive", wantStatus: 200},
		{name: "keepalive gone", method: "POST", target: "/v1/sessions/694d/keepalive", stores: errs("KeepAlive", api.ErrSessionNotFound), wantStatus: 404, wantType: "session-not-found"},
		{name: "keepalive of another identity's session", method: "POST", target: "/v1/sessions/694d/keepalive", stores: errs("KeepAlive", notOwner), wantStatus: 403, wantType: "forbidden"},
		{name: "revoke", method: "DELETE", target: "/v1/sessions/694d", wantStatus: 204},
		{name: "revoke another identity's session", method: "DELETE", target: "/v1/sessions/694d", stores: errs("RevokeSession", notOwner), wantStatus: 403, wantType: "forbidden"},
		{name: "acquire", method: "POST", target: "/v1/locks/report", body: `{"session": "694d", "wait": 1}`, wantStatus: 200},
		{name: "acquire timeout", method: "POST", target: "/v1/locks/report", body: `{"session": "694d"}`, stores: errs("Acquire", api.ErrLockTimeout), wantStatus: 409, wantType: "lock-timeout"},
		{name: "acquire forbidden", method: "POST", target: "/v1/locks/report", header: map[string]string{"Authorization": "Bearer reader-key"}, body: `{"session": "694d"}`, wantStatus: 403, wantType: "forbidden"},
		{name: "release", method: "DELETE", target: "/v1/locks/report?token=9", wantStatus: 200},
		{name: "release another identity's grant", method: "DELETE", target: "/v1/locks/report?token=9", stores: errs("Release", notOwner), wantStatus: 403, wantType: "forbidden"},
		{name: "release bad token", method: "DELETE", target: "/v1/locks/report?token=x", wantStatus: 400, wantType: "malformed-token"},
		{name: "lock state", method: "GET", target: "/v1/locks/report", wantStatus: 200},
		{name: "lock state for the holder's session", method: "GET", target: "/v1/locks/report?session=694d", wantStatus: 200},
		{name: "lock state for another identity's session", method: "GET", target: "/v1/locks/report?session=694d", stores: errs("LockState", notOwner), wantStatus: 403, wantType: "forbidden"},
		{name: "lock state for no session", method: "GET", target: "/v1/locks/report?session=694d", stores: errs("LockState", api.ErrSessionNotFound), wantStatus: 404, wantType: "session-not-found"},
		{name: "lock state bad session", method: "GET", target: "/v1/locks/report?session=0", wantStatus: 400, wantType: "invalid-request"},
		{name: "lock state unavailable", method: "GET", target: "/v1/locks/report", stores: errs("LockState", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},

		{name: "partner forwarded", method: "POST", target: "/v1/partners/payments/accounts/a1/charges", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, body: "{}", wantStatus: 201},
		{name: "partner replayed", method: "POST", target: "/v1/partners/payments/accounts/a1/charges", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, body: "{}", stores: openAPIStores{replay: true}, wantStatus: 201},
		{name: "partner no such route", method: "POST", target: "/v1/partners/nope/x", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 404, wantType: "not-found"},
		{name: "partner method", method: "GET", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 405, wantType: "method-not-allowed"},
		{name: "partner trace", method: "TRACE", target: "/v1/partners/payments", wantStatus: 405, wantType: "method-not-allowed"},
		{name: "partner bad path", method: "POST", target: "/v1/partners/payments/accounts/%2e%2e/x", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, wantStatus: 400, wantType: "invalid-request"},
		{name: "partner no token", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"Idempotency-Key": "k1"}, wantStatus: 428, wantType: "missing-token"},
		{name: "partner no key", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5"}, wantStatus: 400, wantType: "missing-idempotency-key"},
		{name: "partner bad key", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k\x01"}, wantStatus: 400, wantType: "malformed-idempotency-key"},
		{name: "partner forbidden", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"Authorization": "Bearer reader-key", "X-Fence-Token": "5", "Idempotency-Key": "k1"}, wantStatus: 403, wantType: "forbidden"},
		{name: "partner stale", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "3", "Idempotency-Key": "k1"}, stores: errs("AdmitPartner", stale), wantStatus: 409, wantType: "stale-token"},
		{name: "partner key in flight", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, stores: errs("AdmitPartner", api.ErrIdempotencyInFlight), wantStatus: 409, wantType: "idempotency-in-flight"},
		{name: "partner key reused", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, stores: errs("AdmitPartner", api.ErrIdempotencyMismatch), wantStatus: 422, wantType: "idempotency-mismatch"},
		{name: "partner busy", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, stores: errs("AdmitPartner", api.ErrResourceBusy), wantStatus: 503, wantType: "resource-busy"},
		{name: "partner fence unavailable", method: "POST", target: "/v1/partners/payments/accounts/a1", header: map[string]string{"X-Fence-Token": "5", "Idempotency-Key": "k1"}, stores: errs("AdmitPartner", api.ErrUnavailable), wantStatus: 503, wantType: "fence-unavailable"},
		{name: "partner upstream down", method: "POST", target: "/v1/partners/down", header: map[string]string{"X-Fence-Token": "5", "X-Fence-Resource": "acct_1"}, wantStatus: 502, wantType: "upstream-error"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newOpenAPIGateway(t, tt.cfg, tt.stores, partnerURL, goneURL)
			req := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer admin-key")
			for k, v := range tt.header {
				if v == "" {
					req.Header.Del(k)
					continue
				}
				req.Header.Set(k, v)
			}
			if req.Header.Get("Transfer-Encoding") == "chunked" {
				req.Header.Del("Transfer-Encoding")
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			res := rec.Result()
			var body []byte
			if tt.method != http.MethodHead {
				body, _ = io.ReadAll(res.Body)
			}
			gotType := ""
			if res.Header.Get("Content-Type") == api.ContentTypeProblem {
				gotType = "?" // a HEAD answer: no body to read the type from
				var p api.Problem
				if err := json.Unmarshal(body, &p); err == nil {
					gotType = strings.TrimPrefix(p.Type, api.ProblemTypePrefix)
				}
			}
			if res.StatusCode != tt.wantStatus || (tt.wantType != "" && gotType != tt.wantType) {
				t.Fatalf("%s %s = %d %s; want %d %s", tt.method, tt.target, res.StatusCode, gotType, tt.wantStatus, tt.wantType)
			}

			pattern := g.rest.Routes().Find(chi.NewRouteContext(), tt.method, req.URL.Path)
			if pattern == "" {
				if gotType != "not-found" && gotType != "method-not-allowed" {
					t.Errorf("%s %s: no route, and the answer is %d %s; the spec promises not-found or method-not-allowed", tt.method, tt.target, res.StatusCode, gotType)
				}
				return
			}
			path := normalizeChiPattern(pattern)
			op, ok := spec[path][tt.method]
			if !ok {
				t.Fatalf("%s %s: routed to %s, which the spec does not have", tt.method, tt.target, path)
			}
			seen[tt.method+" "+path] = true
			code := strconv.Itoa(res.StatusCode)
			resp, ok := op.responses[code]
			if !ok {
				if resp, ok = op.responses["default"]; !ok {
					t.Fatalf("%s %s: answered %d; the spec's %s %s declares %v", tt.method, tt.target, res.StatusCode, tt.method, path, sortedPaths(op.responses))
				}
			}
			if gotType != "" && gotType != "?" && !slices.Contains(resp.problemTypes, gotType) {
				t.Errorf("%s %s: answered %d %s; the spec's %s %s %s names %v", tt.method, tt.target, res.StatusCode, gotType, tt.method, path, code, resp.problemTypes)
			}
			if resp.properties != nil && res.Header.Get("Content-Type") == "application/json" {
				var members map[string]any
				if err := json.Unmarshal(body, &members); err != nil {
					t.Fatalf("%s %s: answered %d with JSON %q: %v", tt.method, tt.target, res.StatusCode, body, err)
				}
				for _, name := range sortedPaths(members) {
					if resp.properties[name] == nil {
						t.Errorf("%s %s: answered %d with member %q, which the spec's %s %s %s schema does not have", tt.method, tt.target, res.StatusCode, name, tt.method, path, code)
					}
				}
				for _, name := range resp.required {
					if _, ok := members[name]; !ok {
						t.Errorf("%s %s: answered %d without member %q, which the spec's %s %s %s schema requires", tt.method, tt.target, res.StatusCode, name, tt.method, path, code)
					}
				}
			}
			for _, h := range resp.requiredHeaders {
				if res.Header.Get(h) == "" {
					t.Errorf("%s %s: answered %d without %s, which the spec's %s %s %s requires", tt.method, tt.target, res.StatusCode, h, tt.method, path, code)
				}
			}
		})
	}
	// Every operation of the spec was exercised at least once (both
	// partner paths by their shared operation).
	var unexercised []string
	for _, p := range sortedPaths(spec) {
		for _, m := range sortedPaths(spec[p]) {
			if !seen[m+" "+p] && !strings.HasPrefix(p, "/v1/partners/") {
				unexercised = append(unexercised, m+" "+p)
			}
		}
	}
	if len(unexercised) > 0 {
		t.Errorf("operations of the spec that no case exercised: %v", unexercised)
	}
}
