package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"fencegate/api"
)

// Partner routes: ANY /v1/partners/{route}/{path...}, forwarded to the
// route's upstream under the partner fencing protocol: the fence check
// and the resource's in-flight marker in one etcd transaction, at most one request per resource upstream at a time, and
// Idempotency-Key replays. The handler is in partners_handler.go, the
// upstream call in partners_forward.go.

// PartnerRoute is one partner route, ANY /v1/partners/{Name}/{path...},
// forwarded to Upstream + path + query. cmd/fencegate builds it from the
// config file's "partners:" list. Zero durations and limits take the
// defaults noted; negative ones are invalid.
type PartnerRoute struct {
	Name                   string        // path segment after /v1/partners/: [a-z0-9][a-z0-9-]{0,62}
	Upstream               *url.URL      // base URL, http or https, no user info, query or fragment; the only host the route calls
	Methods                []string      // allowed methods, upper case
	Resource               string        // "header" (X-Fence-Resource) or a template over the path after the route, e.g. "accounts/{account}", with at least one {var}
	Timeout                time.Duration // upstream call, default 30s
	MaxWait                time.Duration // wait for the resource's in-flight request before 503, default 5s
	RequireIdempotencyKey  bool
	IdempotencyTTL         time.Duration // completed records, default 24h
	MaxBodyBytes           int64         // request body, default 1 MiB
	MaxStoredResponseBytes int64         // stored for replay, default 1 MiB
	Budget                 PartnerBudget // what the route's completed idempotency records may hold in etcd, default 100,000 records and 256 MiB
	StripHeaders           []string      // request headers never forwarded (on top of the hop-by-hop ones, X-Fence-*, Authorization, Cookie, which are always stripped)
	ForwardHeaders         []string      // routing headers forwarded all the same, by exact name (see CheckForwardHeader); nil: none
	AddHeaders             http.Header   // added upstream, values already resolved (e.g. the partner API key)

	// ResourcePath, with Resource "header", binds the forwarded path to
	// the header's resource: a template over the path after the route,
	// such as "accounts/{resource}", with exactly one {resource}. The path
	// must start with its literal segments and, in place of {resource},
	// the header's value (one segment per '/'-separated part); any other
	// path is refused (400) before authorization, etcd or the upstream.
	// "" binds nothing: the header alone names the resource, whatever the
	// path acts on, which fits only partners whose path names no
	// resource. Invalid with a template Resource, which is the path.
	ResourcePath string
}

// PartnerBudget bounds what completed idempotency records hold in etcd:
// a partner route's (PartnerRoute.Budget), or an identity's over every
// route (Config.PartnerIdentityBudget). A request with an
// Idempotency-Key that would create a record while the budget is used
// up is answered 503 idempotency-budget-exhausted, with Retry-After, and
// nothing is forwarded or written; a retry of a key that has a record is
// still answered from it. Records count from their completion until
// their idempotency_ttl ends (and up to a 24th of it more), for every
// gateway on the etcd cluster (see tokenstore's idempotency_usage.go):
// requests in flight, and what other gateways completed in the last
// second, can go past it.
type PartnerBudget struct {
	// Records bounds the number of records. Zero means
	// DefaultPartnerBudgetRecords; negative means no bound.
	Records int64
	// Bytes bounds their size in etcd (keys and values; a record takes
	// about 300 bytes to 5 KiB: answer bodies over 512 bytes are in the
	// answer store, see WithPartnerAnswers). Zero means
	// DefaultPartnerBudgetBytes; negative means no bound.
	Bytes int64
}

// Defaults of PartnerBudget: enough for a route that completes a
// keyed request a second for a day, at a few hundred bytes each, within
// an eighth of etcd's default quota of 2 GiB.
const (
	DefaultPartnerBudgetRecords = 100_000
	DefaultPartnerBudgetBytes   = 256 << 20
)

// withDefaults fills in the defaults of b's zero fields.
func (b PartnerBudget) withDefaults() PartnerBudget {
	if b.Records == 0 {
		b.Records = DefaultPartnerBudgetRecords
	}
	if b.Bytes == 0 {
		b.Bytes = DefaultPartnerBudgetBytes
	}
	return b
}

// account returns b as the token store's budget of account; a negative
// bound is none.
func (b PartnerBudget) account(account string) api.IdempotencyBudget {
	return api.IdempotencyBudget{Account: account, Records: max(b.Records, 0), Bytes: max(b.Bytes, 0)}
}

// Defaults and limits of partner routes.
const (
	defaultPartnerTimeout        = 30 * time.Second
	defaultPartnerMaxWait        = 5 * time.Second
	defaultIdempotencyTTL        = 24 * time.Hour
	defaultPartnerMaxBody        = 1 << 20
	defaultPartnerMaxStored      = 1 << 20
	maxPartnerStoredResponseSize = 1 << 20 // etcd refuses requests over 1.5 MiB
	// ResourceFromHeader is the PartnerRoute.Resource that takes the
	// resource id from the X-Fence-Resource header.
	ResourceFromHeader = "header"
)

// PartnerStore is what the partner routes need of the token store
// (tokenstore.Partners implements it).
type PartnerStore interface {
	// CachedHighWaterMark returns a lower bound of resource's high-water
	// mark known without a round trip.
	CachedHighWaterMark(resource api.Resource) (api.Token, bool)
	// AdmitPartner runs the fence check and takes the resource's
	// in-flight marker and the request's idempotency record in one
	// transaction, or finds the record's stored response to replay (see
	// api.Admission). Refusals are *api.StaleTokenError,
	// api.ErrImplausibleToken and api.ErrLockNotHeld (the resource's token
	// check), api.ErrResourceBusy, api.ErrIdempotencyInFlight,
	// api.ErrIdempotencyMismatch and api.ErrIdempotencyBudgetExhausted
	// (the claim's budgets are used up, and its key has no record);
	// api.ErrUnavailable means nothing may be forwarded.
	AdmitPartner(ctx context.Context, req api.PartnerAdmission) (api.Admission, error)
}

// AnswerStore keeps the bodies of stored partner answers outside the
// token store, so that etcd keeps only their digests (see
// maxInlineAnswerBytes). The S3 backend implements it (s3.Answers), on a
// bucket and prefix of the gateway's own. Names are those answerName
// makes: 64 hex digits, '/', 16 hex digits.
type AnswerStore interface {
	// PutAnswer stores body under name, replacing any; an error means
	// it may or may not be stored.
	PutAnswer(ctx context.Context, name string, body []byte) error
	// GetAnswer returns the body stored under name: api.ErrNotFound when
	// there is none (it expired, or was deleted); any other error means
	// it could not be read now.
	GetAnswer(ctx context.Context, name string) ([]byte, error)
	// DeleteAnswer deletes it; a name with nothing stored is no error.
	DeleteAnswer(ctx context.Context, name string) error
}

// WithPartnerAnswers makes the partner routes keep answer bodies larger
// than maxInlineAnswerBytes in store, and only their size and digest in
// the idempotency record. Without it, replays of such answers have the
// status and headers, and no body (Idempotent-Body-Omitted: true).
func WithPartnerAnswers(store AnswerStore) Option {
	return func(g *Gateway) { g.answers = store }
}

// WithPartners mounts ANY /v1/partners/{route}/* for routes; New fails if a route is invalid or names repeat.
// client nil: a default with no redirects followed. A client given is
// copied, and its copy never follows redirects either: a redirect would
// take the request to a host the route does not name. Its Timeout, if
// any, applies on top of each route's.
func WithPartners(routes []PartnerRoute, store PartnerStore, client *http.Client) Option {
	return func(g *Gateway) {
		if store != nil {
			store = &instrumentedPartners{PartnerStore: store, m: g.metrics}
		}
		h, err := newPartnerAPI(g, routes, store, client)
		if err != nil {
			g.optionErr = errors.Join(g.optionErr, fmt.Errorf("gateway: partner routes: %w", err))
			return
		}
		g.metrics.registry.MustRegister(h.budgets)
		g.mounts = append(g.mounts, h.mount)
	}
}

// partnerAPI serves the partner routes.
type partnerAPI struct {
	g      *Gateway
	store  PartnerStore
	client *http.Client
	routes map[string]*partnerRoute
	// identityBudget is Config.PartnerIdentityBudget with its defaults.
	identityBudget PartnerBudget
	budgets        *budgetMetrics
}

// partnerRoute is a validated PartnerRoute with its defaults filled in.
type partnerRoute struct {
	PartnerRoute
	methods  map[string]bool
	allow    string // the Allow header of 405 answers
	template resourceTemplate
	strip    map[string]bool // canonical header names
	forward  map[string]bool // canonical names of the routing headers forwarded
}

func newPartnerAPI(g *Gateway, routes []PartnerRoute, store PartnerStore, client *http.Client) (*partnerAPI, error) {
	if store == nil {
		return nil, errors.New("nil partner store")
	}
	h := &partnerAPI{g: g, store: store, client: noRedirects(client), routes: make(map[string]*partnerRoute, len(routes)),
		identityBudget: g.cfg.PartnerIdentityBudget.withDefaults()}
	h.budgets = newBudgetMetrics(h, store)
	for i, rt := range routes {
		route, err := compilePartnerRoute(rt)
		if err != nil {
			return nil, fmt.Errorf("route %d (%q): %w", i+1, rt.Name, err)
		}
		if _, dup := h.routes[route.Name]; dup {
			return nil, fmt.Errorf("route %d: name %q is used twice", i+1, rt.Name)
		}
		h.routes[route.Name] = route
	}
	return h, nil
}

// noRedirects returns a copy of client (or of a default client) that
// answers a redirect as it came instead of following it.
func noRedirects(client *http.Client) *http.Client {
	var c http.Client
	if client != nil {
		c = *client
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		c.Transport = t
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// routeNamePattern is the syntax of a partner route's name, the path
// segment after /v1/partners/.
var routeNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidPartnerRouteName reports whether name may name a PartnerRoute: 1
// to 63 lower-case letters, digits and '-', starting with a letter or
// digit.
func ValidPartnerRouteName(name string) bool { return routeNamePattern.MatchString(name) }

// partnerMethods are the methods a partner route may allow: those the
// router serves (chi answers 405 to any other method before a route sees
// it), less CONNECT and TRACE, which are never forwarded.
var partnerMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// PartnerMethods returns the methods a PartnerRoute may allow, upper case.
func PartnerMethods() []string { return slices.Clone(partnerMethods) }

func compilePartnerRoute(rt PartnerRoute) (*partnerRoute, error) {
	if !routeNamePattern.MatchString(rt.Name) {
		return nil, fmt.Errorf("name %q: want 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", rt.Name)
	}
	if err := checkUpstream(rt.Upstream); err != nil {
		return nil, err
	}
	route := &partnerRoute{PartnerRoute: rt, methods: make(map[string]bool), strip: make(map[string]bool), forward: make(map[string]bool)}
	if len(rt.Methods) == 0 {
		return nil, errors.New("methods: list at least one")
	}
	for _, m := range rt.Methods {
		if !slices.Contains(partnerMethods, m) {
			return nil, fmt.Errorf("methods: %q is not one of %s", m, strings.Join(partnerMethods, ", "))
		}
		route.methods[m] = true
	}
	route.allow = strings.Join(rt.Methods, ", ")
	tmpl, err := parseResourceTemplate(rt.Resource)
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	if tmpl.pathBinding, err = compileResourcePath(rt.Resource, rt.ResourcePath); err != nil {
		return nil, fmt.Errorf("resource_path: %w", err)
	}
	route.template = tmpl
	for _, err := range []error{
		defaultIfZero("timeout", &route.Timeout, defaultPartnerTimeout),
		defaultIfZero("max_wait", &route.MaxWait, defaultPartnerMaxWait),
		defaultIfZero("idempotency_ttl", &route.IdempotencyTTL, defaultIdempotencyTTL),
		defaultIfZero("max_body_bytes", &route.MaxBodyBytes, defaultPartnerMaxBody),
		defaultIfZero("max_stored_response_bytes", &route.MaxStoredResponseBytes, defaultPartnerMaxStored),
	} {
		if err != nil {
			return nil, err
		}
	}
	if route.MaxStoredResponseBytes > maxPartnerStoredResponseSize {
		return nil, fmt.Errorf("max_stored_response_bytes: %d is over %d (etcd's request limit is 1.5 MiB)", route.MaxStoredResponseBytes, maxPartnerStoredResponseSize)
	}
	for _, name := range rt.StripHeaders {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("strip_headers: %q is not a header name", name)
		}
		route.strip[http.CanonicalHeaderKey(name)] = true
	}
	for _, name := range rt.ForwardHeaders {
		if err := CheckForwardHeader(name); err != nil {
			return nil, fmt.Errorf("forward_headers: %w", err)
		}
		if route.strip[http.CanonicalHeaderKey(name)] {
			return nil, fmt.Errorf("forward_headers: %s is in strip_headers too", http.CanonicalHeaderKey(name))
		}
		route.forward[http.CanonicalHeaderKey(name)] = true
	}
	route.Budget = rt.Budget.withDefaults()
	route.AddHeaders = make(http.Header, len(rt.AddHeaders))
	for name, values := range rt.AddHeaders {
		canonical := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			return nil, fmt.Errorf("add_headers: %q is not a header name", name)
		case isHopByHop(canonical), strings.HasPrefix(canonical, "X-Fence-"), canonical == "Host",
			canonical == api.HeaderIdempotencyKey, canonical == "Content-Length":
			return nil, fmt.Errorf("add_headers: %s is set by the gateway", canonical)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("add_headers: %s: value holds a line break or NUL", canonical)
			}
		}
		route.AddHeaders[canonical] = append([]string(nil), values...)
	}
	return route, nil
}

// CheckForwardHeader reports whether name may be listed in a
// PartnerRoute's ForwardHeaders: a routing header that partner routes
// strip by default (X-HTTP-Method-Override, X-HTTP-Method,
// X-Method-Override, X-Original-URL, X-Rewrite-URL, X-Real-IP, or
// X-Forwarded-* other than X-Forwarded-Host), spelled with dashes. The
// route then forwards the client's header of that name (any case), and
// still strips its underscore spellings.
func CheckForwardHeader(name string) error {
	switch {
	case !validHeaderName(name):
		return fmt.Errorf("%q is not a header name", name)
	case neverForwarded(name):
		return fmt.Errorf("%s is never forwarded", http.CanonicalHeaderKey(name))
	case strings.Contains(name, "_"):
		return fmt.Errorf("%s: a name with an underscore is never forwarded (servers may read it as one with dashes); spell it with dashes", name)
	case !isRoutingHeader(name):
		return fmt.Errorf("%s is not stripped: forward_headers lists routing headers the gateway strips by default (X-Forwarded-*, X-Real-IP, X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, X-Original-URL, X-Rewrite-URL)", http.CanonicalHeaderKey(name))
	}
	return nil
}

// checkUpstream validates a route's upstream base URL.
func checkUpstream(u *url.URL) error {
	switch {
	case u == nil:
		return errors.New("upstream: missing")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("upstream %q: scheme must be http or https", u.Redacted())
	case u.Opaque != "" || u.Host == "":
		return fmt.Errorf("upstream %q: want an absolute URL with a host", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("upstream %q: user info is not allowed (use add_headers for credentials)", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("upstream %q: a query is not allowed", u.Redacted())
	case u.Fragment != "" || u.RawFragment != "":
		return fmt.Errorf("upstream %q: a fragment is not allowed", u.Redacted())
	}
	if u.Path != "" {
		if _, err := api.ParsePartnerPath(strings.Trim(u.EscapedPath(), "/")); err != nil {
			return fmt.Errorf("upstream %q: base path: %w", u.Redacted(), err)
		}
	}
	return nil
}

// validHeaderName reports whether s is an HTTP header field name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func (h *partnerAPI) mount(r chi.Router) {
	r.HandleFunc("/v1/partners/{route}", h.serve)
	r.HandleFunc("/v1/partners/{route}/*", h.serve)
}

// CheckResourceTemplate reports whether s is a valid Resource value ("header" or a template).
func CheckResourceTemplate(s string) error {
	_, err := parseResourceTemplate(s)
	return err
}

// resourceTemplate derives a request's resource id: from the
// X-Fence-Resource header, or from the leading segments of the path below
// the route.
type resourceTemplate struct {
	fromHeader bool
	// pathBinding, in header mode, is the parsed ResourcePath (nil: none).
	pathBinding *resourcePath
	// segments: each a literal, or a variable ("{name}") that matches any
	// one segment.
	segments []templateSegment
}

type templateSegment struct {
	literal  string
	variable string // "" for a literal
}

var templateVariablePattern = regexp.MustCompile(`^\{[A-Za-z_][A-Za-z0-9_]{0,62}\}$`)

// parseResourceTemplate parses a PartnerRoute.Resource: "header", or
// slash-separated segments, each a literal (no braces, '%', '\', spaces or
// control characters, not "." or "..") or a {variable}, at least one of
// them a variable.
func parseResourceTemplate(s string) (resourceTemplate, error) {
	if s == ResourceFromHeader {
		return resourceTemplate{fromHeader: true}, nil
	}
	if s == "" {
		return resourceTemplate{}, errors.New(`missing: want "header" or a template such as "accounts/{account}"`)
	}
	if len(s) > 256 {
		return resourceTemplate{}, errors.New("template longer than 256 bytes")
	}
	var t resourceTemplate
	seen := map[string]bool{}
	for _, seg := range strings.Split(s, "/") {
		switch {
		case templateVariablePattern.MatchString(seg):
			name := seg[1 : len(seg)-1]
			if seen[name] {
				return resourceTemplate{}, fmt.Errorf("template %q: variable {%s} appears twice", s, name)
			}
			seen[name] = true
			t.segments = append(t.segments, templateSegment{variable: name})
		case seg == "" || seg == "." || seg == "..":
			return resourceTemplate{}, fmt.Errorf("template %q: empty, \".\" or \"..\" segment", s)
		case strings.ContainsAny(seg, "{}%\\ ") || hasControl(seg):
			return resourceTemplate{}, fmt.Errorf("template %q: segment %q is neither a literal nor a {variable}", s, seg)
		default:
			t.segments = append(t.segments, templateSegment{literal: seg})
		}
	}
	if len(seen) == 0 {
		return resourceTemplate{}, fmt.Errorf("template %q: no {variable}: every request would share one resource", s)
	}
	return t, nil
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// resourceID returns the request's resource id: the X-Fence-Resource
// header's value (once the path is found to carry it, if the route binds
// the path), or the path segments the template matches, joined by '/'.
// Failures are api.ErrInvalidRequest.
func (t resourceTemplate) resourceID(header http.Header, path api.PartnerPath) (string, error) {
	if t.fromHeader {
		id, err := parseResourceHeader(header.Values(api.HeaderFenceResource))
		if err != nil {
			return "", err
		}
		if err := t.pathBinding.check(id, path); err != nil {
			return "", err
		}
		return id, nil
	}
	if len(path.Segments) < len(t.segments) {
		return "", fmt.Errorf("%w: the path has fewer segments than the route's resource template", api.ErrInvalidRequest)
	}
	id := make([]string, len(t.segments))
	for i, seg := range t.segments {
		got := path.Segments[i]
		if seg.variable == "" && got != seg.literal {
			return "", fmt.Errorf("%w: path segment %d is %q; the route's resource template wants %q", api.ErrInvalidRequest, i+1, got, seg.literal)
		}
		id[i] = got
	}
	joined := strings.Join(id, "/")
	if len(joined) > api.MaxPartnerResourceBytes {
		return "", fmt.Errorf("%w: resource id longer than %d bytes", api.ErrInvalidRequest, api.MaxPartnerResourceBytes)
	}
	return joined, nil
}

// parseResourceHeader validates the X-Fence-Resource header: exactly one
// value of 1 to 512 printable ASCII characters other than space, whose
// '/'-separated segments are neither empty nor "." or "..".
func parseResourceHeader(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("%w: want exactly one %s header, got %d", api.ErrInvalidRequest, api.HeaderFenceResource, len(values))
	}
	v := values[0]
	if v == "" || len(v) > api.MaxPartnerResourceBytes {
		return "", fmt.Errorf("%w: %s must be 1 to %d characters", api.ErrInvalidRequest, api.HeaderFenceResource, api.MaxPartnerResourceBytes)
	}
	if !visibleASCII(v) {
		return "", fmt.Errorf("%w: %s may hold only printable ASCII characters other than space", api.ErrInvalidRequest, api.HeaderFenceResource)
	}
	for _, seg := range strings.Split(v, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: %s may not have empty, \".\" or \"..\" segments", api.ErrInvalidRequest, api.HeaderFenceResource)
		}
	}
	return v, nil
}

// defaultIfZero sets *v to def when it is zero, and refuses a negative
// duration or limit, naming its field.
func defaultIfZero[T time.Duration | int64](name string, v *T, def T) error {
	switch {
	case *v < 0:
		if d, ok := any(*v).(time.Duration); ok {
			return fmt.Errorf("%s: negative duration %v", name, d)
		}
		return fmt.Errorf("%s: negative limit %d", name, *v)
	case *v == 0:
		*v = def
	}
	return nil
}
