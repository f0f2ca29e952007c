package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/logging"
	"fencegate/internal/tlsfiles"
	"fencegate/internal/tracing"
	"fencegate/partners"
	"fencegate/retention"
	"fencegate/tokenstore"
)

// Serve is everything `fencegate serve` needs, from flags, environment
// and the config file, checked.
type Serve struct {
	// Listen is the host:port to serve on.
	Listen string
	Etcd   Etcd
	S3     s3.Config
	Shared
}

// Shared are the settings of the gateway that serve and dev both run.
type Shared struct {
	// Store is the token store's config: its token checks
	// (--token-checks) and the lock API's limits, and for serve its key
	// prefix and request timeout.
	Store tokenstore.Config
	// Gateway holds the gateway's limits; the command adds its logger,
	// readiness probes and tracer.
	Gateway gateway.Config
	// Marks is the mark evictor's config (--mark-retention and the
	// file's marks section); its ETag cache bound is in Gateway.
	Marks retention.Config
	HTTP  HTTP
	// S3API is the S3 API's listener and keys; its Listen is "" when it is
	// off. It is served with HTTP's timeouts and TLS, and the gateway's
	// limits.
	S3API   S3API
	Log     logging.Config
	Tracing tracing.Config
	Features
}

// sharedFlags are the flags of Shared that need converting.
type sharedFlags struct {
	limits *limitFlags
	checks TokenChecks
	// buckets, when not nil, replace the config file's buckets section
	// (dev maps its own).
	buckets []Bucket
}

// addSharedFlags adds the flags of s, and --config, to cmd.
func addSharedFlags(cmd *command, s *Shared) *sharedFlags {
	f := &sharedFlags{limits: addLimitFlags(cmd.fs)}
	cmd.fs.Var(&f.checks, "token-checks", tokenChecksUsage)
	addHTTPFlags(cmd.fs, &s.HTTP)
	addLogFlags(cmd.fs, &s.Log)
	addTracingFlags(cmd.fs, &s.Tracing)
	cmd.addConfigFlag()
	return f
}

// finish fills s from the parsed flags and the config file's features,
// and validates them.
func (f *sharedFlags) finish(cmd *command, s *Shared) error {
	errs := []error{f.limits.validate(), s.HTTP.validate(), s.HTTP.loadTLS(), validateLog(s.Log), validateTracing(s.Tracing)}
	s.Gateway = f.limits.gateway()
	s.Marks = f.limits.marks()
	s.Gateway.ETagCacheMaxAge = s.Marks.ETagCacheMaxAge()
	f.limits.store(&s.Store)
	s.Store.Policies = f.checks
	var err error
	s.Features, err = cmd.features(s.HTTP)
	errs = append(errs, err)
	s.Gateway.PartnerIdentityBudget = s.Features.IdentityBudget
	if err == nil {
		errs = append(errs, f.checks.validateRoutes(s.Partners))
	}
	if f.buckets != nil {
		s.Buckets = f.buckets // dev's own stores, not the file's
	}
	s.Store.Policies = inStores(s.Store.Policies, s.Buckets)
	return errors.Join(errs...)
}

// Features are what only the config file configures: partner routes and
// auth. The zero Features configure neither.
type Features struct {
	// Partners are the partner routes, in file order; nil without any.
	Partners []partners.PartnerRoute
	// Auth is the auth section; nil without one (auth off).
	Auth *edge.Auth
	// Answers is where partner answers' bodies are kept; zero without a
	// partner_answers section.
	Answers PartnerAnswers
	// IdentityBudget bounds each identity's idempotency records in etcd
	// (gateway.Config.PartnerIdentityBudget).
	IdentityBudget partners.PartnerBudget
	// Buckets map buckets to the stores that hold them (the buckets
	// section); a bucket not in it is in S3. Nil: every bucket is in S3.
	Buckets []Bucket
}

// GCSBuckets returns the buckets in GCS.
func (f Features) GCSBuckets() []Bucket {
	var out []Bucket
	for _, b := range f.Buckets {
		if b.Store == api.StoreGCS {
			out = append(out, b)
		}
	}
	return out
}

// Warnings are what valid features configure that is likely unsafe:
// `config check` prints them, serve and dev log them at start.
func (f Features) Warnings() []string {
	var warnings []string
	if len(f.Partners) > 0 && f.Answers.Bucket == "" {
		warnings = append(warnings, "partner routes without partner_answers: answers' bodies over 512 bytes are not kept, "+
			"and a replay of such an answer has its status and headers and an empty body (Idempotent-Body-Omitted: true)")
	}
	return append(warnings, f.s3GrantsOnGCSBuckets()...)
}

// s3GrantsOnGCSBuckets warns of grants of s3/BUCKET/ for a bucket in GCS:
// they cover none of its objects, which are gcs/BUCKET/... (requests for
// them are refused, 403).
func (f Features) s3GrantsOnGCSBuckets() []string {
	if f.Auth == nil {
		return nil
	}
	var warnings []string
	for _, id := range f.Auth.Identities {
		for _, g := range id.Grants {
			for _, b := range f.GCSBuckets() {
				s3Prefix := string(api.ObjectResource(b.Name, ""))
				if strings.HasPrefix(g.Prefix, s3Prefix) || g.Prefix == strings.TrimSuffix(s3Prefix, "/") {
					warnings = append(warnings, fmt.Sprintf("identity %q: grant %q covers no object: bucket %q is in gcs, its objects are %s (grant that)",
						id.Name, g.Prefix, b.Name, api.StoreObjectResource(api.StoreGCS, b.Name, "")))
				}
			}
		}
	}
	return warnings
}

// Etcd says how to reach etcd.
type Etcd struct {
	Endpoints   []string
	Username    string
	Password    string
	TLS         *tls.Config // nil: plain TCP, or TLS with system roots for https:// endpoints
	DialTimeout time.Duration
}

const serveDescription = `
Serve fencegate's HTTP API: fenced writes to S3, with high-water marks of
fencing tokens kept in etcd. This is the default command.

Other commands:
  fencegate dev       run a local etcd and S3 server and a gateway in front of them
  fencegate version   print build information

S3 credentials: with --s3-access-key and --s3-secret-key empty, the AWS SDK's
default chain is used (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, shared
config files, instance roles).

On SIGTERM or SIGINT, /readyz starts failing, the listener stays open for
--drain-delay, then closes; requests in flight may finish within
--shutdown-timeout.

With --s3-listen, a second listener speaks the S3 protocol (AWS Signature
Version 4 with the S3 access keys of the auth section's identities), so that
unmodified S3 clients write through fencegate, fenced (docs/s3-api.md).

--config FILE reads a YAML file that gives the same settings as the flags,
plus partner routes and auth (identities, hashed API keys, client
certificates, S3 access keys); flags and FENCEGATE_* variables override it.
Check a file with fencegate config check FILE.`

// ParseServe reads serve's flags (args), environment and config file,
// and checks them; extra is a problem the command found itself (nil for
// none), reported with the others. For -h it prints the usage to stdout
// and returns flag.ErrHelp; every other error is a *UsageError that lists
// every problem.
func ParseServe(args []string, lookupEnv LookupEnv, stdout io.Writer, extra error) (Serve, error) {
	cmd := newCommand("serve", "fencegate [serve] [flags]", serveDescription)
	fs := cmd.fs
	var (
		cfg                       Serve
		endpoints                 string
		caFile, certFile, keyFile string
	)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "`host:port` to serve HTTP on")
	fs.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated etcd client `URLs`, such as\nhttp://etcd-1:2379,http://etcd-2:2379 (required)")
	fs.StringVar(&cfg.Store.Prefix, "etcd-prefix", "fencegate/", "`prefix` of every etcd key fencegate writes")
	fs.StringVar(&cfg.Etcd.Username, "etcd-username", "", "etcd user `name` (with --etcd-password)")
	fs.StringVar(&cfg.Etcd.Password, "etcd-password", "", "etcd `password`")
	fs.StringVar(&caFile, "etcd-ca", "", "PEM `file` of the CAs that sign etcd's server certificates\n(empty: the system's roots, for https:// endpoints)")
	fs.StringVar(&certFile, "etcd-cert", "", "PEM `file` of the client certificate for etcd (with --etcd-key)")
	fs.StringVar(&keyFile, "etcd-key", "", "PEM `file` of the client certificate's private key")
	fs.DurationVar(&cfg.Etcd.DialTimeout, "etcd-dial-timeout", 5*time.Second, "bound on connecting (and authenticating) to etcd")
	fs.DurationVar(&cfg.Store.RequestTimeout, "etcd-request-timeout", 2*time.Second, "bound on each etcd request, such as a fence check")
	fs.StringVar(&cfg.S3.Endpoint, "s3-endpoint", "", "S3 server `URL`, such as http://127.0.0.1:7070 (empty: AWS S3 in --s3-region)")
	fs.StringVar(&cfg.S3.Region, "s3-region", "us-east-1", "S3 signing `region`")
	fs.StringVar(&cfg.S3.AccessKeyID, "s3-access-key", "", "S3 access key `id` (with --s3-secret-key; empty: the AWS SDK's default chain)")
	fs.StringVar(&cfg.S3.SecretAccessKey, "s3-secret-key", "", "S3 secret access `key`")
	fs.BoolVar(&cfg.S3.UsePathStyle, "s3-path-style", false, "address buckets as endpoint/bucket/key, as most S3-compatible servers need")
	fs.IntVar(&cfg.S3.MaxConnsPerHost, "s3-max-conns", 256, "most connections to S3 at once; requests beyond wait for one")
	fs.DurationVar(&cfg.S3.ConnWaitTimeout, "s3-conn-wait-timeout", 5*time.Second, "bound on a request's wait for a connection to S3 (504 upstream-timeout beyond)")
	addS3APIFlags(fs, &cfg.S3API, "")
	shared := addSharedFlags(cmd, &cfg.Shared)
	if err := cmd.parse(args, lookupEnv, stdout); err != nil {
		return Serve{}, err
	}

	var errs []error
	report := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	report(validateListen("listen", cfg.Listen))
	cfg.Etcd.Endpoints = splitList(endpoints)
	report(validateEtcdEndpoints(cfg.Etcd.Endpoints))
	if cfg.Store.Prefix == "" {
		report(errors.New("--etcd-prefix must not be empty"))
	}
	if (cfg.Etcd.Username == "") != (cfg.Etcd.Password == "") {
		report(errors.New("--etcd-username and --etcd-password go together: set both or neither"))
	}
	tlsConfig, err := etcdTLS(caFile, certFile, keyFile)
	report(err)
	cfg.Etcd.TLS = tlsConfig
	if tlsConfig != nil {
		for _, e := range cfg.Etcd.Endpoints {
			if strings.HasPrefix(e, "http://") {
				report(fmt.Errorf("--etcd-endpoints %q is http:// but --etcd-ca, --etcd-cert or --etcd-key is set: use https://", e))
			}
		}
	}
	report(positive("etcd-dial-timeout", cfg.Etcd.DialTimeout))
	report(positive("etcd-request-timeout", cfg.Store.RequestTimeout))
	report(validateS3Endpoint(cfg.S3.Endpoint))
	if cfg.S3.Region == "" {
		report(errors.New("--s3-region must not be empty"))
	}
	if cfg.S3.MaxConnsPerHost < 1 {
		report(fmt.Errorf("--s3-max-conns %d: must be at least 1", cfg.S3.MaxConnsPerHost))
	}
	report(positive("s3-conn-wait-timeout", cfg.S3.ConnWaitTimeout))
	if (cfg.S3.AccessKeyID == "") != (cfg.S3.SecretAccessKey == "") {
		report(errors.New("--s3-access-key and --s3-secret-key go together: set both or neither (neither: the AWS SDK's default chain)"))
	}
	report(shared.finish(cmd, &cfg.Shared))
	_, err = finishS3API(&cfg.S3API, cfg.Listen, cfg.Auth, false)
	report(err)
	report(extra)
	if len(errs) > 0 {
		return Serve{}, &UsageError{fmt.Errorf("serve: %w", cmd.locate(errors.Join(errs...)))}
	}
	return cfg, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// validateEtcdEndpoints checks that there is at least one endpoint and that
// each is an http(s):// URL with a host, or a host:port.
func validateEtcdEndpoints(endpoints []string) error {
	if len(endpoints) == 0 {
		return fmt.Errorf("--etcd-endpoints is required (or %s, or etcd.endpoints in the --config file), "+
			"such as http://127.0.0.1:2379; for a local etcd and S3 server, run `fencegate dev`", EnvName("etcd-endpoints"))
	}
	schemes := make(map[string]bool)
	for _, e := range endpoints {
		if err := validateEtcdEndpoint(e); err != nil {
			return fmt.Errorf("--etcd-endpoints %w", err)
		}
		scheme, _, ok := strings.Cut(e, "://")
		if !ok {
			scheme = "http"
		}
		schemes[scheme] = true
	}
	if len(schemes) > 1 {
		return errors.New("--etcd-endpoints mixes http:// and https:// endpoints")
	}
	return nil
}

// etcdTLS loads the TLS configuration for etcd, or returns nil when no TLS
// flag is set.
func etcdTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: set both or neither")
	}
	cfg, err := tlsfiles.Client(caFile, certFile, keyFile)
	switch {
	case errors.Is(err, tlsfiles.ErrCAFile):
		return nil, fmt.Errorf("--etcd-ca: %w", err)
	case err != nil:
		return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
	}
	return cfg, nil
}

// validateS3Endpoint checks that endpoint is empty or an http(s):// URL with
// a host.
func validateS3Endpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--s3-endpoint %q: want a URL such as http://127.0.0.1:7070", endpoint)
	}
	return nil
}

// S3EndpointForLog names the S3 endpoint in logs, without any password.
func S3EndpointForLog(endpoint string) string {
	if endpoint == "" {
		return "AWS"
	}
	if u, err := url.Parse(endpoint); err == nil {
		return u.Redacted()
	}
	return endpoint
}
