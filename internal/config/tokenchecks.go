package config

import (
	"fmt"
	"strings"

	"fencegate/api"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// TokenChecks is the flag.Value of --token-checks (and the file's
// token_checks): the token checks as a
// comma-separated list of SCOPE=none, SCOPE=plausible or SCOPE=held:LOCK,
// where SCOPE is a bucket (its objects), partner/ROUTE (every resource of
// the partner route ROUTE) or "*" (every resource, objects and partner
// resources alike, that no other entry names). Setting it replaces the
// whole list.
type TokenChecks []tokenstore.Policy

// partnerScope starts the scopes that name a partner route.
const partnerScope = "partner/"

// Set parses s. The rules of each policy, and of one policy per scope,
// are the token store's (tokenstore.Policy.Validate and
// ValidatePolicies).
func (t *TokenChecks) Set(s string) error {
	var out TokenChecks
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		scope, spec, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q: want SCOPE=none, SCOPE=plausible or SCOPE=held:LOCK (SCOPE: a bucket, partner/ROUTE or *)", item)
		}
		checkName, lock, _ := strings.Cut(strings.TrimSpace(spec), ":")
		check, err := tokenstore.ParseCheck(checkName)
		if err != nil {
			return fmt.Errorf("%q: %v", item, err)
		}
		p := tokenstore.Policy{Check: check, Lock: lock}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%q: %w", item, err)
		}
		if p.Prefix, err = scopePrefix(strings.TrimSpace(scope)); err != nil {
			return fmt.Errorf("%q: %v", item, err)
		}
		out = append(out, p)
	}
	if err := tokenstore.ValidatePolicies(out); err != nil {
		return err
	}
	*t = out
	return nil
}

// scopePrefix returns the resource-name prefix of a scope: "" for "*",
// "partner/ROUTE/" for partner/ROUTE, "s3/BUCKET/" for a bucket.
func scopePrefix(scope string) (api.Resource, error) {
	if scope == "*" {
		return "", nil
	}
	if route, ok := strings.CutPrefix(scope, partnerScope); ok {
		if err := partners.ValidatePartnerRouteName(route); err != nil {
			return "", fmt.Errorf("partner route name %w", err)
		}
		return api.PartnerResource(route, ""), nil
	}
	if _, err := api.ParseObjectPath(scope, "k"); err != nil {
		return "", err
	}
	return api.ObjectResource(scope, ""), nil
}

// String formats the list as Set parses it.
func (t TokenChecks) String() string {
	items := make([]string, 0, len(t))
	for _, p := range t {
		scope := "*"
		if p.Prefix != "" {
			scope = strings.TrimSuffix(strings.TrimPrefix(string(p.Prefix), "s3/"), "/")
		}
		item := scope + "=" + string(p.Check)
		if p.Lock != "" {
			item += ":" + p.Lock
		}
		items = append(items, item)
	}
	return strings.Join(items, ",")
}

// validateRoutes refuses entries that name a partner route that routes does
// not have: a misspelt route would leave the real one unchecked.
func (t TokenChecks) validateRoutes(routes []partners.PartnerRoute) error {
	known := make(map[string]bool, len(routes))
	for _, r := range routes {
		known[r.Name] = true
	}
	for _, p := range t {
		if route, ok := strings.CutPrefix(string(p.Prefix), partnerScope); ok {
			if route = strings.TrimSuffix(route, "/"); !known[route] {
				return fmt.Errorf("token check for %s%s: the config file defines no partner route %q", partnerScope, route, route)
			}
		}
	}
	return nil
}

// tokenChecksUsage is the help of --token-checks.
const tokenChecksUsage = "token `checks` per bucket or partner route, beyond token >= high-water mark: comma-separated\n" +
	"SCOPE=none, SCOPE=plausible (refuse tokens above etcd's current revision) or\n" +
	"SCOPE=held:LOCK (only the current holder's token of fencegate lock LOCK may write),\n" +
	"where SCOPE is a bucket, partner/ROUTE or * (every other resource, objects and partner routes;\n" +
	"empty: none everywhere)"
