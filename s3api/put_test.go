package s3api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
)

// signRequest signs req as S3 clients do (the path as sent, the payload's
// SHA-256).
func signRequest(tb testing.TB, req *http.Request, accessKey, secret string, payload []byte) {
	tb.Helper()
	sum := sha256.Sum256(payload)
	signWithPayloadHash(tb, req, accessKey, secret, hex.EncodeToString(sum[:]))
}

// signWithPayloadHash signs req as accessKey with the payload hash given
// (a body's SHA-256 in hex, or UNSIGNED-PAYLOAD), in X-Amz-Content-Sha256
// too.
func signWithPayloadHash(tb testing.TB, req *http.Request, accessKey, secret, hash string) {
	tb.Helper()
	req.Header.Set("X-Amz-Content-Sha256", hash)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret}, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		tb.Fatal(err)
	}
}

// s3ErrorBody is the door's XML error, as a test reads it.
type s3ErrorBody struct {
	Code          string
	Message       string
	Resource      string
	RequestID     string `xml:"RequestId"`
	HighWaterMark string
	// Size and MaxSizeAllowed are S3's members of a size refusal
	// (MetadataTooLarge, RequestHeaderSectionTooLarge); "" when absent.
	Size           string
	MaxSizeAllowed string
}

func readS3Error(tb testing.TB, resp *http.Response) s3ErrorBody {
	tb.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	var e s3ErrorBody
	if err := xml.Unmarshal(data, &e); err != nil {
		tb.Fatalf("error body %q: %v", data, err)
	}
	return e
}

// TestPutObjectFencedSeed plays the seed scenario with aws-sdk-go-v2's
// PutObject (default checksums, over TLS: aws-chunked with a CRC32
// trailer): tokens 33 and 34 write, 33 again is refused 409
// StaleFenceToken naming the mark, and S3 holds token 34's bytes.
func TestPutObjectFencedSeed(t *testing.T) {
	d := newDoor(t, doorOptions{})
	c := d.client(writerKey)
	out, err := d.put(t, c, "report.csv", 33, "rows of 33")
	if err != nil {
		t.Fatalf("put 33: %v", err)
	}
	if out.ETag == nil || *out.ETag == "" {
		t.Fatalf("put 33: no ETag")
	}
	if out.Size == nil || *out.Size != int64(len("rows of 33")) {
		t.Errorf("put 33 answered the size %v; want %d (x-amz-object-size)", out.Size, len("rows of 33"))
	}
	if _, err := d.put(t, c, "report.csv", 34, "rows of 34"); err != nil {
		t.Fatalf("put 34: %v", err)
	}
	d.s3.Reset()
	_, err = d.put(t, c, "report.csv", 33, "rows of 33, late")
	resp := wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	if got := resp.Header.Get("X-Fence-High-Water-Mark"); got != "34" {
		t.Errorf("X-Fence-High-Water-Mark = %q; want 34", got)
	}
	if !strings.Contains(err.Error(), "high-water mark is 34") {
		t.Errorf("error %q does not name the high-water mark", err)
	}
	if n := d.s3.CountMethod(http.MethodPut); n != 0 {
		t.Errorf("the stale write sent %d PUTs to S3; want 0", n)
	}
	body, token, ok := d.stored(t, "report.csv")
	if !ok || body != "rows of 34" || token != "34" {
		t.Fatalf("S3 holds %q with token %q (exists %v); want token 34's bytes", body, token, ok)
	}
	if hwm := d.mark(t, "report.csv"); hwm != 34 {
		t.Errorf("mark = %d; want 34", hwm)
	}
}

// TestPutObjectTokenSpellings: the token as metadata, as X-Fence-Token
// (signed), both the same; and the refusals: none, malformed, two that
// differ. A refused write sends nothing to S3 and raises no mark.
func TestPutObjectTokenSpellings(t *testing.T) {
	d := newDoor(t, doorOptions{})
	tests := []struct {
		name     string
		metadata map[string]string
		header   []string // X-Fence-Token values
		status   int
		code     string
		token    string // recorded on success
	}{
		{name: "metadata", metadata: map[string]string{"fence-token": "5"}, status: 200, token: "5"},
		{name: "header", header: []string{"6"}, status: 200, token: "6"},
		{name: "both alike", metadata: map[string]string{"fence-token": "7"}, header: []string{"7"}, status: 200, token: "7"},
		{name: "both differ", metadata: map[string]string{"fence-token": "9"}, header: []string{"8"}, status: 400, code: "InvalidArgument"},
		{name: "none", status: 428, code: "MissingFenceToken"},
		{name: "malformed metadata", metadata: map[string]string{"fence-token": "07"}, status: 400, code: "InvalidFenceToken"},
		{name: "malformed header", header: []string{"-1"}, status: 400, code: "InvalidFenceToken"},
		{name: "zero", metadata: map[string]string{"fence-token": "0"}, status: 400, code: "InvalidFenceToken"},
		{name: "too large", metadata: map[string]string{"fence-token": "9223372036854775808"}, status: 400, code: "InvalidFenceToken"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "obj" + string(rune('a'+i))
			var opts []func(*s3.Options)
			for _, h := range tt.header {
				opts = append(opts, withHeader(api.HeaderFenceToken, h))
			}
			d.s3.Reset()
			_, err := d.client(writerKey, opts...).PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader("x"), Metadata: tt.metadata,
			})
			if tt.status == 200 {
				if err != nil {
					t.Fatalf("put: %v", err)
				}
				if _, token, _ := d.stored(t, key); token != tt.token {
					t.Fatalf("recorded token %q; want %q", token, tt.token)
				}
				return
			}
			wantAPIError(t, err, tt.status, tt.code)
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
			if _, _, ok := d.stored(t, key); ok {
				t.Errorf("object stored")
			}
			if hwm := d.mark(t, key); hwm != 0 {
				t.Errorf("mark raised to %d", hwm)
			}
		})
	}
}

// TestPutObjectRawTokenAttacks sends hand-signed requests: X-Fence-Token
// present but not signed (added on the way) is refused; two
// X-Amz-Meta-Fence-Token headers are malformed; a presigned URL with the
// token in its query and another in a header is refused.
func TestPutObjectRawTokenAttacks(t *testing.T) {
	d := newDoor(t, doorOptions{})
	objectURL := d.url + "/" + d.bucket + "/raw"
	t.Run("unsigned X-Fence-Token", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, objectURL, bytes.NewReader([]byte("x")))
		signRequest(t, req, writerKey, secretOf+writerKey, []byte("x"))
		req.Header.Set(api.HeaderFenceToken, "5") // after signing
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if e := readS3Error(t, resp); resp.StatusCode != http.StatusForbidden || e.Code != "AccessDenied" {
			t.Fatalf("got %d %s; want 403 AccessDenied", resp.StatusCode, e.Code)
		}
	})
	t.Run("two metadata headers", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, objectURL, bytes.NewReader([]byte("x")))
		req.Header.Add("X-Amz-Meta-Fence-Token", "5")
		req.Header.Add("X-Amz-Meta-Fence-Token", "5")
		resp := d.rawRequest(t, writerKey, req, []byte("x"))
		if e := readS3Error(t, resp); resp.StatusCode != http.StatusBadRequest || e.Code != "InvalidFenceToken" {
			t.Fatalf("got %d %s; want 400 InvalidFenceToken", resp.StatusCode, e.Code)
		}
	})
	// A presigned URL may carry the token in its query (a client that
	// hoists x-amz-meta-* there), and a header may say another.
	presigned := func(t *testing.T, headerToken string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, objectURL+"?X-Amz-Expires=900&X-Amz-Meta-Fence-Token=5", strings.NewReader(body))
		if headerToken != "" {
			req.Header.Set("X-Amz-Meta-Fence-Token", headerToken)
		}
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		signedURL, signedHeader, err := signer.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: writerKey, SecretAccessKey: secretOf + writerKey}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out, _ := http.NewRequest(http.MethodPut, signedURL, strings.NewReader(body))
		for name, values := range signedHeader {
			if !strings.EqualFold(name, "host") {
				out.Header[name] = values
			}
		}
		resp, err := d.srv.Client().Do(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	t.Run("presigned query token and header token differ", func(t *testing.T) {
		resp := presigned(t, "6", "x")
		if e := readS3Error(t, resp); resp.StatusCode != http.StatusBadRequest || e.Code != "InvalidArgument" {
			t.Fatalf("got %d %s; want 400 InvalidArgument", resp.StatusCode, e.Code)
		}
		if hwm := d.mark(t, "raw"); hwm != 0 {
			t.Fatalf("mark raised to %d", hwm)
		}
	})
	t.Run("presigned query token", func(t *testing.T) {
		resp := presigned(t, "", "presigned")
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("presigned put: %d %s", resp.StatusCode, b)
		}
		if body, token, _ := d.stored(t, "raw"); body != "presigned" || token != "5" {
			t.Fatalf("S3 holds %q with token %q; want the presigned write, token 5", body, token)
		}
	})
	if n := d.mark(t, "nothing"); n != 0 {
		t.Fatal(n)
	}
}

// TestPutObjectUnavailable: with etcd down, PutObject gets 503
// ServiceUnavailable with Retry-After, and nothing is written.
func TestPutObjectUnavailable(t *testing.T) {
	d := newDoor(t, doorOptions{})
	d.etcd.Stop(t)
	d.s3.Reset()
	_, err := d.put(t, d.client(writerKey), "k", 5, "x")
	resp := wantAPIError(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After")
	}
	if n := d.s3.CountMethod(http.MethodPut); n != 0 {
		t.Errorf("%d PUTs reached S3", n)
	}
	if _, _, ok := d.stored(t, "k"); ok {
		t.Errorf("object stored")
	}
}

// TestPutObjectLostRace: a body too large to replay loses its conditional
// write to a write that lands between its fence check and its PUT: 409
// ConditionalRequestConflict, and S3 keeps the other write's bytes.
func TestPutObjectLostRace(t *testing.T) {
	var d *door
	hooks := &gateway.TestHooks{AfterFenceCheck: func(ctx context.Context, resource api.Resource, token api.Token) {
		if token != 9 {
			return
		}
		if _, err := d.minio.PutObject(context.Background(), d.bucket, "race", strings.NewReader("interloper"), -1, minio.PutObjectOptions{}); err != nil {
			t.Error(err)
		}
	}}
	d = newDoor(t, doorOptions{gateway: gateway.Config{BufferBytes: 1024, TestHooks: hooks}})
	_, err := d.put(t, d.client(writerKey), "race", 9, strings.Repeat("b", 4096))
	wantAPIError(t, err, http.StatusConflict, "ConditionalRequestConflict")
	if body, _, _ := d.stored(t, "race"); body != "interloper" {
		t.Fatalf("S3 holds %q; want the interloper's bytes", body)
	}
}

// TestPutObjectAuthorization: reader may not write (403 AccessDenied, no
// mark); logs may write under logs/ only.
func TestPutObjectAuthorization(t *testing.T) {
	d := newDoor(t, doorOptions{})
	_, err := d.put(t, d.client(readerKey), "k", 5, "x")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	_, err = d.put(t, d.client(logsKey), "k", 5, "x")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	if hwm := d.mark(t, "k"); hwm != 0 {
		t.Errorf("a forbidden write raised the mark to %d", hwm)
	}
	if _, err := d.put(t, d.client(logsKey), "logs/a", 5, "x"); err != nil {
		t.Fatalf("logs writing logs/a: %v", err)
	}
}
