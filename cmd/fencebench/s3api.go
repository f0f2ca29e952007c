package main

// The S3 API cells: PutObject with aws-sdk-go-v2 through the gateway's S3
// API (fencegate serve --s3-listen), against the same SDK client writing
// straight to S3 (modeDirectSDK); and the same PutObject sent with Go's
// net/http, against the REST API's PUT (modeGateway).

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyrand "github.com/aws/smithy-go/rand"

	"fencegate/api"
	s3backend "fencegate/backends/s3"
	"fencegate/internal/devstack"
)

// modeS3API is a PutObject with aws-sdk-go-v2, set up as modeDirectSDK's
// client, through the S3 API of a gateway (fencegate serve --s3-listen, a
// child process, auth on with the bench's S3 access key), the token in
// the object's metadata as `aws s3 cp --metadata fence-token=N` sends it.
// The door does the conditional write; the client sends none.
const modeS3API = "s3api"

// The S3 API cells' shape: s3api_c64_ratio_vs_direct_sdk is modeS3API's
// rate over modeDirectSDK's, and s3api_cpu_ratio_vs_rest
// modeS3APINetHTTP's gateway CPU per write over modeGateway's (the REST
// API's), all at this shape.
const (
	s3APIPattern     = patternDistinct
	s3APISize        = 1 << 10
	s3APIConcurrency = 64
)

// s3APIWindows is the window of every cell of the S3 API cells' shape as
// a multiple of --duration: the summary's s3api_cpu_ratio_vs_rest is two
// gateways' CPU per write, each read over a quarter of its window in
// each round, and over the short set's 3 s it moved by about a tenth
// from run to run.
const s3APIWindows = 3

// s3APIShape reports whether s is the shape the S3 API cell runs at.
func s3APIShape(pattern string, size int64, concurrency int) bool {
	return pattern == s3APIPattern && size == s3APISize && concurrency == s3APIConcurrency
}

// The bench's S3 access key on the S3 API gateway.
const (
	s3APIAccessKey = "fencebench-s3api"
	s3APISecret    = "fencebench-s3api-secret-0123456789abcdef"
)

// s3APIConfig is the S3 API gateway's config file: an identity that may
// do everything, with the bench's S3 access key (its secret in a file
// next to it) and an API key that nobody uses.
const s3APIConfig = `auth:
  identities:
    - name: fencebench
      grants: [{prefix: "", operations: [admin]}]
      s3_keys: [{access_key_id: ` + s3APIAccessKey + `, secret_file: s3api.secret}]
      api_keys: ["sha256:0000000000000000000000000000000000000000000000000000000000000001"]
`

// startS3APIGateway runs the gateway of modeS3API and returns it and the
// URL of its S3 API.
func startS3APIGateway(ctx context.Context, st *stack, bin, logLevel string) (*gatewayProcess, string, error) {
	dir := filepath.Join(st.workDir, "s3api")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "s3api.secret"), []byte(s3APISecret+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	config := filepath.Join(dir, "fencegate.yaml")
	if err := os.WriteFile(config, []byte(s3APIConfig), 0o600); err != nil {
		return nil, "", err
	}
	port, err := devstack.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	g, err := startMeasuredGateway(ctx, st, modeS3API, bin, st.s3Endpoint, logLevel, "--config", config, "--s3-listen", addr)
	if err != nil {
		return nil, "", err
	}
	return g, "http://" + addr, nil
}

// newS3APIClient is modeS3API's client: newDirectClient's set-up, with
// the S3 API's endpoint and the bench's key.
func newS3APIClient(st *stack, endpoint string, pool int) *s3.Client {
	door := *st
	door.s3Endpoint, door.accessKey, door.secretKey = endpoint, s3APIAccessKey, s3APISecret
	client, _ := newDirectClient(&door, pool)
	return client
}

// s3APIPut is modeS3API: each write carries benchToken, so a refusal
// (stale, or a lost race on a hot object) is a conflict.
func s3APIPut(client *s3.Client, bucket string, size int64) operation {
	token := map[string]string{api.MetadataFenceToken: benchToken.String()}
	return func(ctx context.Context, w *worker) (outcome, error) {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(bucket),
			Key:           aws.String(w.key),
			Body:          w.nextBody(),
			ContentLength: aws.Int64(size),
			Metadata:      token,
		})
		switch {
		case err == nil:
			return outcomeOK, nil
		case lostRace(err):
			return outcomeConflict, nil
		}
		return outcomeError, fmt.Errorf("s3api put: %w", err)
	}
}

// modeS3APINetHTTP is modeS3API's PutObject as aws-sdk-go-v2 puts it on
// the wire (its headers, taken from the SDK itself by sdkPutObject, and
// signed as the SDK's v4 signer signs them), sent with Go's net/http as
// modeGateway sends the REST API's PUT, to the same S3 API gateway.
//
// It is the cell whose gateway CPU per write the summary compares with
// the REST API's. The gateway's work is set by the requests it reads,
// which are modeS3API's; but on a machine whose cores the load's client
// shares with the gateways, the client's CPU is taken from the gateway's:
// the SDK's middleware costs about twice the CPU per write of the REST
// cell's net/http client, so modeS3API's gateway reaches fewer writes a
// second than modeGateway's, and each then costs it more (fewer writes
// share each wake-up and each batch of fence checks in etcd). With
// clients of like cost, the two gateways reach like rates, and the ratio
// is their own code's.
const modeS3APINetHTTP = "s3api-nethttp"

// sdkPutObject is the PutObject that client sends for a 1 KiB body with
// the bench's token, caught before it leaves: its URL's query and its
// headers, less those that change with every request (the date, the
// signature, the SDK's invocation id). The client must sign with an
// unsigned payload, as the bench's clients do, so that the one request
// stands for every body.
func sdkPutObject(ctx context.Context, client *s3.Client) (query string, header http.Header, err error) {
	opts := client.Options()
	var caught catchRequest
	opts.HTTPClient = &caught
	_, err = s3.New(opts).PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String("bucket"),
		Key:           aws.String("key"),
		Body:          bytes.NewReader(make([]byte, s3APISize)),
		ContentLength: aws.Int64(s3APISize),
		Metadata:      map[string]string{api.MetadataFenceToken: benchToken.String()},
	})
	if err != nil {
		return "", nil, fmt.Errorf("the SDK's PutObject: %w", err)
	}
	r := caught.req
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != v4UnsignedPayload {
		return "", nil, fmt.Errorf("the SDK's PutObject has X-Amz-Content-Sha256 %q; want %s", got, v4UnsignedPayload)
	}
	header = r.Header.Clone()
	for _, h := range []string{"Authorization", "X-Amz-Date", "Amz-Sdk-Invocation-Id"} {
		header.Del(h)
	}
	return r.URL.RawQuery, header, nil
}

// v4UnsignedPayload is the payload hash of a request signed without its
// body.
const v4UnsignedPayload = "UNSIGNED-PAYLOAD"

// catchRequest is an SDK HTTP client that keeps the request it is given
// and answers 200 without sending it.
type catchRequest struct{ req *http.Request }

func (c *catchRequest) Do(r *http.Request) (*http.Response, error) {
	c.req = r
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// s3APINetHTTPPut is modeS3APINetHTTP: sdkPutObject's request to
// endpoint, with a new invocation id, signed as the SDK signs it by the
// write path's signer (s3backend.RequestSigner), which costs the client
// less CPU than the SDK's. Like modeS3API's, a refusal is a conflict.
func s3APINetHTTPPut(ctx context.Context, client *http.Client, sdk *s3.Client, endpoint, bucket string, size int64) (operation, error) {
	query, header, err := sdkPutObject(ctx, sdk)
	if err != nil {
		return nil, err
	}
	opts := sdk.Options()
	creds, err := opts.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	var signer s3backend.RequestSigner
	prefix := endpoint + "/" + bucket + "/"
	return func(ctx context.Context, w *worker) (outcome, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, prefix+w.key+"?"+query, w.nextBody())
		if err != nil {
			return outcomeError, err
		}
		req.ContentLength = size
		req.Header = header.Clone()
		req.Header.Set("Amz-Sdk-Invocation-Id", invocationID())
		signer.Sign(creds, req, opts.Region, time.Now())
		status, body, err := send(client, req)
		switch {
		case err != nil:
			return outcomeError, err
		case status == http.StatusOK:
			return outcomeOK, nil
		case lostRaceStatus(status):
			return outcomeConflict, nil
		}
		return outcomeError, &errStatus{status, string(body)}
	}, nil
}

// invocationID is a new Amz-Sdk-Invocation-Id, made as the SDK makes it.
func invocationID() string {
	id, _ := smithyrand.NewUUID(rand.Reader).GetUUID() // crypto/rand does not fail
	return id
}
