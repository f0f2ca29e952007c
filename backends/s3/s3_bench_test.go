package s3_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"fencegate/api"
	"fencegate/backends/s3"
)

// BenchmarkPut is the backend's client-side cost of one conditional write:
// building, signing and sending the request and reading the answer, on
// loopback to a server that answers at once (no S3 work). "signed" is how
// the backend writes (signed.go); "sdk" is the same write through
// aws-sdk-go-v2's PutObject operation, which it replaced.
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
	for _, c := range []struct {
		name   string
		client *s3.Client
	}{{"signed", client}, {"sdk", s3.ThroughSDK(client)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in.Body = bytes.NewReader(body)
				if _, err := c.client.Put(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserve is the HEAD that the ETag cache saves, signed as Put's
// and through the SDK.
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
	for _, c := range []struct {
		name   string
		client *s3.Client
	}{{"signed", client}, {"sdk", s3.ThroughSDK(client)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v, err := c.client.Observe(ctx, p); err != nil || v.Token != 1 {
					b.Fatalf("Observe = %+v, %v; want token 1", v, err)
				}
			}
		})
	}
}
