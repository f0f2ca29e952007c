package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"fencegate/api"
	"fencegate/backends/upstream"
)

// BucketRequest sends a read of a bucket, or with bucket "" of the
// service, for the S3 front door's pass-through of ListObjectsV2,
// ListObjects, ListBuckets, HeadBucket and GetBucketLocation: method (GET
// or HEAD) and query as given, signed with the gateway's own credentials
// (no header of the client's is sent). It returns S3's answer whatever its
// status; the caller reads and closes its body. An error means there was
// no answer: api.ErrUpstreamTimeout when no connection came free in time
// or S3 did not answer in time, else api.ErrUpstream.
func (c *Client) BucketRequest(ctx context.Context, method, bucket string, query url.Values) (*http.Response, error) {
	if method != http.MethodGet && method != http.MethodHead {
		return nil, fmt.Errorf("s3 bucket request: %w: method %s", api.ErrInvalidRequest, method)
	}
	if c.signed == nil {
		return nil, fmt.Errorf("s3 bucket request: %w: bucket reads need static credentials and an endpoint the gateway resolves", api.ErrUpstream)
	}
	ep := c.signed.serviceEndpoint(ctx, bucket)
	if ep.sdk {
		return nil, fmt.Errorf("s3 bucket request %q: %w: the bucket's endpoint is not plain SigV4 S3", bucket, api.ErrUpstream)
	}
	path, rawPath := ep.path, ep.rawPath
	if path == "" {
		path, rawPath = "/", "/"
	}
	req := &http.Request{
		Method:     method,
		URL:        &url.URL{Scheme: ep.scheme, Host: ep.host, Path: path, RawPath: rawPath, RawQuery: query.Encode()},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, 4),
		Host:       ep.host,
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	req = req.WithContext(ctx)
	req.Header["X-Amz-Content-Sha256"] = []string{unsignedPayload}
	creds, err := c.signed.creds.Retrieve(ctx)
	if err == nil {
		err = c.signed.signer.SignHTTP(ctx, creds, req, unsignedPayload, "s3", ep.region, time.Now().Add(time.Duration(c.signed.clockSkew.Load())).UTC())
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("s3 bucket request %q: %w: %w", bucket, api.ErrUpstream, err)
	}
	resp, err := c.signed.http.Do(req)
	if err != nil {
		waitErr := errors.Is(context.Cause(ctx), errConnWait)
		release()
		if waitErr {
			return nil, fmt.Errorf("s3 bucket request %q: %w: %w (%v)", bucket, api.ErrUpstreamTimeout, errConnWait, c.connWait)
		}
		return nil, fmt.Errorf("s3 bucket request %q: %w", bucket, upstream.Transport(err))
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// serviceEndpoint is endpoint for bucket, or for the service itself
// (ListBuckets) when bucket is "".
func (s *signedHTTP) serviceEndpoint(ctx context.Context, bucket string) bucketEndpoint {
	if bucket != "" {
		return s.endpoint(ctx, bucket)
	}
	resolved, err := s.resolver.ResolveEndpoint(ctx, s.params)
	if err != nil {
		return bucketEndpoint{sdk: true}
	}
	region, ok := plainSigV4(resolved.Properties)
	if !ok || len(resolved.Headers) != 0 || resolved.URI.RawQuery != "" {
		return bucketEndpoint{sdk: true}
	}
	u := resolved.URI
	return bucketEndpoint{scheme: u.Scheme, host: u.Host, path: u.Path, rawPath: u.EscapedPath(), region: region}
}
