package s3

import (
	"context"
	"strconv"
	"testing"
)

// TestSignedPathAddressing checks that the signed path addresses buckets
// as the SDK's endpoint resolver does, and leaves to the SDK the endpoints
// it does not sign for (S3 Express directory buckets).
func TestSignedPathAddressing(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		bucket     string
		wantSDK    bool
		wantScheme string
		wantHost   string
		wantPath   string
		wantRegion string
	}{
		{"path style, custom endpoint", Config{Endpoint: "http://127.0.0.1:7070", UsePathStyle: true}, "bench", false, "http", "127.0.0.1:7070", "/bench", "us-east-1"},
		{"path style, endpoint with a base path", Config{Endpoint: "https://s3.example.com/store/", UsePathStyle: true, Region: "eu-west-3"}, "bench", false, "https", "s3.example.com", "/store/bench", "eu-west-3"},
		{"virtual hosted, custom endpoint", Config{Endpoint: "https://s3.example.com"}, "bench", false, "https", "bench.s3.example.com", "", "us-east-1"},
		{"AWS, virtual hosted", Config{Region: "us-west-2"}, "my-bucket", false, "https", "my-bucket.s3.us-west-2.amazonaws.com", "", "us-west-2"},
		{"AWS, path style", Config{Region: "us-west-2", UsePathStyle: true}, "my-bucket", false, "https", "s3.us-west-2.amazonaws.com", "/my-bucket", "us-west-2"},
		{"AWS, S3 Express directory bucket", Config{Region: "us-west-2"}, "b--usw2-az1--x-s3", true, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AccessKeyID, tt.cfg.SecretAccessKey = "id", "secret"
			c, err := New(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.signed == nil {
				t.Fatal("no signed path with static credentials")
			}
			ep := c.signed.endpoint(context.Background(), tt.bucket)
			if ep.sdk != tt.wantSDK || ep.scheme != tt.wantScheme || ep.host != tt.wantHost || ep.path != tt.wantPath || ep.region != tt.wantRegion {
				t.Fatalf("endpoint(%q) = %+v; want sdk %v, %s://%s%s signed for %s", tt.bucket, ep, tt.wantSDK, tt.wantScheme, tt.wantHost, tt.wantPath, tt.wantRegion)
			}
		})
	}
}

// TestEndpointCacheIsBounded: bucket names come from requests, so the
// per-bucket cache stops growing at maxCachedEndpoints.
func TestEndpointCacheIsBounded(t *testing.T) {
	c, err := New(context.Background(), Config{Endpoint: "http://127.0.0.1:7070", UsePathStyle: true, AccessKeyID: "id", SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedEndpoints + 50 {
		bucket := "bucket-" + string(rune('a'+i%26)) + "-" + strconv.Itoa(i)
		if ep := c.signed.endpoint(context.Background(), bucket); ep.path != "/"+bucket {
			t.Fatalf("endpoint(%q) = %+v; want path /%s", bucket, ep, bucket)
		}
	}
	n := 0
	c.signed.endpoints.Range(func(any, any) bool { n++; return true })
	if n != maxCachedEndpoints {
		t.Fatalf("%d endpoints cached; want %d", n, maxCachedEndpoints)
	}
}
