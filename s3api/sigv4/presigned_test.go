package sigv4_test

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/s3api/sigv4"
)

// jsPresignedBody is the body the PUT URLs of
// testdata/presigned-aws-sdk-js.txt were presigned for.
const jsPresignedBody = "the body of a presigned PUT\n"

// jsPresigned reads testdata/presigned-aws-sdk-js.txt: URLs made by the
// AWS SDK for JavaScript v3 presigner with its default settings, signed
// at jsSignedAt (s3api/clients/testdata/aws-sdk-js/presign-fixtures.mjs
// makes them again).
func jsPresigned(t *testing.T) map[string]struct{ method, url string } {
	t.Helper()
	f, err := os.Open("testdata/presigned-aws-sdk-js.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	urls := map[string]struct{ method, url string }{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("testdata line %q: want name, method and URL", line)
		}
		urls[fields[0]] = struct{ method, url string }{fields[1], fields[2]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return urls
}

var jsSignedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// verifyAll runs v.Verify on r and reads the verified body to its end:
// the Result, and the error of either.
func verifyAll(v *sigv4.Verifier, r *http.Request) (*sigv4.Result, error) {
	res, err := v.Verify(context.Background(), r)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return res, err
	}
	return res, nil
}

// TestPresignedQueryOfTheSDKs: the presigned URLs the newest SDKs make
// carry headers in the signed query (X-Amz-Content-Sha256=UNSIGNED-PAYLOAD,
// x-amz-checksum-crc32, x-amz-sdk-checksum-algorithm, x-amz-checksum-mode,
// x-amz-tagging with the JavaScript presigner's defaults; the server-side
// encryption headers when its caller names them hoistable; aws-sdk-go-v2's
// x-amz-server-side-encryption-bucket-key-enabled); each is verified
// with its header's meaning. The JavaScript presigner signs the CRC32 of
// an empty body into a PUT URL made without a body: a PUT of bytes to it
// is BadDigest, as on S3, and one made with the body's CRC32 is accepted
// with that checksum checked. A GET's x-amz-checksum-mode reaches the
// handler as the X-Amz-Checksum-Mode header.
func TestPresignedQueryOfTheSDKs(t *testing.T) {
	js := jsPresigned(t)
	jsVerifier, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}, Region: testRegion, Now: func() time.Time { return jsSignedAt.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	goVerifier, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}, Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	// aws-sdk-go-v2 as config.LoadDefaultConfig sets it up: response
	// checksum validation when supported.
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(testRegion),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(testAccessKey, testSecret, "")))
	if err != nil {
		t.Fatal(err)
	}
	goPresign := s3.NewPresignClient(s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String("http://127.0.0.1:9000"), true
	}))
	goGet, err := goPresign.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c.txt")})
	if err != nil {
		t.Fatal(err)
	}
	goPutChecksum, err := goPresign.PresignPutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c.txt"), ChecksumCRC32: aws.String(crc32Base64([]byte(jsPresignedBody))),
	})
	if err != nil {
		t.Fatal(err)
	}

	// aws-sdk-go-v2 keeps the encryption and tagging headers signed as
	// headers, but for the bucket key, which it moves into the query.
	goPutBucketKey, err := goPresign.PresignPutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c.txt"), ServerSideEncryption: "aws:kms", BucketKeyEnabled: aws.Bool(true),
		Tagging: aws.String("project=fence"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(goPutBucketKey.URL, "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled=true") {
		t.Errorf("aws-sdk-go-v2's presigned PUT %s does not carry the bucket key in its query: this test is meant to cover it", goPutBucketKey.URL)
	}
	kmsContext := base64.StdEncoding.EncodeToString([]byte(`{"project":"fencegate"}`))
	customerKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	customerKeyMD5 := md5.Sum([]byte("0123456789abcdef0123456789abcdef"))

	cases := []struct {
		name         string
		verifier     *sigv4.Verifier
		method, url  string
		header       http.Header
		body         string
		wantCode     string // "" means accepted
		wantChecksum string // Result.ChecksumAlgorithm
		wantHeader   http.Header
	}{
		{name: "js PUT default, the body's bytes", verifier: jsVerifier, method: js["put-default"].method, url: js["put-default"].url, body: jsPresignedBody,
			wantCode: "BadDigest"},
		{name: "js PUT default, an empty body", verifier: jsVerifier, method: js["put-default"].method, url: js["put-default"].url,
			wantChecksum: "crc32", wantHeader: http.Header{"X-Amz-Checksum-Crc32": {"AAAAAA=="}, "X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}, "X-Amz-Content-Sha256": {"UNSIGNED-PAYLOAD"}}},
		{name: "js PUT with the body's CRC32 and a token", verifier: jsVerifier, method: js["put-checksum-token"].method, url: js["put-checksum-token"].url, body: jsPresignedBody,
			wantChecksum: "crc32", wantHeader: http.Header{"X-Amz-Checksum-Crc32": {crc32Base64([]byte(jsPresignedBody))}}},
		{name: "js PUT with the body's CRC32, other bytes", verifier: jsVerifier, method: js["put-checksum-token"].method, url: js["put-checksum-token"].url, body: strings.ToUpper(jsPresignedBody),
			wantCode: "BadDigest"},
		{name: "js GET default", verifier: jsVerifier, method: js["get-default"].method, url: js["get-default"].url,
			wantHeader: http.Header{"X-Amz-Checksum-Mode": {"ENABLED"}}},
		{name: "js GET, checksum mode dropped", verifier: jsVerifier, method: js["get-default"].method, url: strings.Replace(js["get-default"].url, "&x-amz-checksum-mode=ENABLED", "", 1),
			wantCode: "SignatureDoesNotMatch"},
		{name: "js PUT, checksum changed", verifier: jsVerifier, method: js["put-default"].method, url: strings.Replace(js["put-default"].url, "x-amz-checksum-crc32=AAAAAA%3D%3D", "x-amz-checksum-crc32="+url.QueryEscape(crc32Base64([]byte(jsPresignedBody))), 1), body: jsPresignedBody,
			wantCode: "SignatureDoesNotMatch"},
		{name: "js PUT, checksum dropped", verifier: jsVerifier, method: js["put-default"].method, url: strings.Replace(js["put-default"].url, "&x-amz-checksum-crc32=AAAAAA%3D%3D", "", 1), body: jsPresignedBody,
			wantCode: "SignatureDoesNotMatch"},
		{name: "js PUT, a second checksum value added", verifier: jsVerifier, method: js["put-default"].method, url: js["put-default"].url + "&x-amz-checksum-crc32=AAAAAA%3D%3D",
			wantCode: "InvalidArgument"},
		{name: "js PUT, a hex x-amz-content-sha256 header beside the query's", verifier: jsVerifier, method: js["put-checksum-token"].method, url: js["put-checksum-token"].url, body: jsPresignedBody,
			header: http.Header{"X-Amz-Content-Sha256": {hexSHA256([]byte(jsPresignedBody))}}, wantCode: "InvalidArgument"},
		{name: "js PUT with tagging", verifier: jsVerifier, method: js["put-tagging"].method, url: js["put-tagging"].url, body: jsPresignedBody,
			wantChecksum: "crc32", wantHeader: http.Header{"X-Amz-Tagging": {"project=fence&team=a%20b"}}},
		{name: "js PUT with SSE-KMS in the query", verifier: jsVerifier, method: js["put-sse-kms"].method, url: js["put-sse-kms"].url, body: jsPresignedBody,
			wantChecksum: "crc32", wantHeader: http.Header{"X-Amz-Server-Side-Encryption": {"aws:kms"},
				"X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id":     {"arn:aws:kms:us-east-1:111122223333:key/1234abcd"},
				"X-Amz-Server-Side-Encryption-Context":            {kmsContext},
				"X-Amz-Server-Side-Encryption-Bucket-Key-Enabled": {"true"}}},
		{name: "js PUT with SSE-C in the query", verifier: jsVerifier, method: js["put-sse-c"].method, url: js["put-sse-c"].url, body: jsPresignedBody,
			wantChecksum: "crc32", wantHeader: http.Header{"X-Amz-Server-Side-Encryption-Customer-Algorithm": {"AES256"},
				"X-Amz-Server-Side-Encryption-Customer-Key":     {customerKey},
				"X-Amz-Server-Side-Encryption-Customer-Key-Md5": {base64.StdEncoding.EncodeToString(customerKeyMD5[:])}}},
		{name: "js PUT, tagging changed", verifier: jsVerifier, method: js["put-tagging"].method, url: strings.Replace(js["put-tagging"].url, "project%3Dfence", "project%3Dother", 1), body: jsPresignedBody,
			wantCode: "SignatureDoesNotMatch"},
		{name: "js PUT, tagging also as a header", verifier: jsVerifier, method: js["put-tagging"].method, url: js["put-tagging"].url, body: jsPresignedBody,
			header: http.Header{"X-Amz-Tagging": {"project=other"}}, wantCode: "InvalidArgument"},
		{name: "go PUT with the bucket key in the query", verifier: goVerifier, method: goPutBucketKey.Method, url: goPutBucketKey.URL, body: jsPresignedBody,
			header:     http.Header{"X-Amz-Server-Side-Encryption": goPutBucketKey.SignedHeader["X-Amz-Server-Side-Encryption"], "X-Amz-Tagging": goPutBucketKey.SignedHeader["X-Amz-Tagging"]},
			wantHeader: http.Header{"X-Amz-Server-Side-Encryption-Bucket-Key-Enabled": {"true"}, "X-Amz-Server-Side-Encryption": {"aws:kms"}, "X-Amz-Tagging": {"project=fence"}}},
		{name: "go GET default", verifier: goVerifier, method: goGet.Method, url: goGet.URL,
			wantHeader: http.Header{"X-Amz-Checksum-Mode": {"ENABLED"}}},
		{name: "go PUT with the body's CRC32 as a signed header", verifier: goVerifier, method: goPutChecksum.Method, url: goPutChecksum.URL, body: jsPresignedBody,
			header: http.Header{"X-Amz-Checksum-Crc32": goPutChecksum.SignedHeader["X-Amz-Checksum-Crc32"]}, wantChecksum: "crc32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			for k, vs := range tc.header {
				r.Header[k] = vs
			}
			res, err := verifyAll(tc.verifier, r)
			var e *sigv4.Error
			switch {
			case tc.wantCode == "" && err != nil:
				t.Fatalf("Verify(%s %s) = %v; want accepted", tc.method, tc.url, err)
			case tc.wantCode != "" && (!errors.As(err, &e) || e.Code != tc.wantCode):
				t.Fatalf("Verify(%s %s) = %v; want %s", tc.method, tc.url, err, tc.wantCode)
			case tc.wantCode != "":
				return
			}
			if res.ChecksumAlgorithm != tc.wantChecksum || !res.Presigned {
				t.Errorf("Result.ChecksumAlgorithm %q, Presigned %v; want %q, true", res.ChecksumAlgorithm, res.Presigned, tc.wantChecksum)
			}
			for k, want := range tc.wantHeader {
				if got := r.Header.Values(k); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("after Verify the request's %s header is %q; want %q (the signed query's)", k, got, want)
				}
			}
		})
	}
}

// TestPresignedQueryHeadersRefused: a header in a presigned query is
// taken only when the signature covers it (as every query parameter of a
// presigned URL is), once, with a value S3 accepts, and never beside the
// same header; a header-authenticated request may not carry one in its
// query (only a presigned URL moves headers there). Each is refused with
// S3's code, whoever signed it.
func TestPresignedQueryHeadersRefused(t *testing.T) {
	now := time.Now().UTC()
	v, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}, Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	const base = "http://127.0.0.1:9000"
	body := []byte(jsPresignedBody)
	presigned := func(method, query string) *http.Request {
		r := httptest.NewRequest(method, presign(t, base, method, "/bucket/key?"+query, time.Hour, now), strings.NewReader(string(body)))
		return r
	}
	cases := []struct {
		name     string
		req      func() *http.Request
		wantCode string
	}{
		{"two values of x-amz-checksum-crc32", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-checksum-crc32="+url.QueryEscape(crc32Base64(body))+"&x-amz-checksum-crc32="+url.QueryEscape(crc32Base64(body)))
		}, "InvalidArgument"},
		{"x-amz-checksum-crc32 in two spellings", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-checksum-crc32="+url.QueryEscape(crc32Base64(body))+"&X-Amz-Checksum-Crc32="+url.QueryEscape(crc32Base64(body)))
		}, "InvalidArgument"},
		{"checksums of two algorithms", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-checksum-crc32="+url.QueryEscape(crc32Base64(body))+"&x-amz-checksum-sha256=47DEQpj8HBSa%2B%2FTImW%2B5JCeuQeRkm5NMpJWZG3hSuFU%3D")
		}, "InvalidRequest"},
		{"x-amz-checksum-crc32 that is not a CRC32", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-checksum-crc32=not-base64")
		}, "InvalidRequest"},
		{"X-Amz-Content-Sha256 a hex digest", func() *http.Request {
			return presigned(http.MethodPut, "X-Amz-Content-Sha256="+hexSHA256(body))
		}, "AuthorizationQueryParametersError"},
		{"X-Amz-Content-Sha256 streaming", func() *http.Request {
			return presigned(http.MethodPut, "X-Amz-Content-Sha256="+sigv4.StreamingUnsignedTrailer)
		}, "AuthorizationQueryParametersError"},
		{"X-Amz-Content-Sha256 in the query and as a header", func() *http.Request {
			r := presigned(http.MethodPut, "X-Amz-Content-Sha256=UNSIGNED-PAYLOAD")
			r.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
			return r
		}, "InvalidArgument"},
		{"x-amz-checksum-mode not ENABLED", func() *http.Request {
			return presigned(http.MethodGet, "x-amz-checksum-mode=YES")
		}, "InvalidArgument"},
		{"x-amz-sdk-checksum-algorithm unknown", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-sdk-checksum-algorithm=SHA384")
		}, "InvalidRequest"},
		{"x-amz-sdk-checksum-algorithm naming another checksum's algorithm", func() *http.Request {
			return presigned(http.MethodPut, "x-amz-checksum-crc32="+url.QueryEscape(crc32Base64(body))+"&x-amz-sdk-checksum-algorithm=SHA256")
		}, "InvalidRequest"},
		{"x-amz-checksum-mode in the query of a header-signed request", func() *http.Request {
			return request{method: http.MethodGet, target: "/bucket/key?x-amz-checksum-mode=ENABLED"}.build(t, base)
		}, "InvalidArgument"},
		{"x-amz-checksum-crc32 in the query of a header-signed request", func() *http.Request {
			return request{target: "/bucket/key?x-amz-checksum-crc32=" + url.QueryEscape(crc32Base64(body)), body: body}.build(t, base)
		}, "InvalidArgument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req()
			if r.Body == nil {
				r.Body = http.NoBody
			}
			_, err := verifyAll(v, r)
			var e *sigv4.Error
			if !errors.As(err, &e) || e.Code != tc.wantCode {
				t.Fatalf("Verify(%s %s) = %v; want %s", r.Method, r.URL, err, tc.wantCode)
			}
		})
	}
}
