package config

// The S3 API's settings: its listener (--s3-listen, s3_api.listen), the
// base domain of virtual-hosted-style requests (--s3-domain), the region
// clients sign for (--s3-api-region), and the access keys that
// authenticate on it (the auth section's s3_keys; in dev without an auth
// section, dev's own key).

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"

	"fencegate/edge"
	"fencegate/s3api/accesskeys"
)

// S3API configures the S3 API, the second listener that speaks the S3
// protocol. The zero S3API turns it off.
type S3API struct {
	// Listen is its host:port; "" turns it off.
	Listen string
	// Domain is the base domain of virtual-hosted-style requests
	// (BUCKET.DOMAIN); "": path-style requests only.
	Domain string
	// Region is the region that signatures' credential scope must name.
	Region string
	// Keys are the S3 access keys that authenticate on it; nil when it is
	// off.
	Keys *accesskeys.Store
}

// DevS3Listen is where `fencegate dev` serves the S3 API unless
// --s3-listen says otherwise.
const DevS3Listen = "127.0.0.1:8081"

// DefaultS3APIRegion is the region clients sign for unless
// --s3-api-region says another: aws-cli's and the SDKs' default.
const DefaultS3APIRegion = "us-east-1"

// DevS3Key is the S3 access key of `fencegate dev` without an auth
// section, for a server on 127.0.0.1 only. It is not the S3 server's key:
// a client's credentials never reach S3.
var DevS3Key = edge.S3Key{AccessKeyID: "fencegate-dev-s3", SecretAccessKey: "fencegate-dev-s3-secret"}

// devS3Identity is the identity of DevS3Key. Without an auth section the
// gateway allows every operation, so it has no grants.
const devS3Identity = "dev"

// s3APIFields are the file's s3_api section.
var s3APIFields = []field{
	stringSetting("listen", "s3-listen", "host:port", validateHostPort),
	stringSetting("domain", "s3-domain", "a domain such as s3.example.com", validateS3Domain),
	stringSetting("region", "s3-api-region", "a region such as us-east-1", validateS3APIRegion),
}

// addS3APIFlags adds the S3 API's flags; listen is --s3-listen's default.
func addS3APIFlags(fs *flag.FlagSet, c *S3API, listen string) {
	fs.StringVar(&c.Listen, "s3-listen", listen, "`host:port` of the S3 API, for unmodified S3 clients (empty: off); it needs\n"+
		"identities with s3_keys in the --config file's auth section")
	fs.StringVar(&c.Domain, "s3-domain", "", "base `domain` of the S3 API's virtual-hosted-style requests, BUCKET.DOMAIN\n"+
		"(empty: path style only, endpoint/BUCKET/KEY)")
	fs.StringVar(&c.Region, "s3-api-region", DefaultS3APIRegion, "`region` that S3 API clients sign requests for")
}

// s3DomainPattern is a DNS name of lower-case labels.
var s3DomainPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// validateS3Domain checks --s3-domain: a DNS name, without a scheme,
// port or path.
func validateS3Domain(domain string) error {
	if len(domain) > 253 || !s3DomainPattern.MatchString(domain) {
		return fmt.Errorf("%q: want a domain name such as s3.example.com (lower case, no scheme, port or path)", domain)
	}
	return nil
}

// s3RegionPattern is the syntax of a region name.
var s3RegionPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// validateS3APIRegion checks --s3-api-region.
func validateS3APIRegion(region string) error {
	if !s3RegionPattern.MatchString(region) {
		return fmt.Errorf("%q: want a region such as us-east-1 (lower-case letters, digits and -)", region)
	}
	return nil
}

// finishS3API checks c against the main listener mainListen and fills
// its keys from auth: the auth section's S3 access keys, or with dev and
// no auth section, DevS3Key. The S3 API needs keys: without any, no
// client could sign a request. It returns what dev should say about the
// S3 API ("" for nothing).
func finishS3API(c *S3API, mainListen string, auth *edge.Auth, dev bool) (note string, err error) {
	if c.Listen == "" {
		var errs []error
		if c.Domain != "" {
			errs = append(errs, errors.New("--s3-domain needs --s3-listen: the S3 API is off"))
		}
		return "", errors.Join(errs...)
	}
	errs := []error{validateListen("s3-listen", c.Listen)}
	if c.Listen == mainListen && !hasPortZero(c.Listen) {
		errs = append(errs, fmt.Errorf("--s3-listen %s: the same address as --listen; the S3 API needs a listener of its own", c.Listen))
	}
	if c.Domain != "" {
		if err := validateS3Domain(c.Domain); err != nil {
			errs = append(errs, fmt.Errorf("--s3-domain %w", err))
		}
	}
	if err := validateS3APIRegion(c.Region); err != nil {
		errs = append(errs, fmt.Errorf("--s3-api-region %w", err))
	}
	keys := edge.Auth{}
	switch {
	case auth != nil && hasS3Keys(*auth):
		keys = *auth
	case auth == nil && dev:
		keys = edge.Auth{Identities: []edge.Identity{{Name: devS3Identity, S3Keys: []edge.S3Key{DevS3Key}}}}
	case dev:
		// The file's identities have no S3 key: dev's own would authenticate
		// as an identity the gateway does not know. The S3 API stays off.
		c.Listen, c.Domain = "", ""
		return "the config file's auth section gives no identity s3_keys: the S3 API is off", errors.Join(errs...)
	default:
		errs = append(errs, fmt.Errorf("--s3-listen %s: no identity has S3 access keys (s3_keys of an identity in the --config file's auth section): no client could sign a request", c.Listen))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	store, err := accesskeys.New(keys)
	if err != nil {
		return "", fmt.Errorf("s3 api keys: %w", err)
	}
	c.Keys = store
	return "", nil
}

// hasS3Keys reports whether an identity of a has an S3 access key.
func hasS3Keys(a edge.Auth) bool {
	return slices.ContainsFunc(a.Identities, func(id edge.Identity) bool { return len(id.S3Keys) > 0 })
}

// hasPortZero reports whether addr, a checked host:port, asks for a free
// port.
func hasPortZero(addr string) bool {
	_, port, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(port)
	return err == nil && n == 0
}
