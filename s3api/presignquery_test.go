package s3api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/s3api/sigv4"
)

// TestPresignedEncryptionAndTagging: a PUT presigned by aws-sdk-go-v2
// with SSE-KMS, a bucket key and tags (the SDK signs the encryption and
// the tagging as headers, and moves
// x-amz-server-side-encryption-bucket-key-enabled into the query) is
// served with their S3 meaning, fenced: the store gets the encryption
// with the bucket key, and the object its tags, as minio-go reads them
// from versitygw; a stale token is 409 StaleFenceToken and changes
// nothing. Changing a value of the signed query is SignatureDoesNotMatch.
func TestPresignedEncryptionAndTagging(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	presign := s3.NewPresignClient(d.client(writerKey))
	body := []byte("presigned with encryption and tags")
	put := func(token string, change func(url string) string) *http.Response {
		t.Helper()
		p, err := presign.PresignPutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(d.bucket), Key: aws.String("k"), ServerSideEncryption: types.ServerSideEncryptionAwsKms,
			SSEKMSKeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd"), BucketKeyEnabled: aws.Bool(true),
			Tagging: aws.String("project=fence&team=a%20b"), Metadata: map[string]string{"fence-token": token},
		})
		if err != nil {
			t.Fatal(err)
		}
		url := p.URL
		if change != nil {
			url = change(url)
		}
		req, err := http.NewRequest(p.Method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range p.SignedHeader {
			if k != "Host" && k != "Content-Length" {
				req.Header[k] = vs
			}
		}
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := put("5", nil); resp.StatusCode != http.StatusOK {
		e := readS3Error(t, resp)
		t.Fatalf("presigned PUT: %d %s (%s); want 200", resp.StatusCode, e.Code, e.Message)
	}
	wantSSE(t, "the write's PUT", only(t, store.seen(d.bucket, "k"), http.MethodPut, "").sse, map[string]string{
		hSSE: "aws:kms", hKMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/1234abcd", hBucketKey: "true"})
	wantTags(t, "the object's tags", d.storedTags(t, "k"), map[string]string{"project": "fence", "team": "a b"})

	for _, tt := range []struct {
		name, token string
		change      func(string) string
		status      int
		code        string
	}{
		{"stale token", "4", nil, http.StatusConflict, "StaleFenceToken"},
		{"bucket key changed", "6", func(u string) string {
			return string(bytes.Replace([]byte(u), []byte("Bucket-Key-Enabled=true"), []byte("Bucket-Key-Enabled=false"), 1))
		}, http.StatusForbidden, "SignatureDoesNotMatch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := put(tt.token, tt.change)
			e := readS3Error(t, resp)
			if resp.StatusCode != tt.status || e.Code != tt.code {
				t.Fatalf("answered %d %s (%s); want %d %s", resp.StatusCode, e.Code, e.Message, tt.status, tt.code)
			}
			if got, token, _ := d.stored(t, "k"); got != string(body) || token != "5" {
				t.Errorf("versitygw holds %q with token %q; want the first PUT's, 5", got, token)
			}
		})
	}
}

// TestPresignedCopySourceCustomerKey: a CopyObject presigned with the
// source's customer key (SSE-C) in its query
// (x-amz-copy-source-server-side-encryption-customer-algorithm, -key and
// -key-md5, as a presigner that hoists x-amz-* headers puts them) is
// served with their S3 meaning, fenced: the store's read of the source
// gets the key, and the copy holds the source's bytes. A changed key is
// SignatureDoesNotMatch, a stale token 409 StaleFenceToken; neither
// changes the copy.
func TestPresignedCopySourceCustomerKey(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	ctx := context.Background()
	ck := newCustomerKey(t)
	if _, err := d.client(writerKey).PutObject(ctx, putInput(d, "src", 1, "source bytes", ck.onPut)); err != nil {
		t.Fatal(err)
	}
	copyURL := func(token, key string) string {
		t.Helper()
		q := url.Values{}
		q.Set("x-amz-copy-source-server-side-encryption-customer-algorithm", "AES256")
		q.Set("x-amz-copy-source-server-side-encryption-customer-key", key)
		q.Set("x-amz-copy-source-server-side-encryption-customer-key-md5", ck.md5())
		q.Set("x-amz-meta-fence-token", token)
		q.Set("X-Amz-Expires", "900")
		req, err := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/dst?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Copy-Source", d.bucket+"/src")
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		signed, _, err := signer.PresignHTTP(ctx, aws.Credentials{AccessKeyID: writerKey, SecretAccessKey: d.keys[writerKey][0]},
			req, sigv4.UnsignedPayload, "s3", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	send := func(u string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Copy-Source", d.bucket+"/src")
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	store.seen(d.bucket, "src")
	if resp := send(copyURL("5", ck.key())); resp.StatusCode != http.StatusOK {
		e := readS3Error(t, resp)
		t.Fatalf("presigned CopyObject: %d %s (%s); want 200", resp.StatusCode, e.Code, e.Message)
	}
	wantSSE(t, "the source's GET", only(t, store.seen(d.bucket, "src"), http.MethodGet, "GetObject").sse, ck.headers())
	if got, token, _ := d.stored(t, "dst"); got != "source bytes" || token != "5" {
		t.Fatalf("versitygw holds %q with token %q; want the source's bytes with token 5", got, token)
	}
	other := newCustomerKey(t)
	for _, tt := range []struct {
		name   string
		url    string
		status int
		code   string
	}{
		{"stale token", copyURL("4", ck.key()), http.StatusConflict, "StaleFenceToken"},
		{"key changed", strings.Replace(copyURL("6", ck.key()), url.QueryEscape(ck.key()), url.QueryEscape(other.key()), 1), http.StatusForbidden, "SignatureDoesNotMatch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(tt.url)
			e := readS3Error(t, resp)
			if resp.StatusCode != tt.status || e.Code != tt.code {
				t.Fatalf("answered %d %s (%s); want %d %s", resp.StatusCode, e.Code, e.Message, tt.status, tt.code)
			}
			if _, token, _ := d.stored(t, "dst"); token != "5" {
				t.Errorf("the copy's token is %q; want the first copy's, 5", token)
			}
		})
	}
}
