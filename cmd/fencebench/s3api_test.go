package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	s3backend "fencegate/backends/s3"
)

// TestRunS3APICell runs the S3 API cells with their direct-sdk and REST
// gateway cells (64 writers, 1 KiB) against the real stack, auth on: all
// answer without errors (so the net/http cell's signatures are good),
// both S3 API cells went through their own gateway (whose CPU is
// measured), and the summary has s3api_c64_ratio_vs_direct_sdk, the S3
// API gateway's CPU per write and its ratio to the REST API's.
func TestRunS3APICell(t *testing.T) {
	rep := runReport(t, "--modes", "direct-sdk,gateway,s3api,s3api-nethttp", "--patterns", "distinct", "--sizes", "1KiB", "--concurrency", "64",
		"--rounds", "2", "--duration", "400ms", "--warmup", "20ms", "--upload-bytes", "0", "--large-upload-bytes", "0")
	if len(rep.Cells) != 4 {
		t.Fatalf("%d cells; want direct-sdk, gateway, s3api and s3api-nethttp: %+v", len(rep.Cells), rep.Cells)
	}
	for _, c := range rep.Cells {
		if c.OK == 0 || c.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors (%s); want answers and no errors", c.Mode, c.OK, c.Errors, c.FirstError)
		}
		if (c.Mode == modeS3API || c.Mode == modeS3APINetHTTP) && c.CPUPer1000.Gateway == nil {
			t.Errorf("%s: no gateway CPU; want its gateway's", c.Mode)
		}
	}
	for _, field := range []string{"s3api_c64_ratio_vs_direct_sdk", "s3api_gw_cpu_ms_per_write", "s3api_cpu_ratio_vs_rest"} {
		if !strings.Contains(rep.SummaryLine, " "+field+"=") || strings.Contains(rep.SummaryLine, " "+field+"=n/a") {
			t.Errorf("summary %q; want %s with a figure", rep.SummaryLine, field)
		}
	}
}

// TestS3APINetHTTPSendsTheSDKsPutObject: the net/http cell's request is
// the SDK's, as a server reads them: the same method, path and query,
// the same headers with the same values, but for the three that change
// with every request (the date, the invocation id, which is a new UUID
// each time, and the signature, which signs the same headers with the
// same key).
func TestS3APINetHTTPSendsTheSDKsPutObject(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) != s3APISize {
			t.Errorf("%s %s: %d bytes of body (%v); want %d", r.Method, r.URL, len(body), err, s3APISize)
		}
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		w.Header().Set("ETag", `"etag"`)
	}))
	defer srv.Close()

	ctx := context.Background()
	sdk := newS3APIClient(&stack{}, srv.URL, 1)
	w := &worker{key: "run/s3api/w1", body: newBodySource(s3APISize)}
	if got, err := s3APIPut(sdk, "bench", s3APISize)(ctx, w); got != outcomeOK || err != nil {
		t.Fatalf("the SDK's PutObject: %v, %v", got, err)
	}
	op, err := s3APINetHTTPPut(ctx, newHTTPClient(1), sdk, srv.URL, "bench", s3APISize)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := op(ctx, w); got != outcomeOK || err != nil {
			t.Fatalf("the net/http PutObject: %v, %v", got, err)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("%d requests; want 3", len(seen))
	}
	changing := map[string]bool{"Authorization": true, "X-Amz-Date": true, "Amz-Sdk-Invocation-Id": true}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	signedHeaders := regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=(\S+), SignedHeaders=(\S+), Signature=[0-9a-f]{64}$`)
	sdkReq := seen[0]
	for i, r := range seen[1:] {
		if r.Method != sdkReq.Method || r.URL.Path != sdkReq.URL.Path || r.URL.RawQuery != sdkReq.URL.RawQuery || r.ContentLength != sdkReq.ContentLength {
			t.Errorf("request %d: %s %s (%d bytes); the SDK's: %s %s (%d bytes)", i+1, r.Method, r.URL, r.ContentLength, sdkReq.Method, sdkReq.URL, sdkReq.ContentLength)
		}
		for name := range mergeKeys(r.Header, sdkReq.Header) {
			if changing[name] {
				continue
			}
			if got, want := r.Header.Values(name), sdkReq.Header.Values(name); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("request %d: %s %q; the SDK's %q", i+1, name, got, want)
			}
		}
		for name := range changing {
			if r.Header.Get(name) == "" {
				t.Errorf("request %d: no %s", i+1, name)
			}
		}
		if id := r.Header.Get("Amz-Sdk-Invocation-Id"); !uuid.MatchString(id) || id == sdkReq.Header.Get("Amz-Sdk-Invocation-Id") {
			t.Errorf("request %d: invocation id %q; want a new UUID, as the SDK's %q", i+1, id, sdkReq.Header.Get("Amz-Sdk-Invocation-Id"))
		}
		got, want := signedHeaders.FindStringSubmatch(r.Header.Get("Authorization")), signedHeaders.FindStringSubmatch(sdkReq.Header.Get("Authorization"))
		if got == nil || want == nil || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("request %d: Authorization %q; want the credential and signed headers of the SDK's %q", i+1, r.Header.Get("Authorization"), sdkReq.Header.Get("Authorization"))
		}
	}
	if seen[1].Header.Get("Amz-Sdk-Invocation-Id") == seen[2].Header.Get("Amz-Sdk-Invocation-Id") {
		t.Errorf("two requests with one invocation id %q", seen[1].Header.Get("Amz-Sdk-Invocation-Id"))
	}
}

// mergeKeys returns the names of a and b.
func mergeKeys(a, b http.Header) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

// TestS3APIShapeWindow: every cell of the S3 API cells' shape, the REST
// gateway's among them, measures s3APIWindows times --duration; the stale
// cells of that shape and the other shapes measure --duration.
func TestS3APIShapeWindow(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		c    cell
		want time.Duration
	}{
		{cell{modeGateway, s3APIPattern, s3APISize, s3APIConcurrency}, s3APIWindows * cfg.duration},
		{cell{modeS3API, s3APIPattern, s3APISize, s3APIConcurrency}, s3APIWindows * cfg.duration},
		{cell{modeS3APINetHTTP, s3APIPattern, s3APISize, s3APIConcurrency}, s3APIWindows * cfg.duration},
		{cell{modeDirectSDK, s3APIPattern, s3APISize, s3APIConcurrency}, s3APIWindows * cfg.duration},
		{cell{modeStale, s3APIPattern, s3APISize, s3APIConcurrency}, cfg.duration},
		{cell{modeGateway, patternRaise, s3APISize, s3APIConcurrency}, cfg.duration},
		{cell{modeGateway, s3APIPattern, s3APISize, 1}, cfg.duration},
	} {
		if got := cfg.window(tt.c); got != tt.want {
			t.Errorf("window of %v = %v; want %v", tt.c, got, tt.want)
		}
	}
}

// TestS3APINetHTTPSignsAsTheSDK: for modeS3APINetHTTP's request, keys of
// several shapes, hosts with and without a port, and times across a
// day's end, the write path's signer (s3backend.RequestSigner) gives the
// SDK v4 signer's Authorization, byte for byte: the headers the SDK sends
// are not the ones the write path's tests sign.
func TestS3APINetHTTPSignsAsTheSDK(t *testing.T) {
	ctx := context.Background()
	sdk := newS3APIClient(&stack{}, "http://127.0.0.1:9000", 1)
	query, header, err := sdkPutObject(ctx, sdk)
	if err != nil {
		t.Fatal(err)
	}
	var signer s3backend.RequestSigner
	sdkSigner := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: s3APIAccessKey, SecretAccessKey: s3APISecret}
	for _, endpoint := range []string{"http://127.0.0.1:9000", "http://localhost", "http://localhost:80", "https://s3.example.com:8443"} {
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
				signer.Sign(creds, req, "us-east-1", now)
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
