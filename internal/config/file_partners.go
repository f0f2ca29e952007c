package config

// The partners section of the config file: the partner routes, as
// gateway.PartnerRoute values.

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"fencegate/gateway"
)

// envReference is ${NAME} in add_headers values.
var envReference = regexp.MustCompile(`\$\{([^}]*)\}`)

// maxPartnerBytes bounds a route's max_body_bytes: bodies are held in
// memory. maxStoredResponseBytes bounds max_stored_response_bytes: a stored
// answer goes into one etcd request, and etcd refuses those over 1.5 MiB.
const (
	maxPartnerBytes        = 1 << 30
	maxStoredResponseBytes = 1 << 20
)

// gatewaySetHeaders are headers that add_headers may not set: the gateway
// sets them itself (hop-by-hop headers, Host, X-Fence-*, the idempotency
// key it derives, the body's length). The gateway refuses them too; here
// the error names the line.
var gatewaySetHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Host", "Idempotency-Key", "Content-Length",
}

// partners decodes the partners section: a list of routes.
func (d *decoder) partners(n *yaml.Node, path string) {
	items, ok := d.list(n, path, "a list of partner routes")
	if !ok {
		return
	}
	routes := make([]gateway.PartnerRoute, 0, len(items))
	firstAt := map[string]int{}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		route, ok := d.partner(item, p)
		if !ok {
			continue
		}
		if line, dup := firstAt[route.Name]; dup {
			d.errorf(item, p+".name", "route %q is defined twice (first at line %d)", route.Name, line)
			continue
		}
		firstAt[route.Name] = item.Line
		routes = append(routes, route)
	}
	d.out.partners = routes
}

// partner decodes one route. It reports false if any field is wrong.
func (d *decoder) partner(n *yaml.Node, path string) (gateway.PartnerRoute, bool) {
	var (
		route   gateway.PartnerRoute
		seen    = map[string]bool{}
		errsNow = len(d.errs)
	)
	note := func(key string) { seen[key] = true }
	var resourcePathAt *yaml.Node
	d.fields(n, path, []field{
		{"name", func(d *decoder, n *yaml.Node, path string) {
			note("name")
			if s, ok := d.scalar(n, path, "a route name"); ok {
				if !gateway.ValidPartnerRouteName(s) {
					d.errorf(n, path, "%q: want lower-case letters, digits and -, starting with a letter or digit, at most 63", s)
					return
				}
				route.Name = s
			}
		}},
		{"upstream", func(d *decoder, n *yaml.Node, path string) {
			note("upstream")
			if s, ok := d.scalar(n, path, "a base URL such as https://api.example.com/v1"); ok {
				u, err := checkUpstream(s)
				if err != nil {
					d.errorf(n, path, "%v", err)
					return
				}
				route.Upstream = u
			}
		}},
		{"methods", func(d *decoder, n *yaml.Node, path string) {
			note("methods")
			methods, ok := d.strings(n, path, "HTTP methods")
			if !ok {
				return
			}
			if len(methods) == 0 {
				d.errorf(n, path, "empty; want at least one method, such as [POST]")
				return
			}
			for i, m := range methods {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case !slices.Contains(gateway.PartnerMethods(), m):
					d.errorf(n.Content[i], p, "unknown method %q (want one of %s, in upper case)", m, strings.Join(gateway.PartnerMethods(), ", "))
					return
				case slices.Contains(methods[:i], m):
					d.errorf(n.Content[i], p, "%s is listed twice", m)
					return
				}
			}
			route.Methods = methods
		}},
		{"resource", func(d *decoder, n *yaml.Node, path string) {
			note("resource")
			if s, ok := d.scalar(n, path, `"header" or a template such as accounts/{account}`); ok {
				if err := gateway.CheckResourceTemplate(s); err != nil {
					d.errorf(n, path, "%v", err)
					return
				}
				route.Resource = s
			}
		}},
		{"resource_path", func(d *decoder, n *yaml.Node, path string) {
			if s, ok := d.scalar(n, path, "a path template such as accounts/{resource}"); ok {
				route.ResourcePath, resourcePathAt = s, n
			}
		}},
		{"timeout", func(d *decoder, n *yaml.Node, path string) {
			route.Timeout, _ = d.duration(n, path, aboveZero)
		}},
		{"max_wait", func(d *decoder, n *yaml.Node, path string) {
			route.MaxWait, _ = d.duration(n, path, aboveZero)
		}},
		{"idempotency_key", func(d *decoder, n *yaml.Node, path string) {
			s, ok := d.scalar(n, path, "required or optional")
			switch {
			case !ok:
			case s == "required":
				route.RequireIdempotencyKey = true
			case s == "optional":
			default:
				d.errorf(n, path, "%q: want required or optional", s)
			}
		}},
		{"idempotency_ttl", func(d *decoder, n *yaml.Node, path string) {
			route.IdempotencyTTL, _ = d.duration(n, path, aboveZero)
		}},
		{"max_body_bytes", func(d *decoder, n *yaml.Node, path string) {
			route.MaxBodyBytes, _ = d.size(n, path, 1, maxPartnerBytes)
		}},
		{"max_stored_response_bytes", func(d *decoder, n *yaml.Node, path string) {
			route.MaxStoredResponseBytes, _ = d.size(n, path, 1, maxStoredResponseBytes)
		}},
		{"strip_headers", func(d *decoder, n *yaml.Node, path string) {
			names, ok := d.strings(n, path, "header names")
			if !ok {
				return
			}
			for i, name := range names {
				if !validHeaderName(name) {
					d.errorf(n.Content[i], fmt.Sprintf("%s[%d]", path, i), "%q is not a header name", name)
					return
				}
				names[i] = http.CanonicalHeaderKey(name)
			}
			route.StripHeaders = names
		}},
		{"forward_headers", func(d *decoder, n *yaml.Node, path string) {
			route.ForwardHeaders = d.forwardHeaders(n, path)
		}},
		{"add_headers", func(d *decoder, n *yaml.Node, path string) {
			route.AddHeaders = d.addHeaders(n, path)
		}},
	})
	for _, key := range []string{"name", "upstream", "methods", "resource"} {
		if !seen[key] && n.Kind == yaml.MappingNode {
			d.errorf(n, joinPath(path, key), "missing (a route needs name, upstream, methods and resource)")
		}
	}
	if resourcePathAt != nil && route.Resource != "" {
		if err := gateway.CheckResourcePath(route.Resource, route.ResourcePath); err != nil {
			d.errorf(resourcePathAt, joinPath(path, "resource_path"), "%v", err)
		}
	}
	return route, len(d.errs) == errsNow
}

// forwardHeaders decodes forward_headers: the routing headers the route
// forwards all the same (gateway.CheckForwardHeader says which may be
// listed).
func (d *decoder) forwardHeaders(n *yaml.Node, path string) []string {
	names, ok := d.strings(n, path, "header names")
	if !ok {
		return nil
	}
	for i, name := range names {
		if err := gateway.CheckForwardHeader(name); err != nil {
			d.errorf(n.Content[i], fmt.Sprintf("%s[%d]", path, i), "%v", err)
			return nil
		}
	}
	return names
}

// checkUpstream parses a route's upstream base URL: http or https, with a
// host, and without user info, query or fragment.
func checkUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q not allowed, want http or https", u.Scheme)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q has no host; want a URL such as https://api.example.com/v1", s)
	case u.User != nil:
		return nil, fmt.Errorf("%q has user info: put credentials in add_headers, from the environment", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("%q has a query: the route forwards the client's query", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, fmt.Errorf("%q has a fragment", s)
	}
	return u, nil
}

// addHeaders decodes add_headers: a mapping of header name to value, in
// which ${NAME} is replaced by the environment variable NAME, which must
// be set.
func (d *decoder) addHeaders(n *yaml.Node, path string) http.Header {
	if !d.isKind(n, path, yaml.MappingNode, "a mapping of header name to value") {
		return nil
	}
	out := http.Header{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		name, ok := d.scalar(key, path, "a header name")
		if !ok {
			continue
		}
		p := joinPath(path, name)
		if !validHeaderName(name) {
			d.errorf(key, p, "%q is not a header name", name)
			continue
		}
		if canonical := http.CanonicalHeaderKey(name); slices.Contains(gatewaySetHeaders, canonical) || strings.HasPrefix(canonical, "X-Fence-") {
			d.errorf(key, p, "%s is set by the gateway", canonical)
			continue
		}
		if out.Get(name) != "" {
			d.errorf(key, p, "repeated")
			continue
		}
		raw, ok := d.scalar(value, p, "a header value")
		if !ok {
			continue
		}
		resolved, err := expandEnv(raw, d.lookupEnv)
		if err != nil {
			d.errorf(value, p, "%v", err)
			continue
		}
		if resolved == "" || !validHeaderValue(resolved) {
			// The value is not quoted: it may hold a secret.
			d.errorf(value, p, "not a valid header value (empty, or with control characters)")
			continue
		}
		out.Set(name, resolved)
	}
	return out
}

// expandEnv replaces every ${NAME} in s by the environment variable NAME.
func expandEnv(s string, lookupEnv LookupEnv) (string, error) {
	var err error
	out := envReference.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if !envNamePattern.MatchString(name) {
			err = fmt.Errorf("%q is not an environment variable reference (want ${NAME}, with letters, digits and _)", ref)
			return ""
		}
		value, ok := lookupEnv(name)
		if !ok || value == "" {
			if err == nil {
				err = fmt.Errorf("environment variable %s is not set", name)
			}
			return ""
		}
		return value
	})
	if err != nil {
		return "", err
	}
	if strings.Contains(envReference.ReplaceAllString(s, ""), "${") {
		return "", fmt.Errorf("an unclosed ${ (want ${NAME})")
	}
	return out, nil
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

// validHeaderValue reports whether s may be sent as a header value:
// visible characters, spaces and tabs, without leading or trailing space.
func validHeaderValue(s string) bool {
	if s != strings.TrimSpace(s) {
		return false
	}
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
