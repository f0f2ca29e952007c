package s3

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sdkSigner signs as the signed path did before it had a signer of its
// own: the SDK's SigV4 signer with S3's settings.
var sdkSigner = v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true })

// TestSigV4SignsAsTheSDK: the signed path's own SigV4 signer gives every
// request exactly the signature, date, token and host of the SDK's
// signer, for PUTs and HEADs with every header the path sends, keys that
// need escaping, session credentials, default and other ports, and a
// day, region or credentials that change (its derived key is cached).
func TestSigV4SignsAsTheSDK(t *testing.T) {
	static := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	session := aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "other-secret", SessionToken: "FQoGZXIvYXdzE//token=="}
	day1 := time.Date(2026, 12, 3, 23, 59, 59, 0, time.UTC)
	day2 := day1.Add(2 * time.Second)
	putHeaders := func(h http.Header) {
		h["Content-Type"] = []string{"application/octet-stream"}
		h["If-Match"] = []string{`"0123456789abcdef0123456789abcdef"`}
		h[fenceTokenHeader] = []string{"18446744073709551615"}
	}
	tests := []struct {
		name       string
		ep         bucketEndpoint
		method     string
		key, query string
		size       int64
		creds      aws.Credentials
		when       time.Time
		headers    func(http.Header)
	}{
		{"put", bucketEndpoint{scheme: "http", host: "127.0.0.1:7070", path: "/bench", rawPath: "/bench", region: "us-east-1"},
			http.MethodPut, "run/w1", "x-id=PutObject", 1024, static, day1, putHeaders},
		{"put, first write", bucketEndpoint{scheme: "https", host: "s3.example.com", path: "/store/bench", rawPath: "/store/bench", region: "eu-west-3"},
			http.MethodPut, "a/b", "x-id=PutObject", 1, static, day1, func(h http.Header) {
				h["Content-Type"] = []string{"text/plain;  charset=utf-8 "}
				h["If-None-Match"] = []string{"*"}
				h[fenceTokenHeader] = []string{"1"}
			}},
		{"put, empty body", bucketEndpoint{scheme: "https", host: "bench.s3.us-west-2.amazonaws.com", region: "us-west-2"},
			http.MethodPut, "empty", "x-id=PutObject", 0, static, day2, func(h http.Header) {
				h[fenceTokenHeader] = []string{"7"}
			}},
		{"put, large body", bucketEndpoint{scheme: "https", host: "s3.example.com:443", path: "/b", rawPath: "/b", region: "us-east-1"},
			http.MethodPut, "big", "x-id=PutObject", continueThreshold, session, day1, func(h http.Header) {
				putHeaders(h)
				h["Expect"] = []string{"100-continue"}
			}},
		{"put, key to escape", bucketEndpoint{scheme: "http", host: "s3.example.com:80", path: "/b", rawPath: "/b", region: "us-east-1"},
			http.MethodPut, "dir with space/ünï+cødé%20?&=#;/~*'()!$", "x-id=PutObject", 10, static, day1, putHeaders},
		{"put, key with slashes", bucketEndpoint{scheme: "http", host: "[::1]:9000", path: "/b", rawPath: "/b", region: "us-east-1"},
			http.MethodPut, "/lead//double/", "x-id=PutObject", 10, session, day2, putHeaders},
		{"head", bucketEndpoint{scheme: "http", host: "127.0.0.1:7070", path: "/bench", rawPath: "/bench", region: "us-east-1"},
			http.MethodHead, "run/w1", "", 0, static, day1, func(http.Header) {}},
		{"head, conditions", bucketEndpoint{scheme: "https", host: "bench.s3.example.com", region: "ap-south-1"},
			http.MethodHead, "k", "", 0, session, day2, func(h http.Header) {
				h["If-Match"] = []string{`"etag"`}
				h["If-None-Match"] = []string{`"other"`}
				h["If-Modified-Since"] = []string{day1.Format(http.TimeFormat)}
				h["If-Unmodified-Since"] = []string{day2.Format(http.TimeFormat)}
			}},
	}
	newRequest := func(c int) *http.Request {
		tt := tests[c]
		var body io.Reader
		if tt.method == http.MethodPut {
			body = strings.NewReader(strings.Repeat("x", int(min(tt.size, 16))))
		}
		return (&signedHTTP{}).buildRequest(context.Background(), tt.ep, tt.method, tt.key, tt.query, body, tt.size, tt.headers)
	}
	var signer sigV4
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, got := newRequest(i), newRequest(i)
			if err := sdkSigner.SignHTTP(context.Background(), tt.creds, want, unsignedPayload, "s3", tt.ep.region, tt.when); err != nil {
				t.Fatal(err)
			}
			signer.sign(tt.creds, got, tt.query, tt.ep.region, tt.when)
			if got.Host != want.Host || got.URL.String() != want.URL.String() {
				t.Errorf("request for %s%s; want %s%s", got.Host, got.URL, want.Host, want.URL)
			}
			for _, name := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
				if g, w := got.Header.Values(name), want.Header.Values(name); strings.Join(g, "|") != strings.Join(w, "|") {
					t.Errorf("%s: %q\nwant %q", name, g, w)
				}
			}
			if len(got.Header) != len(want.Header) {
				t.Errorf("headers %v\nwant %v", got.Header, want.Header)
			}
		})
	}
}

// BenchmarkSign is the signing of one conditional PUT, by the SDK's
// signer and by the signed path's own.
func BenchmarkSign(b *testing.B) {
	creds := aws.Credentials{AccessKeyID: "bench", SecretAccessKey: "bench-secret"}
	ep := bucketEndpoint{scheme: "http", host: "127.0.0.1:7070", path: "/bench", rawPath: "/bench", region: "us-east-1"}
	s := &signedHTTP{}
	headers := func(h http.Header) {
		h["Content-Type"] = []string{"application/octet-stream"}
		h["If-Match"] = []string{`"fedcba9876543210fedcba9876543210"`}
		h[fenceTokenHeader] = []string{"1"}
	}
	body := strings.NewReader("")
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := s.buildRequest(context.Background(), ep, http.MethodPut, "run/w1", "x-id=PutObject", body, 1024, headers)
			if err := sdkSigner.SignHTTP(context.Background(), creds, req, unsignedPayload, "s3", ep.region, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		var signer sigV4
		b.ReportAllocs()
		for b.Loop() {
			req := s.buildRequest(context.Background(), ep, http.MethodPut, "run/w1", "x-id=PutObject", body, 1024, headers)
			signer.sign(creds, req, "x-id=PutObject", ep.region, time.Now())
		}
	})
}
