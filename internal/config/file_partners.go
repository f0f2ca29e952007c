package config

// The partners section of the config file: the partner routes, as
// partners.PartnerRoute values.

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"fencegate/backends/s3"
	"fencegate/partners"
)

// envReference is ${NAME} in add_headers values.
var envReference = regexp.MustCompile(`\$\{([^}]*)\}`)

// partners decodes the partners section, a list of routes, and checks
// the routes that decoded with partners.ValidatePartnerRoutes.
func (d *decoder) partners(n *yaml.Node, path string) {
	items, ok := d.list(n, path, "a list of partner routes")
	if !ok {
		return
	}
	routes := make([]partners.PartnerRoute, len(items))
	for i, item := range items {
		routes[i] = d.partner(item, fmt.Sprintf("%s[%d]", path, i))
	}
	d.fieldErrors(partners.ValidatePartnerRoutes(routes), "", nil)
	d.out.partners = routes
}

// partner decodes one route; partners.PartnerRoute.Validate checks it.
func (d *decoder) partner(n *yaml.Node, path string) partners.PartnerRoute {
	var (
		route partners.PartnerRoute
		seen  = map[string]bool{}
	)
	note := func(key string) { seen[key] = true }
	d.fields(n, path, []field{
		{"name", func(d *decoder, n *yaml.Node, path string) {
			note("name")
			route.Name, _ = d.scalar(n, path, "a route name")
		}},
		{"upstream", func(d *decoder, n *yaml.Node, path string) {
			note("upstream")
			if s, ok := d.scalar(n, path, "a base URL such as https://api.example.com/v1"); ok {
				u, err := partners.ParseUpstream(s)
				if err != nil {
					d.errorf(n, path, "%v", err)
					return
				}
				route.Upstream = u
			}
		}},
		{"methods", func(d *decoder, n *yaml.Node, path string) {
			note("methods")
			route.Methods, _ = d.strings(n, path, "HTTP methods")
		}},
		{"resource", func(d *decoder, n *yaml.Node, path string) {
			note("resource")
			route.Resource, _ = d.scalar(n, path, `"header" or a template such as accounts/{account}`)
		}},
		{"resource_path", func(d *decoder, n *yaml.Node, path string) {
			route.ResourcePath, _ = d.scalar(n, path, "a path template such as accounts/{resource}")
		}},
		{"unbound_path", func(d *decoder, n *yaml.Node, path string) {
			route.UnboundPath, _ = d.bool(n, path)
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
			route.MaxBodyBytes, _ = d.size(n, path, 1, maxSize)
		}},
		{"max_stored_response_bytes", func(d *decoder, n *yaml.Node, path string) {
			route.MaxStoredResponseBytes, _ = d.size(n, path, 1, maxSize)
		}},
		{"budget", func(d *decoder, n *yaml.Node, path string) {
			route.Budget = d.partnerBudget(n, path)
		}},
		{"strip_headers", func(d *decoder, n *yaml.Node, path string) {
			names, _ := d.strings(n, path, "header names")
			for i, name := range names {
				names[i] = http.CanonicalHeaderKey(name)
			}
			route.StripHeaders = names
		}},
		{"forward_headers", func(d *decoder, n *yaml.Node, path string) {
			route.ForwardHeaders, _ = d.strings(n, path, "header names")
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
	return route
}

// partnerBudget decodes a budget of idempotency records: {records: N,
// bytes: SIZE}, where 0 is no bound and a field left out keeps the
// gateway's default (partners.PartnerBudget).
func (d *decoder) partnerBudget(n *yaml.Node, path string) partners.PartnerBudget {
	var b partners.PartnerBudget
	d.fields(n, path, []field{
		{"records", func(d *decoder, n *yaml.Node, path string) {
			s, ok := d.scalar(n, path, "a whole number, 0 or more")
			if !ok {
				return
			}
			records, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n.ShortTag() != "!!int" || records < 0 {
				d.errorf(n, path, "%q: want a whole number, 0 or more (0: no bound)", s)
				return
			}
			b.Records = noBoundIfZero(records)
		}},
		{"bytes", func(d *decoder, n *yaml.Node, path string) {
			if size, ok := d.size(n, path, 0, maxSize); ok {
				b.Bytes = noBoundIfZero(size)
			}
		}},
	})
	return b
}

// noBoundIfZero maps the file's 0 (no bound) to the gateway's negative.
func noBoundIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// PartnerAnswers is where partner answers' bodies are kept (the
// partner_answers section): an S3 bucket of the gateway's own and a key
// prefix. A zero Bucket means none: bodies over the size kept in etcd
// are not kept.
type PartnerAnswers struct {
	Bucket string
	Prefix string
}

// DefaultPartnerAnswersPrefix is PartnerAnswers.Prefix when the section
// leaves it out.
const DefaultPartnerAnswersPrefix = "fencegate/answers/"

// partnerAnswers decodes the partner_answers section.
func (d *decoder) partnerAnswers(n *yaml.Node, path string) {
	a := PartnerAnswers{Prefix: DefaultPartnerAnswersPrefix}
	d.fields(n, path, []field{
		{"bucket", func(d *decoder, n *yaml.Node, path string) {
			a.Bucket, _ = d.scalar(n, path, "an S3 bucket name")
		}},
		{"prefix", func(d *decoder, n *yaml.Node, path string) {
			a.Prefix, _ = d.scalar(n, path, "a key prefix ending in /, such as fencegate/answers/")
		}},
	})
	switch {
	case a.Bucket == "" && n.Kind == yaml.MappingNode:
		d.errorf(n, joinPath(path, "bucket"), "missing (answers are kept in an S3 bucket of the gateway's own)")
	case a.Bucket != "":
		if err := s3.ValidateAnswers(a.Bucket, a.Prefix); err != nil {
			d.errorf(n, path, "%v", err)
		}
	}
	d.out.answers = a
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
		if _, dup := out[http.CanonicalHeaderKey(name)]; dup {
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
		out[http.CanonicalHeaderKey(name)] = []string{resolved}
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
