package s3_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fencegate/api"
	"fencegate/backends/s3"
)

// BenchmarkPut is the backend's client-side cost of one conditional write:
// the SDK's request building, signing and answer parsing, and the HTTP
// round trip on loopback to a server that answers at once (no S3 work).
func BenchmarkPut(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	}))
	defer srv.Close()
	client, err := s3.New(context.Background(), s3.Config{Endpoint: srv.URL, AccessKeyID: "bench", SecretAccessKey: "bench-secret", UsePathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1<<10)
	in := api.PutObjectInput{
		Path:     api.ObjectPath{Bucket: "bench", Key: "run/w1"},
		Size:     int64(len(body)),
		Token:    1,
		Replaces: api.ObjectVersion{Exists: true, ETag: `"fedcba9876543210fedcba9876543210"`},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		in.Body = bytes.NewReader(body)
		if _, err := client.Put(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignedHTTPPut is the same conditional write without the SDK's
// operation machinery: a SigV4-signed net/http request (the SDK's own
// signer). It is not how the backend writes; it shows what the SDK's
// middleware stack costs on top of the HTTP round trip.
func BenchmarkSignedHTTPPut(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	}))
	defer srv.Close()
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: "bench", SecretAccessKey: "bench-secret"}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := make([]byte, 1<<10)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/bench/run/w1", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("If-Match", `"fedcba9876543210fedcba9876543210"`)
		req.Header.Set("X-Amz-Meta-"+api.MetadataFenceToken, "1")
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		if err := signer.SignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("ETag") == "" {
			b.Fatal("no ETag")
		}
	}
}

// BenchmarkObserve is the HEAD that the ETag cache saves.
func BenchmarkObserve(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.Header().Set("X-Amz-Meta-Fence-Token", "1")
	}))
	defer srv.Close()
	client, err := s3.New(context.Background(), s3.Config{Endpoint: srv.URL, AccessKeyID: "bench", SecretAccessKey: "bench-secret", UsePathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	p := api.ObjectPath{Bucket: "bench", Key: "run/w1"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Observe(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
