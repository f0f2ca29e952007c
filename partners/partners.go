package partners

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
	"fencegate/internal/fielderr"
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
	ForwardHeaders         []string      // routing headers forwarded all the same, by exact name (see Validate); nil: none
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

	// UnboundPath, with Resource "header" and no ResourcePath, says so
	// on purpose: the partner's path names no resource (such as POST
	// /send, with the recipient in the body). Without it, New refuses
	// such a route while an identity may write only part of it (see
	// ValidatePartnerGrants): that identity could name a resource it may
	// write in the header and act on another in the path. Invalid with
	// ResourcePath or a template Resource.
	UnboundPath bool
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
	defaultPartnerTimeout   = 30 * time.Second
	defaultPartnerMaxWait   = 5 * time.Second
	defaultIdempotencyTTL   = 24 * time.Hour
	defaultPartnerMaxBody   = 1 << 20
	defaultPartnerMaxStored = 1 << 20
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

// Config is what the partner door is built from.
type Config struct {
	// Routes are the partner routes, each ANY /v1/partners/{Name}/*. New
	// fails if a route is invalid or names repeat (ValidatePartnerRoutes).
	Routes []PartnerRoute
	// IdentityBudget bounds what the completed idempotency records of
	// each identity ("" without auth is one), over every partner route,
	// may hold in etcd. Zero fields take PartnerBudget's defaults.
	IdentityBudget PartnerBudget
	// BufferBudgetBytes is the engine's budget of buffered bodies, which
	// partner bodies are held in: a route whose MaxBodyBytes is larger is
	// refused, since every body above it would be. Zero means no check.
	BufferBudgetBytes int64
	// BeforeCall runs after a request was admitted, before the check that
	// its in-flight marker outlives the call and the call itself. Nil in
	// production; tests pause a request there.
	BeforeCall func(ctx context.Context, resource api.Resource, token api.Token)
}

// API serves the partner routes. Create it with New; mount its routes on
// a router with Mount, under the edge's middleware (edge.Edge.Track,
// request size bounds, authentication).
type API struct {
	edge    *edge.Edge
	engine  *fence.Engine
	store   PartnerStore
	answers AnswerStore
	client  *http.Client
	routes  map[string]*partnerRoute
	// identityBudget is Config.IdentityBudget with its defaults.
	identityBudget PartnerBudget
	budgets        *budgetMetrics
	beforeCall     func(ctx context.Context, resource api.Resource, token api.Token)
}

// New returns the partner door for cfg on e (identities, logs, metrics,
// the event feed) and engine (its budget of buffered bodies), admitting
// requests with store. answers, when not nil, keeps answer bodies larger
// than maxInlineAnswerBytes, and only their size and digest in the
// idempotency record; without it, replays of such answers have the status
// and headers, and no body (Idempotent-Body-Omitted: true). client nil: a
// default with no redirects followed. A client given is copied, and its
// copy never follows redirects either: a redirect would take the request
// to a host the route does not name. Its Timeout, if any, applies on top
// of each route's. The door's metrics are registered on e's registry.
func New(cfg Config, e *edge.Edge, engine *fence.Engine, store PartnerStore, answers AnswerStore, client *http.Client) (*API, error) {
	if e == nil || engine == nil || store == nil {
		return nil, errors.New("partners: nil edge, engine or partner store")
	}
	if err := ValidatePartnerRoutes(cfg.Routes); err != nil {
		return nil, err
	}
	store = &instrumentedPartners{PartnerStore: store, edge: e}
	h := &API{edge: e, engine: engine, store: store, answers: answers, client: noRedirects(client),
		routes: make(map[string]*partnerRoute, len(cfg.Routes)), identityBudget: cfg.IdentityBudget.withDefaults(), beforeCall: cfg.BeforeCall}
	h.budgets = newBudgetMetrics(h, store)
	for _, rt := range cfg.Routes {
		route, err := compilePartnerRoute(rt)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", rt.Name, err)
		}
		// Partner bodies are buffered within the budget of buffered
		// bodies (readBody): a larger one could never be taken.
		if cfg.BufferBudgetBytes > 0 && route.MaxBodyBytes > cfg.BufferBudgetBytes {
			return nil, fmt.Errorf("%q: max_body_bytes %s is over the memory for buffered bodies, %s (limits.buffer_budget_bytes): every body above it would be refused; lower one or raise the other",
				rt.Name, fielderr.Size(route.MaxBodyBytes), fielderr.Size(cfg.BufferBudgetBytes))
		}
		h.routes[route.Name] = route
		h.budgets.setLimits(route)
	}
	e.Registry().MustRegister(h.budgets)
	return h, nil
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

// ValidatePartnerRouteName checks that name may name a PartnerRoute: 1 to 63
// lower-case letters, digits and '-', starting with a letter or digit.
// Token checks that name a route (tokenstore.Policy prefixes
// partner/ROUTE/) use it too.
func ValidatePartnerRouteName(name string) error {
	if !routeNamePattern.MatchString(name) {
		return fmt.Errorf("%q: want lower-case letters, digits and -, starting with a letter or digit, at most 63", name)
	}
	return nil
}

// partnerMethods are the methods a partner route may allow: those the
// router serves (chi answers 405 to any other method before a route sees
// it), less CONNECT and TRACE, which are never forwarded.
var partnerMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// Limits of partner routes' sizes: bodies are held in memory, and a
// stored answer goes into one etcd request, which etcd refuses over
// 1.5 MiB.
const (
	maxPartnerBodyBytes          = 1 << 30
	maxPartnerStoredResponseSize = 1 << 20
)

// ValidatePartnerRoutes checks routes as WithPartners does: each route
// (see PartnerRoute.Validate), and that no name is used twice. Errors are
// *fielderr.Error, joined, with paths such as partners[1].upstream.
func ValidatePartnerRoutes(routes []PartnerRoute) error {
	var errs []error
	first := make(map[string]int, len(routes))
	for i, rt := range routes {
		path := fmt.Sprintf("partners[%d]", i)
		if err := rt.validate(path); err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := first[rt.Name]; dup {
			errs = append(errs, &fielderr.Error{Field: path + ".name", First: fmt.Sprintf("partners[%d].name", j), Err: fmt.Errorf("route %q is defined twice", rt.Name)})
			continue
		}
		first[rt.Name] = i
	}
	return errors.Join(errs...)
}

// Validate checks the route: its name, its upstream (see ParseUpstream),
// its methods, its resource and resource path, that no duration or limit
// is negative nor over its bound, and its header lists. Errors are
// *fielderr.Error, joined, with paths such as upstream or methods[1].
func (rt PartnerRoute) Validate() error { return rt.validate("") }

// validate is Validate with paths under prefix.
func (rt PartnerRoute) validate(prefix string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		if prefix != "" {
			field = prefix + "." + field
		}
		errs = append(errs, fielderr.Errorf(field, format, args...))
	}
	at := func(field string, err error) {
		if err != nil {
			bad(field, "%w", err)
		}
	}
	at("name", ValidatePartnerRouteName(rt.Name))
	if rt.Upstream == nil {
		bad("upstream", "missing")
	} else {
		at("upstream", validateUpstream(rt.Upstream))
	}
	if len(rt.Methods) == 0 {
		bad("methods", "empty; want at least one method, such as [POST]")
	}
	for i, m := range rt.Methods {
		switch {
		case !slices.Contains(partnerMethods, m):
			bad(fmt.Sprintf("methods[%d]", i), "unknown method %q (want one of %s, in upper case)", m, strings.Join(partnerMethods, ", "))
		case slices.Contains(rt.Methods[:i], m):
			bad(fmt.Sprintf("methods[%d]", i), "%s is listed twice", m)
		}
	}
	if _, err := parseResourceTemplate(rt.Resource); err != nil {
		at("resource", err)
	} else if _, err := compileResourcePath(rt.Resource, rt.ResourcePath); err != nil {
		at("resource_path", err)
	} else {
		at("unbound_path", validateUnboundPath(rt))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"timeout", rt.Timeout}, {"max_wait", rt.MaxWait}, {"idempotency_ttl", rt.IdempotencyTTL}} {
		if d.v < 0 {
			bad(d.field, "negative duration %v", d.v)
		}
	}
	for _, l := range []struct {
		field   string
		v, most int64
		why     string
	}{
		{"max_body_bytes", rt.MaxBodyBytes, maxPartnerBodyBytes, "bodies are held in memory"},
		{"max_stored_response_bytes", rt.MaxStoredResponseBytes, maxPartnerStoredResponseSize, "etcd's request limit is 1.5 MiB"},
	} {
		switch {
		case l.v < 0:
			bad(l.field, "negative limit %d", l.v)
		case l.v > l.most:
			bad(l.field, "%s is over %s (%s)", fielderr.Size(l.v), fielderr.Size(l.most), l.why)
		}
	}
	strip := make(map[string]bool, len(rt.StripHeaders))
	for i, name := range rt.StripHeaders {
		if !validHeaderName(name) {
			bad(fmt.Sprintf("strip_headers[%d]", i), "%q is not a header name", name)
		}
		strip[http.CanonicalHeaderKey(name)] = true
	}
	for i, name := range rt.ForwardHeaders {
		field := fmt.Sprintf("forward_headers[%d]", i)
		if err := validateForwardHeader(name); err != nil {
			at(field, err)
		} else if strip[http.CanonicalHeaderKey(name)] {
			bad(field, "%s is in strip_headers too", http.CanonicalHeaderKey(name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rt.AddHeaders)) {
		canonical := http.CanonicalHeaderKey(name)
		field := "add_headers." + canonical
		switch {
		case !validHeaderName(name):
			bad(field, "%q is not a header name", name)
			continue
		case setByGateway(canonical):
			bad(field, "%s is set by the gateway", canonical)
			continue
		}
		for _, v := range rt.AddHeaders[name] {
			if !validHeaderValue(v) {
				// The value is not quoted: it may hold a secret.
				bad(field, "not a valid header value (empty, or with control characters)")
				break
			}
		}
	}
	return errors.Join(errs...)
}

// setByGateway reports whether a partner request's header (by canonical
// name) is the gateway's to set, so that a route's AddHeaders may not:
// the hop-by-hop headers, Host, X-Fence-*, the idempotency key it derives
// (upstreamIdempotencyKey) and the body's length.
func setByGateway(canonical string) bool {
	return isHopByHop(canonical) || strings.HasPrefix(canonical, "X-Fence-") || canonical == "Host" ||
		canonical == api.HeaderIdempotencyKey || canonical == "Content-Length"
}

func compilePartnerRoute(rt PartnerRoute) (*partnerRoute, error) {
	if err := rt.Validate(); err != nil {
		return nil, err
	}
	route := &partnerRoute{PartnerRoute: rt, methods: make(map[string]bool), strip: make(map[string]bool), forward: make(map[string]bool)}
	for _, m := range rt.Methods {
		route.methods[m] = true
	}
	route.allow = strings.Join(rt.Methods, ", ")
	tmpl, err := parseResourceTemplate(rt.Resource)
	if err != nil {
		return nil, err
	}
	if tmpl.pathBinding, err = compileResourcePath(rt.Resource, rt.ResourcePath); err != nil {
		return nil, err
	}
	route.template = tmpl
	defaultIfZero(&route.Timeout, defaultPartnerTimeout)
	defaultIfZero(&route.MaxWait, defaultPartnerMaxWait)
	defaultIfZero(&route.IdempotencyTTL, defaultIdempotencyTTL)
	defaultIfZero(&route.MaxBodyBytes, defaultPartnerMaxBody)
	defaultIfZero(&route.MaxStoredResponseBytes, defaultPartnerMaxStored)
	for _, name := range rt.StripHeaders {
		route.strip[http.CanonicalHeaderKey(name)] = true
	}
	for _, name := range rt.ForwardHeaders {
		route.forward[http.CanonicalHeaderKey(name)] = true
	}
	route.Budget = rt.Budget.withDefaults()
	route.AddHeaders = make(http.Header, len(rt.AddHeaders))
	for name, values := range rt.AddHeaders {
		route.AddHeaders[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	return route, nil
}

// validateForwardHeader reports whether name may be listed in a
// PartnerRoute's ForwardHeaders: a routing header that partner routes
// strip by default (X-HTTP-Method-Override, X-HTTP-Method,
// X-Method-Override, X-Original-URL, X-Rewrite-URL, X-Real-IP, or
// X-Forwarded-* other than X-Forwarded-Host), spelled with dashes. The
// route then forwards the client's header of that name (any case), and
// still strips its underscore spellings.
func validateForwardHeader(name string) error {
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

// ParseUpstream parses a route's upstream base URL and checks it (see
// PartnerRoute.Upstream). Its messages do not name the field.
func ParseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	if err := validateUpstream(u); err != nil {
		return nil, err
	}
	if strings.Contains(s, "#") { // an empty fragment, which url.URL does not keep
		return nil, fmt.Errorf("%q has a fragment", u.Redacted())
	}
	return u, nil
}

// validateUpstream checks a route's upstream base URL: http or https, with
// a host, without user info, query or fragment, and a base path that is
// a partner path.
func validateUpstream(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q not allowed, want http or https", u.Scheme)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host; want a URL such as https://api.example.com/v1", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("%q has user info: put credentials in add_headers, from the environment", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("%q has a query: the route forwards the client's query", u.Redacted())
	case u.Fragment != "" || u.RawFragment != "":
		return fmt.Errorf("%q has a fragment", u.Redacted())
	}
	if u.Path != "" {
		if _, err := api.ParsePartnerPath(strings.Trim(u.EscapedPath(), "/")); err != nil {
			return fmt.Errorf("%q: base path: %w", u.Redacted(), err)
		}
	}
	return nil
}

// validHeaderName reports whether s is a header field name: an RFC 9110
// token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s may be sent as a header value: not
// empty, visible characters, spaces and tabs, without leading or
// trailing space.
func validHeaderValue(s string) bool {
	if s == "" || s != strings.TrimSpace(s) {
		return false
	}
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Mount adds the partner routes to r.
func (h *API) Mount(r chi.Router) {
	r.HandleFunc("/v1/partners/{route}", h.serve)
	r.HandleFunc("/v1/partners/{route}/*", h.serve)
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
		case strings.ContainsAny(seg, "{}%\\ ") || fielderr.HasControl(seg):
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
	if !api.VisibleASCII(v) {
		return "", fmt.Errorf("%w: %s may hold only printable ASCII characters other than space", api.ErrInvalidRequest, api.HeaderFenceResource)
	}
	for _, seg := range strings.Split(v, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: %s may not have empty, \".\" or \"..\" segments", api.ErrInvalidRequest, api.HeaderFenceResource)
		}
	}
	return v, nil
}

// defaultIfZero sets *v to def when it is zero (Validate refused
// negative ones).
func defaultIfZero[T time.Duration | int64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// instrumentedPartners times the partner routes' admissions (their fence
// checks) like the object routes' fence checks, and traces them.
type instrumentedPartners struct {
	PartnerStore
	edge *edge.Edge
}

// AdmitPartner times and traces the admission as the edge times fence
// checks (edge.Edge.TimeAdmission).
func (p *instrumentedPartners) AdmitPartner(ctx context.Context, req api.PartnerAdmission) (api.Admission, error) {
	return p.edge.TimeAdmission(ctx, req, p.PartnerStore.AdmitPartner)
}
