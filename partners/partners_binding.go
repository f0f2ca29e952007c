package partners

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/internal/fielderr"
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
		case strings.ContainsAny(seg, "{}%\\ ") || fielderr.HasControl(seg):
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

// validateUnboundPath checks a route's UnboundPath: it goes only with
// resource "header" and no resource_path.
func validateUnboundPath(rt PartnerRoute) error {
	switch {
	case !rt.UnboundPath:
		return nil
	case rt.Resource != ResourceFromHeader:
		return fmt.Errorf("only with resource %q (the template %q is the path)", ResourceFromHeader, rt.Resource)
	case rt.ResourcePath != "":
		return errors.New("set resource_path or unbound_path, not both")
	}
	return nil
}

// ValidatePartnerGrants checks routes against the grants of a, as New
// does when it has both: a route that takes its resource from
// X-Fence-Resource, with neither ResourcePath nor UnboundPath, is refused
// while some identity may write only part of it (see partialWriteGrant).
// That identity could name a resource it may write in the header and act
// on any other in the path: the grant and the fence check would cover
// one resource, the partner would act on another. Refusing is the safe
// reading of a route that does not say: a grant of the whole route, or
// none (auth off), leaves nothing to get around, and the route loads.
// Errors are *fielderr.Error, joined, with paths such as partners[1].resource.
func ValidatePartnerGrants(routes []PartnerRoute, a edge.Auth) error {
	var errs []error
	for i, rt := range routes {
		if rt.Resource != ResourceFromHeader || rt.ResourcePath != "" || rt.UnboundPath {
			continue
		}
		for _, id := range a.Identities {
			prefix, ok := partialWriteGrant(id, string(api.PartnerResource(rt.Name, "")))
			if !ok {
				continue
			}
			errs = append(errs, fielderr.Errorf(fmt.Sprintf("partners[%d].resource", i),
				"%q without resource_path, and identity %q may write only part of the route (grant %q): "+
					"it could name a resource it may write in %s and act on another in the path; "+
					"set resource_path (such as accounts/{resource}) to bind the path to the header, "+
					"or unbound_path: true if the partner's path names no resource",
				ResourceFromHeader, id.Name, prefix, api.HeaderFenceResource))
			break
		}
	}
	return errors.Join(errs...)
}

// partialWriteGrant reports whether id may write some, but not all, of
// the resources under routePrefix (partner/ROUTE/), and names a grant that
// allows the some. Grants cover the resources whose names start with
// their prefix (Gateway.authorize), so a write grant covers the whole
// route when its prefix is a prefix of routePrefix (partner/, partner/pay
// and partner/pay/ all cover partner/pay/), and only part of it when it
// is longer and starts with routePrefix (partner/pay/acct-a1). A grant of
// the whole route makes any narrower one moot.
func partialWriteGrant(id edge.Identity, routePrefix string) (prefix string, ok bool) {
	for _, gr := range id.Grants {
		if !gr.Allows(edge.OpWrite) {
			continue
		}
		switch {
		case strings.HasPrefix(routePrefix, gr.Prefix):
			return "", false
		case !ok && strings.HasPrefix(gr.Prefix, routePrefix):
			prefix, ok = gr.Prefix, true
		}
	}
	return prefix, ok
}
