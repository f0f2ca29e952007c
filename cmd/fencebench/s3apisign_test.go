package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestRequestSignerSignsAsTheSDK: for modeS3APINetHTTP's request, keys
// of several shapes, hosts with and without a port, and times across a
// day's end, requestSigner's Authorization is the SDK's v4 signer's,
// byte for byte.
func TestRequestSignerSignsAsTheSDK(t *testing.T) {
	ctx := context.Background()
	sdk := newS3APIClient(&stack{}, "http://127.0.0.1:9000", 1)
	query, header, err := sdkPutObject(ctx, sdk)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := newRequestSigner(s3APIAccessKey, s3APISecret, "us-east-1", query, header)
	if err != nil {
		t.Fatal(err)
	}
	sdkSigner := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: s3APIAccessKey, SecretAccessKey: s3APISecret}
	for _, endpoint := range []string{"http://127.0.0.1:9000", "http://localhost", "https://s3.example.com:8443"} {
		for _, key := range []string{"run/s3api/distinct/1KiB/c64/r0/a0/w12", "a", "with%20space/and%2Bplus", "%C3%A9t%C3%A9/x"} {
			for _, now := range []time.Time{time.Date(2026, 12, 7, 23, 59, 59, 0, time.UTC), time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)} {
				req, err := http.NewRequest(http.MethodPut, endpoint+"/bench/"+key+"?"+query, strings.NewReader("x"))
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = s3APISize
				req.Header = header.Clone()
				req.Header.Set("Amz-Sdk-Invocation-Id", invocationID())
				want := req.Clone(ctx)
				signer.sign(req, now)
				if err := sdkSigner.SignHTTP(ctx, creds, want, v4UnsignedPayload, "s3", "us-east-1", now); err != nil {
					t.Fatal(err)
				}
				if got, want := req.Header.Get("Authorization"), want.Header.Get("Authorization"); got != want {
					t.Errorf("%s %s at %v:\n  Authorization %s\n  the SDK's     %s", endpoint, key, now, got, want)
				}
				if got, want := req.Header.Get("X-Amz-Date"), want.Header.Get("X-Amz-Date"); got != want {
					t.Errorf("X-Amz-Date %s; the SDK's %s", got, want)
				}
			}
		}
	}
}
