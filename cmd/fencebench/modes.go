package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"fencegate/api"
	s3backend "fencegate/backends/s3"
	"fencegate/tokenstore"
)

// The modes: what one request of a cell is.
const (
	// modeDirect is a conditional PUT straight to S3, If-Match the ETag
	// of the writer's own last write (If-None-Match: * for the first),
	// with fencegate's own S3 backend (backends/s3: the same signed
	// request, over the same kind of connection pool, as the gateway's):
	// no fencing at all, the floor.
	modeDirect = "direct"
	// modeDirectSDK is modeDirect through aws-sdk-go-v2's PutObject
	// operation, set up as fencegate's backend sets up its SDK client: what
	// an application that writes with the SDK pays.
	modeDirectSDK = "direct-sdk"
	// modeClientSide is fencing done by the client itself, in this
	// process, with fencegate's own packages: HEAD, the etcd fence-check
	// transaction, conditional PUT (tokenstore and backends/s3, as the
	// gateway does, without its ETag cache).
	modeClientSide = "clientside"
	// modeGateway is a PUT through the gateway (fencegate serve, a child
	// process).
	modeGateway = "gateway"
	// modeBaseline is modeGateway through --baseline-fencegate, another
	// build of the gateway, for before/after figures in one run.
	modeBaseline = "baseline"
	// modeStale is a PUT through the gateway with a token below the
	// object's high-water mark, which the gateway already knows.
	modeStale = "stale"
	// modeStaleBaseline is modeStale through --baseline-fencegate.
	modeStaleBaseline = "stale-baseline"
)

// writeAttempts is how many conditional writes a direct or client-side
// writer makes before it gives up on a hot object, as the gateway does.
const writeAttempts = 3

// benchToken is the token of accepted writes: one lock holder, many
// writes. Stale writes use staleToken against objects primed with
// primeToken.
const (
	benchToken api.Token = 1
	staleToken api.Token = 1
	primeToken api.Token = 1 << 40
)

// newDirectClient returns modeDirectSDK's aws-sdk-go-v2 S3 client, set up
// as fencegate's S3 backend sets up its own (connection pool, no SDK
// retries, no body checksums, unsigned payload), so that it pays for
// nothing but the SDK's operation machinery.
func newDirectClient(st *stack, pool int) (*s3.Client, *http.Transport) {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = pool
		t.MaxIdleConnsPerHost = pool
		t.MaxConnsPerHost = pool
		t.IdleConnTimeout = 90 * time.Second
		t.ResponseHeaderTimeout = 30 * time.Second
	})
	client := s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(st.s3Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(st.accessKey, st.secretKey, ""),
		HTTPClient:                 httpClient,
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware},
	})
	return client, httpClient.GetTransport()
}

// directPut is modeDirect. On a lost race (hot object) the writer reads
// the object's current ETag with a HEAD and tries again.
func directPut(objects *s3backend.Client, bucket string, size int64) operation {
	return func(ctx context.Context, w *worker) (outcome, error) {
		path := api.ObjectPath{Bucket: bucket, Key: w.key}
		for range writeAttempts {
			replaces := api.ObjectVersion{Exists: w.object.exists, ETag: w.object.etag}
			etag, err := objects.Put(ctx, api.PutObjectInput{Path: path, Body: w.nextBody(), Size: size, Token: benchToken, Replaces: replaces})
			if err == nil {
				w.object = objectVersion{exists: true, etag: etag}
				return outcomeOK, nil
			}
			if !errors.Is(err, api.ErrConcurrentModification) {
				return outcomeError, fmt.Errorf("direct put: %w", err)
			}
			seen, err := objects.Observe(ctx, path)
			if err != nil {
				return outcomeError, fmt.Errorf("direct head: %w", err)
			}
			w.object = objectVersion{exists: seen.Exists, etag: seen.ETag}
		}
		return outcomeConflict, nil
	}
}

// directSDKPut is modeDirectSDK: directPut with the SDK's operations.
func directSDKPut(client *s3.Client, bucket string, size int64) operation {
	token := map[string]string{api.MetadataFenceToken: benchToken.String()}
	return func(ctx context.Context, w *worker) (outcome, error) {
		for range writeAttempts {
			in := &s3.PutObjectInput{
				Bucket:        aws.String(bucket),
				Key:           aws.String(w.key),
				Body:          w.nextBody(),
				ContentLength: aws.Int64(size),
				Metadata:      token,
			}
			if w.object.exists {
				in.IfMatch = aws.String(w.object.etag)
			} else {
				in.IfNoneMatch = aws.String("*")
			}
			out, err := client.PutObject(ctx, in)
			if err == nil {
				w.object = objectVersion{exists: true, etag: aws.ToString(out.ETag)}
				return outcomeOK, nil
			}
			if !lostRace(err) {
				return outcomeError, fmt.Errorf("direct-sdk put: %w", err)
			}
			head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(w.key)})
			switch {
			case err == nil:
				w.object = objectVersion{exists: true, etag: aws.ToString(head.ETag)}
			case statusOf(err) == http.StatusNotFound:
				w.object = objectVersion{}
			default:
				return outcomeError, fmt.Errorf("direct-sdk head: %w", err)
			}
		}
		return outcomeConflict, nil
	}
}

// lostRace reports whether an SDK's error is a lost race
// (lostRaceStatus).
func lostRace(err error) bool {
	return lostRaceStatus(statusOf(err))
}

// lostRaceStatus reports whether a conditional write was refused because
// the object changed: 412, 409 ConditionalRequestConflict, or 404 for an
// If-Match on an object that is gone.
func lostRaceStatus(status int) bool {
	switch status {
	case http.StatusPreconditionFailed, http.StatusConflict, http.StatusNotFound:
		return true
	}
	return false
}

func statusOf(err error) int {
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		return respErr.HTTPStatusCode()
	}
	return 0
}

// clientSidePut is modeClientSide: the protocol of the gateway (observe,
// fence check, conditional write, again on a lost race) run by the
// client, with fencegate's packages, against the same etcd and S3. Each
// write carries nextToken's token.
func clientSidePut(fences *tokenstore.Store, objects *s3backend.Client, bucket string, size int64, nextToken func(*worker) api.Token) operation {
	return func(ctx context.Context, w *worker) (outcome, error) {
		path := api.ObjectPath{Bucket: bucket, Key: w.key}
		resource := path.Resource()
		token := nextToken(w)
		for range writeAttempts {
			seen, err := objects.Observe(ctx, path)
			if err != nil {
				return outcomeError, err
			}
			if err := fences.FenceCheck(ctx, resource, token); err != nil {
				return outcomeError, err
			}
			_, err = objects.Put(ctx, api.PutObjectInput{Path: path, Body: w.nextBody(), Size: size, Token: token, Replaces: seen})
			if err == nil {
				return outcomeOK, nil
			}
			if !errors.Is(err, api.ErrConcurrentModification) {
				return outcomeError, err
			}
		}
		return outcomeConflict, nil
	}
}

// gatewayPut is modeGateway (and modeBaseline): a PUT through the gateway
// at base, with nextToken's token. A retryable 409 (the gateway lost the
// race three times) is a conflict.
func gatewayPut(client *http.Client, base, bucket string, size int64, nextToken func(*worker) string) operation {
	prefix := base + "/v1/objects/" + bucket + "/"
	return func(ctx context.Context, w *worker) (outcome, error) {
		status, body, err := put(ctx, client, prefix+w.key, nextToken(w), w.nextBody(), size)
		switch {
		case err != nil:
			return outcomeError, err
		case status == http.StatusOK || status == http.StatusCreated:
			return outcomeOK, nil
		case status == http.StatusConflict && bytes.Contains(body, []byte("concurrent-modification")):
			return outcomeConflict, nil
		}
		return outcomeError, &errStatus{status, string(body)}
	}
}

// stalePut is modeStale: a PUT with a token below the object's mark,
// which must be refused with 409 stale-token. With raw set it goes through
// a rawConn per worker instead of client.
func stalePut(client *http.Client, raw bool, base, bucket string, size int64) operation {
	prefix := base + "/v1/objects/" + bucket + "/"
	path := "/v1/objects/" + bucket + "/"
	addr := strings.TrimPrefix(base, "http://")
	token := staleToken.String()
	return func(ctx context.Context, w *worker) (outcome, error) {
		var (
			status int
			body   []byte
			err    error
		)
		if raw {
			if w.raw == nil {
				w.raw = &rawConn{addr: addr}
			}
			status, body, err = w.raw.put(ctx, path+w.key, token, w.nextBody(), size)
		} else {
			status, body, err = put(ctx, client, prefix+w.key, token, w.nextBody(), size)
		}
		switch {
		case err != nil:
			return outcomeError, err
		case status == http.StatusConflict && bytes.Contains(body, []byte("stale-token")):
			return outcomeOK, nil
		}
		return outcomeError, &errStatus{status, string(body)}
	}
}

// put sends one fenced PUT and reads the answer whole (up to 64 KiB), so
// that the connection is reused.
func put(ctx context.Context, client *http.Client, url, token string, body io.Reader, size int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.ContentLength = size
	req.Header.Set(api.HeaderFenceToken, token)
	return send(client, req)
}

// send sends req and reads the answer whole (up to 64 KiB), so that the
// connection is reused.
func send(client *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// newHTTPClient is the load's client of the gateways: keep-alive, a
// connection per worker.
func newHTTPClient(pool int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}
