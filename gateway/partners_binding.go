package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"fencegate/api"
)

// A route whose resource comes from the X-Fence-Resource header fences
// and authorizes what the client names there, but forwards the path the
// client sends. Unless the two are bound, a caller may name a resource it
// holds (and may write) in the header and act on another in the path: the
// fence check and the grant cover one resource, the partner acts on
// another. PartnerRoute.ResourcePath binds them; this file parses and
// checks it, and finds routes left unbound where grants make it matter.

// resourcePathVariable is the one variable of a ResourcePath.
const resourcePathVariable = "resource"

// resourcePath is a parsed PartnerRoute.ResourcePath: literal segments and
// one {resource}.
type resourcePath struct {
	raw      string
	segments []templateSegment
}

// compileResourcePath parses a route's ResourcePath: nil for none.
func compileResourcePath(resource, resourcePath string) (*resourcePath, error) {
	if resourcePath == "" {
		return nil, nil
	}
	if resource != ResourceFromHeader {
		return nil, fmt.Errorf("only with resource %q (the template %q already takes the resource from the path)", ResourceFromHeader, resource)
	}
	return parseResourcePath(resourcePath)
}

// parseResourcePath parses a PartnerRoute.ResourcePath: slash-separated
// segments, each a literal (as in a resource template) or {resource},
// which appears exactly once.
func parseResourcePath(s string) (*resourcePath, error) {
	if s == "" {
		return nil, errors.New(`empty: want a path template such as "accounts/{resource}"`)
	}
	if len(s) > 256 {
		return nil, errors.New("longer than 256 bytes")
	}
	p := &resourcePath{raw: s}
	variables := 0
	for _, seg := range strings.Split(s, "/") {
		switch {
		case seg == "{"+resourcePathVariable+"}":
			variables++
			p.segments = append(p.segments, templateSegment{variable: resourcePathVariable})
		case templateVariablePattern.MatchString(seg):
			return nil, fmt.Errorf("%q: %s: the only variable is {%s}, the X-Fence-Resource value", s, seg, resourcePathVariable)
		case seg == "" || seg == "." || seg == "..":
			return nil, fmt.Errorf("%q: empty, \".\" or \"..\" segment", s)
		case strings.ContainsAny(seg, "{}%\\ ") || hasControl(seg):
			return nil, fmt.Errorf("%q: segment %q is neither a literal nor {%s}", s, seg, resourcePathVariable)
		default:
			p.segments = append(p.segments, templateSegment{literal: seg})
		}
	}
	if variables != 1 {
		return nil, fmt.Errorf("%q: want {%s} exactly once, got it %d times", s, resourcePathVariable, variables)
	}
	return p, nil
}

// check refuses a request whose path does not start with the binding's
// segments, with the resource id's segments in place of {resource}: the
// path then acts on the resource that the fence check and the grant
// cover. Path segments are compared percent-decoded, as the upstream
// reads them; an id with '%' never matches, as decoded segments hold
// none. A nil binding checks nothing. Failures are api.ErrInvalidRequest.
func (p *resourcePath) check(id string, path api.PartnerPath) error {
	if p == nil {
		return nil
	}
	want := make([]string, 0, len(p.segments)+strings.Count(id, "/"))
	for _, seg := range p.segments {
		if seg.variable != "" {
			want = append(want, strings.Split(id, "/")...)
		} else {
			want = append(want, seg.literal)
		}
	}
	if len(path.Segments) < len(want) || !slices.Equal(path.Segments[:len(want)], want) {
		return fmt.Errorf("%w: the path must start with the route's resource_path %q, with the %s value in place of {%s}",
			api.ErrInvalidRequest, p.raw, api.HeaderFenceResource, resourcePathVariable)
	}
	return nil
}

// UnboundHeaderRouteWarnings returns a warning for each route that takes
// its resource from X-Fence-Resource without a ResourcePath while a grant
// of a lets an identity write only part of the route's resources: that
// identity can name a resource it may write in the header and act on any
// other in the path. (A grant of the whole route, or none at all, leaves
// nothing to get around; without ResourcePath the fence still covers only
// what the header names, which the README states.)
func UnboundHeaderRouteWarnings(routes []PartnerRoute, a Auth) []string {
	var warnings []string
	for _, rt := range routes {
		if rt.Resource != ResourceFromHeader || rt.ResourcePath != "" {
			continue
		}
		if id, prefix, ok := narrowWriteGrant(a, string(api.PartnerResource(rt.Name, ""))); ok {
			warnings = append(warnings, fmt.Sprintf(
				"partner route %q takes its resource from %s without resource_path, and identity %q may write only %q: "+
					"it can name that resource in the header and act on another in the path; set resource_path (such as accounts/{resource}) "+
					"or a template resource, unless the partner's path names no resource",
				rt.Name, api.HeaderFenceResource, id, prefix+"*"))
		}
	}
	return warnings
}

// narrowWriteGrant finds a grant that allows writes to some, but not
// all, of the resources under routePrefix.
func narrowWriteGrant(a Auth, routePrefix string) (identity, prefix string, ok bool) {
	for _, id := range a.Identities {
		for _, gr := range id.Grants {
			if gr.allows(OpWrite) && len(gr.Prefix) > len(routePrefix) && strings.HasPrefix(gr.Prefix, routePrefix) {
				return id.Name, gr.Prefix, true
			}
		}
	}
	return "", "", false
}
