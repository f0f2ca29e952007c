package edge

// Authentication and authorization. The authenticate middleware finds out
// who sends a request (a bearer API key or a verified mTLS client
// certificate) and records the identity in the request's context; each
// handler then calls authorize once it knows the resource, before it
// touches etcd or S3, so that a refused request changes nothing (a
// forbidden write never raises a high-water mark).

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"fencegate/api"
	"fencegate/fence"
	"fencegate/internal/fielderr"
)

// Operation is what an identity may do to the resources under a prefix:
// the engine's accesses (package fence asks the edge about them), and
// the doors' own.
type Operation = fence.Access

// Operations that grants name.
const (
	OpRead             = fence.Read   // GET and HEAD of objects, GET of fences
	OpWrite            = fence.Write  // PUT of objects, partner requests
	OpDelete           = fence.Delete // DELETE of objects
	OpLock   Operation = "lock"       // sessions and locks
	OpAdmin  Operation = "admin"      // everything
)

// operations lists every operation that a grant may name.
var operations = []Operation{OpRead, OpWrite, OpDelete, OpLock, OpAdmin}

// Grant lets an identity do Operations to every resource whose name
// starts with Prefix ("" is every resource). Resource names are the fence
// store's: "s3/<bucket>/<key>" for objects (and for GET /v1/fences),
// "partner/<route>/<resource-id>" for partner requests, and the lock's
// name for /v1/locks/{name}. Sessions have no resource: a grant of
// OpLock (or OpAdmin) on a prefix that lock names can have (no '/')
// allows them. OpAdmin allows every operation.
type Grant struct {
	Prefix     string
	Operations []Operation
}

// Identity is a client that the gateway knows, with what it may do.
type Identity struct {
	Name   string
	Grants []Grant
	// S3Keys are the identity's access keys for the S3 API (AWS Signature
	// Version 4); nil: it has none. Its grants apply there as on the REST
	// API.
	S3Keys []S3Key
}

// S3Key is an access key of the S3 API: a client names it by AccessKeyID
// and signs its requests with SecretAccessKey.
type S3Key struct {
	AccessKeyID     string
	SecretAccessKey Secret
}

// Secret is a credential that formatting, logs and JSON never show: they
// print [REDACTED]. string(s) is the secret itself.
type Secret string

// redacted is what a Secret prints.
const redacted = "[REDACTED]"

// String returns [REDACTED], never the secret.
func (Secret) String() string { return redacted }

// GoString returns [REDACTED], for %#v.
func (Secret) GoString() string { return redacted }

// LogValue returns [REDACTED], for log/slog.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns [REDACTED], for encoding/json and the like.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// s3AccessKeyIDPattern is the syntax of an S3 access key id: it is part
// of a signature's credential scope (ID/date/region/s3/aws4_request), so
// it has no '/', and logs may name it.
var s3AccessKeyIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{2,127}$`)

// APIKey is a bearer key, stored as the SHA-256 of the key, that
// authenticates as the identity named Identity.
type APIKey struct {
	SHA256   [32]byte
	Identity string
}

// ClientCert maps an mTLS client certificate, by its subject common name,
// to the identity named Identity. The TLS listener verifies the chain.
type ClientCert struct {
	CommonName string
	Identity   string
}

// Auth configures authentication and authorization. The zero Auth turns
// both off: every request is allowed, as identity "".
type Auth struct {
	Identities  []Identity
	APIKeys     []APIKey
	ClientCerts []ClientCert
}

// Enabled reports whether a configures any credential (an API key, a
// client certificate or an S3 access key), that is, whether WithAuth(a)
// authenticates requests at all. With S3 access keys only, every request
// of the REST API is refused (401): none can authenticate.
func (a Auth) Enabled() bool {
	return len(a.APIKeys) > 0 || len(a.ClientCerts) > 0 || slices.ContainsFunc(a.Identities, func(id Identity) bool { return len(id.S3Keys) > 0 })
}

// identityNamePattern is the syntax of an identity's name, which logs and
// audit lines show and idempotency keys are scoped by.
var identityNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Validate checks that a is consistent: identities have unique names of
// letters, digits, '.', '_', '@' and '-'; every grant names known
// operations, and its prefix has no control characters; every key and
// certificate names a known identity; no key hash, S3 access key id or
// common name is configured twice, and no common name has control
// characters; S3 access key ids are 3 to 128 letters, digits, '.', '_'
// and '-', and their secrets are not empty and have no spaces or control
// characters; and identities come with a credential. Errors are
// *fielderr.Error, joined, with paths such as identities[0].name, api_keys[2]
// or identities[1].s3_keys[0].secret; they never quote a key or a
// secret.
func (a Auth) Validate() error {
	var errs []error
	bad := func(field, first, format string, args ...any) {
		errs = append(errs, &fielderr.Error{Field: field, First: first, Err: fmt.Errorf(format, args...)})
	}
	if len(a.Identities) > 0 && !a.Enabled() {
		bad("identities", "", "configured, but no API key, client certificate or S3 access key authenticates as any of them")
	}
	names := make(map[string]int, len(a.Identities))
	s3IDs := map[string]string{} // access key id to its path
	for i, id := range a.Identities {
		path := fmt.Sprintf("identities[%d]", i)
		switch j, dup := names[id.Name]; {
		case id.Name == "":
			bad(path, "", "empty name")
		case !identityNamePattern.MatchString(id.Name):
			bad(path+".name", "", "%q: want letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 64", id.Name)
		case dup:
			bad(path+".name", fmt.Sprintf("identities[%d].name", j), "identity %q is defined twice", id.Name)
		default:
			names[id.Name] = i
		}
		for j, gr := range id.Grants {
			grant := fmt.Sprintf("%s.grants[%d]", path, j)
			if fielderr.HasControl(gr.Prefix) {
				bad(grant+".prefix", "", "control characters in a prefix")
			}
			if len(gr.Operations) == 0 {
				bad(grant, "", "no operations")
			}
			for k, op := range gr.Operations {
				if !slices.Contains(operations, op) {
					bad(fmt.Sprintf("%s.operations[%d]", grant, k), "", "unknown operation %q (want one of %s)", op, operationList())
				}
			}
		}
		for j, k := range id.S3Keys {
			key := fmt.Sprintf("%s.s3_keys[%d]", path, j)
			first, dup := s3IDs[k.AccessKeyID]
			switch {
			case !s3AccessKeyIDPattern.MatchString(k.AccessKeyID):
				bad(key+".access_key_id", "", "%s: want 3 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", quoteID(k.AccessKeyID))
			case dup:
				bad(key+".access_key_id", first, "access key id %q is configured twice", k.AccessKeyID)
			default:
				s3IDs[k.AccessKeyID] = key + ".access_key_id"
			}
			switch {
			case k.SecretAccessKey == "":
				bad(key+".secret", "", "empty secret access key")
			case strings.ContainsFunc(string(k.SecretAccessKey), func(r rune) bool { return r <= ' ' || r == 0x7f }):
				bad(key+".secret", "", "the secret access key has spaces or control characters")
			}
		}
	}
	keys := make(map[[32]byte]int, len(a.APIKeys))
	for i, k := range a.APIKeys {
		path := fmt.Sprintf("api_keys[%d]", i)
		_, known := names[k.Identity]
		j, dup := keys[k.SHA256]
		switch {
		case !known:
			bad(path, "", "unknown identity %q", k.Identity)
		case k.SHA256 == ([32]byte{}):
			bad(path, "", "empty SHA-256")
		case dup:
			bad(path, fmt.Sprintf("api_keys[%d]", j), "the same key is configured twice")
		default:
			keys[k.SHA256] = i
		}
	}
	cns := make(map[string]int, len(a.ClientCerts))
	for i, c := range a.ClientCerts {
		path := fmt.Sprintf("client_certs[%d]", i)
		_, known := names[c.Identity]
		j, dup := cns[c.CommonName]
		switch {
		case !known:
			bad(path, "", "unknown identity %q", c.Identity)
		case c.CommonName == "":
			bad(path, "", "empty common name")
		case fielderr.HasControl(c.CommonName):
			bad(path, "", "control characters in a common name")
		case dup:
			bad(path, fmt.Sprintf("client_certs[%d]", j), "common name %q is mapped twice", c.CommonName)
		default:
			cns[c.CommonName] = i
		}
	}
	return errors.Join(errs...)
}

// quoteID quotes an access key id for an error, unless it is too long or
// not printable: then it may be something else pasted by mistake.
func quoteID(id string) string {
	if len(id) > 128 || fielderr.HasControl(id) {
		return fmt.Sprintf("an access key id of %d bytes", len(id))
	}
	return strconv.Quote(id)
}

// operationList names the operations a grant may name, for errors.
func operationList() string {
	names := make([]string, len(operations))
	for i, op := range operations {
		names[i] = string(op)
	}
	return strings.Join(names, ", ")
}

// openPaths answer without authentication on every door that serves
// them: probes and metrics scrapes.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// OpenPath reports whether path is one of the routes open to anyone,
// whose requests need no credential: /healthz, /readyz and /metrics.
func OpenPath(path string) bool { return openPaths[path] }

// OpenPaths lists the routes open to anyone (OpenPath), sorted.
func OpenPaths() []string { return slices.Clone(limitedLinePaths) }

// keyPrefix is the part of a key's hash that indexes keyIndex: the lookup
// narrows the candidates, and subtle.ConstantTimeCompare decides.
type keyPrefix uint64

// apiKeyEntry is a configured key's hash and its identity.
type apiKeyEntry struct {
	sum      [32]byte
	identity *Identity
}

// authenticator is a validated Auth, indexed for the request path.
type authenticator struct {
	keyIndex map[keyPrefix][]apiKeyEntry
	certs    map[string]*Identity // by subject common name
	// byName holds every identity, by name, those whose only credentials
	// are S3 access keys included: the S3 API names the identity that a
	// key's signature authenticated.
	byName map[string]*Identity
}

func newAuthenticator(a Auth) (*authenticator, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	byName := make(map[string]*Identity, len(a.Identities))
	for _, id := range a.Identities {
		id.Grants = slices.Clone(id.Grants) // a later change to a must not change the gateway
		byName[id.Name] = &id
	}
	auth := &authenticator{keyIndex: map[keyPrefix][]apiKeyEntry{}, certs: map[string]*Identity{}, byName: byName}
	for _, k := range a.APIKeys {
		p := prefixOf(k.SHA256)
		auth.keyIndex[p] = append(auth.keyIndex[p], apiKeyEntry{sum: k.SHA256, identity: byName[k.Identity]})
	}
	for _, c := range a.ClientCerts {
		auth.certs[c.CommonName] = byName[c.Identity]
	}
	return auth, nil
}

func prefixOf(sum [32]byte) keyPrefix { return keyPrefix(binary.BigEndian.Uint64(sum[:8])) }

// keyIdentity returns the identity whose key is key, or nil. The index
// narrows the candidates by the first bytes of the key's SHA-256; the
// whole hash is then compared in constant time, so that the time taken
// says nothing of how much of a configured hash a guess matched.
func (a *authenticator) keyIdentity(key string) *Identity {
	sum := sha256.Sum256([]byte(key))
	var found *Identity
	for _, e := range a.keyIndex[prefixOf(sum)] {
		if subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 {
			found = e.identity
		}
	}
	return found
}

// identify authenticates r: by its bearer key when it has an Authorization
// header (a bad key is refused even if a client certificate would pass),
// else by its verified client certificate. Failures are
// api.ErrUnauthorized, and never quote the key.
func (a *authenticator) identify(r *http.Request) (*Identity, error) {
	if values := r.Header.Values("Authorization"); len(values) > 0 {
		if len(values) > 1 {
			return nil, fmt.Errorf("%w: more than one Authorization header", api.ErrUnauthorized)
		}
		scheme, key, _ := strings.Cut(values[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, fmt.Errorf("%w: the Authorization scheme must be Bearer", api.ErrUnauthorized)
		}
		key = strings.TrimLeft(key, " ")
		if key == "" {
			return nil, fmt.Errorf("%w: empty bearer key", api.ErrUnauthorized)
		}
		if id := a.keyIdentity(key); id != nil {
			return id, nil
		}
		return nil, fmt.Errorf("%w: unknown API key", api.ErrUnauthorized)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if id, ok := a.certs[cn]; ok {
			return id, nil
		}
		return nil, fmt.Errorf("%w: client certificate %q is not mapped to an identity", api.ErrUnauthorized, cn)
	}
	return nil, fmt.Errorf("%w: no API key (Authorization: Bearer) or client certificate", api.ErrUnauthorized)
}

// Authenticate returns the middleware of a door whose clients
// authenticate with a bearer API key or a verified client certificate
// (the REST API): it answers requests that do not authenticate with
// refuse (err of class api.ErrUnauthorized; the answer has
// WWW-Authenticate), and records the identity of those that do (Caller).
// The open routes (OpenPath) and the paths open says are open pass
// without credentials. Without auth it passes every request through.
func (e *Edge) Authenticate(open func(path string) bool, refuse func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if e.auth == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if openPaths[r.URL.Path] || (open != nil && open(r.URL.Path)) {
				next.ServeHTTP(w, r)
				return
			}
			id, err := e.auth.identify(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fencegate"`)
				refuse(w, r, err)
				return
			}
			x := exchangeOf(r.Context())
			if x == nil { // outside Track, as in unit tests
				x = &exchange{}
				r = r.WithContext(withExchange(r.Context(), x))
			}
			x.identity = id
			next.ServeHTTP(w, r)
		})
	}
}

// name is the identity's name, "" for none.
func (id *Identity) name() string {
	if id == nil {
		return ""
	}
	return id.Name
}

// Caller is the request's authenticated identity, or nil (without
// auth, or before authentication).
func Caller(ctx context.Context) *Identity {
	if x := exchangeOf(ctx); x != nil {
		return x.identity
	}
	return nil
}

// CallerName is the name of the request's identity, or "" without auth.
// Idempotency keys, audit lines and lock sessions are scoped by it.
func CallerName(ctx context.Context) string {
	return Caller(ctx).name()
}

// AuthorizeIdentity is Authorize for the identity id (nil: none
// authenticated), for a decision taken outside its requests, as the
// event feed's for each event of a subscriber's stream.
func (e *Edge) AuthorizeIdentity(id *Identity, op Operation, resource api.Resource) error {
	if e.auth == nil {
		return nil
	}
	if id == nil { // only if a route escaped the middleware: fail closed
		return fmt.Errorf("authorize %s %q: %w: request not authenticated", op, resource, api.ErrUnauthorized)
	}
	for _, gr := range id.Grants {
		if strings.HasPrefix(string(resource), gr.Prefix) && gr.Allows(op) {
			return nil
		}
	}
	return fmt.Errorf("%w: identity %q may not %s %q", api.ErrForbidden, id.Name, op, resource)
}

// AuthorizeAny reports whether the identity of ctx may do op to at least
// one resource whose name starts with prefix: a grant covers all of
// prefix, or a part of it (its own prefix starts with prefix). A door
// asks it where a request names a container of resources without
// reading any one of them (HeadBucket, GetBucketLocation, a feed's
// prefix). Without auth it always allows.
func (e *Edge) AuthorizeAny(ctx context.Context, op Operation, prefix string) error {
	if e.auth == nil {
		return nil
	}
	id := Caller(ctx)
	if id == nil {
		return fmt.Errorf("authorize %s under %q: %w: request not authenticated", op, prefix, api.ErrUnauthorized)
	}
	for _, gr := range id.Grants {
		if gr.Allows(op) && (strings.HasPrefix(prefix, gr.Prefix) || strings.HasPrefix(gr.Prefix, prefix)) {
			return nil
		}
	}
	return fmt.Errorf("%w: identity %q may not %s anything under %q", api.ErrForbidden, id.Name, op, prefix)
}

// Allows reports whether the grant includes op (OpAdmin includes all).
func (gr Grant) Allows(op Operation) bool {
	return slices.Contains(gr.Operations, op) || slices.Contains(gr.Operations, OpAdmin)
}

// WithIdentity returns ctx for a request that a door authenticated
// itself (the S3 API, by a signature) as the identity named name:
// Authorize and the engine's operations then check that identity's
// grants, exactly as for a REST request by one of its API keys. The
// context carries the request's id (requestID) for the log lines. Without
// auth the name is only recorded; with auth, a name the auth config does
// not define is api.ErrUnauthorized, so that a key store and the auth
// config that disagree fail closed.
//
// Under Track the identity is noted in the request's exchange. A context
// already identified gets an exchange of its own, of the same request:
// one per goroutine that serves a part of it (the keys of a
// DeleteObjects), since what a request checked is noted in its exchange
// without locking.
func (e *Edge) WithIdentity(ctx context.Context, name, requestID string) (context.Context, error) {
	var id *Identity
	if e.auth != nil {
		if id = e.auth.byName[name]; id == nil {
			return ctx, fmt.Errorf("%w: identity %q is not in the auth config", api.ErrUnauthorized, name)
		}
	}
	x := exchangeOf(ctx)
	if x == nil || x.identified {
		own := &exchange{id: requestID}
		if x != nil {
			// The tracer too: the round trips of each part are children
			// of the request's span, which ctx carries.
			own.start, own.api, own.operation, own.tracing = x.start, x.api, x.operation, x.tracing
		}
		x, ctx = own, withExchange(ctx, own)
	}
	if requestID != "" {
		x.id = requestID
	}
	x.identity, x.identified = id, true
	return ctx, nil
}
