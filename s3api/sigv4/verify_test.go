package sigv4_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/s3api/sigv4"
)

// TestSignedRequestsAccepted: requests signed by the SDK's v4 signer (header
// authentication and presigned URLs) and by the SDK's presign client are
// accepted, including the canonicalization corners: encoded paths, sorted
// and encoded queries, header values with runs of spaces, repeated headers.
func TestSignedRequestsAccepted(t *testing.T) {
	s := newS3Server(t, false, sigv4.Config{Region: testRegion})
	payload := testPayload(5000)
	cases := []struct {
		name string
		req  func(t *testing.T) *http.Request
	}{
		{"put with payload hash", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key", body: payload}.build(t, s.URL)
		}},
		{"put unsigned payload", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key", body: payload, payloadHash: sigv4.UnsignedPayload}.build(t, s.URL)
		}},
		{"encoded path", func(t *testing.T) *http.Request {
			return request{target: "/bucket/a%20b/%C3%A9%2Bc~d%2A%25", body: payload}.build(t, s.URL)
		}},
		{"query sorted and encoded", func(t *testing.T) *http.Request {
			return request{method: http.MethodGet, target: "/bucket?prefix=a%20b%2Fc&list-type=2&delimiter=%2F&max-keys=10&uploads"}.build(t, s.URL)
		}},
		{"header spaces and repeated headers", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key", body: payload, header: http.Header{
				"X-Amz-Meta-Note":      {"  a   b\t c  "},
				"X-Amz-Meta-Multi":     {"one", "two"},
				"Content-Type":         {"text/plain"},
				"X-Amz-Checksum-Crc32": {crc32Base64(payload)},
			}}.build(t, s.URL)
		}},
		{"presigned GET by the v4 signer", func(t *testing.T) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, presign(t, s.URL, http.MethodGet, "/bucket/a%20b?versionId=3", time.Hour, time.Now()), nil)
			return req
		}},
		{"presigned PUT by the S3 presign client", func(t *testing.T) *http.Request {
			p, err := s3.NewPresignClient(sdkClient(s, testSecret)).PresignPutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c.txt"), Metadata: map[string]string{"fence-token": "7"},
			}, s3.WithPresignExpires(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(p.Method, p.URL, bytes.NewReader(payload))
			for k, vs := range p.SignedHeader {
				if k != "Host" && k != "Content-Length" {
					req.Header[k] = vs
				}
			}
			return req
		}},
		{"presigned GET by the S3 presign client", func(t *testing.T) *http.Request {
			p, err := s3.NewPresignClient(sdkClient(s, testSecret)).PresignGetObject(context.Background(), &s3.GetObjectInput{
				Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c.txt"), Range: aws.String("bytes=0-9"),
			})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(p.Method, p.URL, nil)
			for k, vs := range p.SignedHeader {
				if k != "Host" {
					req.Header[k] = vs
				}
			}
			return req
		}},
		{"aws-chunked signed chunks", func(t *testing.T) *http.Request {
			return chunked{payload: payload, chunkSize: 1024}.build(t, s.URL, nil)
		}},
		{"minio-go signed trailer", func(t *testing.T) *http.Request {
			return minioTrailer(t, s.URL, payload, crc32Base64(payload), true, nil)
		}},
		{"minio-go unsigned trailer", func(t *testing.T) *http.Request {
			return minioTrailer(t, s.URL, payload, crc32Base64(payload), false, nil)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req(t)
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o := s.last(t)
			if o.Err != nil || !o.Complete {
				t.Fatalf("%s %s: refused: %v", req.Method, req.URL, o.Err)
			}
			if req.Method == http.MethodPut && !bytes.Equal(o.Body, payload) {
				t.Fatalf("body: %d bytes; want the %d sent", len(o.Body), len(payload))
			}
		})
	}
}

// TestBadRequestsRefused is the bad-input table: each request is refused
// with S3's error code, and the verified body reader never hands over the
// whole body as good.
func TestBadRequestsRefused(t *testing.T) {
	now := time.Now().UTC()
	payload := testPayload(20000)
	replaceFirst := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
	}
	flipSignatureChar := func(b []byte) []byte {
		i := bytes.Index(b, []byte("chunk-signature=")) + len("chunk-signature=")
		b = bytes.Clone(b)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return b
	}
	flipDataByte := func(b []byte) []byte {
		i := bytes.Index(b, []byte("\r\n")) + 2 + 100
		b = bytes.Clone(b)
		b[i] ^= 0xff
		return b
	}
	cases := []struct {
		name     string
		cfg      sigv4.Config
		req      func(t *testing.T, base string) *http.Request
		wantCode string
		wantMsg  string
	}{
		{name: "wrong secret", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, secret: "not-the-secret"}.build(t, base)
		}},
		{name: "unknown access key", wantCode: "InvalidAccessKeyId", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, accessKey: "AKIDUNKNOWN"}.build(t, base)
		}},
		{name: "tampered signed header", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload, header: http.Header{"X-Amz-Meta-Fence-Token": {"33"}}}.build(t, base)
			r.Header.Set("X-Amz-Meta-Fence-Token", "34")
			return r
		}},
		{name: "unsigned x-amz header added", wantCode: "AccessDenied", wantMsg: "x-amz-meta-fence-token", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Set("X-Amz-Meta-Fence-Token", "34")
			return r
		}},
		{name: "tampered path", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.URL.Path = "/bucket/other"
			return r
		}},
		{name: "tampered query", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			r := request{method: http.MethodGet, target: "/bucket?prefix=a"}.build(t, base)
			r.URL.RawQuery = "prefix=b"
			return r
		}},
		{name: "clock skew: signed 16 minutes ago", wantCode: "RequestTimeTooSkewed", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, at: now.Add(-16 * time.Minute)}.build(t, base)
		}},
		{name: "clock skew: signed 16 minutes ahead", wantCode: "RequestTimeTooSkewed", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, at: now.Add(16 * time.Minute)}.build(t, base)
		}},
		{name: "presigned URL expired", wantCode: "AccessDenied", wantMsg: "Request has expired", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, presign(t, base, http.MethodGet, "/bucket/key", time.Minute, now.Add(-2*time.Minute)), nil)
			return r
		}},
		{name: "presigned URL dated in the future", wantCode: "AccessDenied", wantMsg: "not valid yet", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, presign(t, base, http.MethodGet, "/bucket/key", time.Hour, now.Add(20*time.Minute)), nil)
			return r
		}},
		{name: "header authentication without x-amz-content-sha256", wantCode: "InvalidRequest", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, base+"/bucket/key", nil)
			newSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}, r, hexSHA256(nil), "s3", testRegion, now)
			return r
		}},
		{name: "presigned URL expiry over 7 days", wantCode: "AuthorizationQueryParametersError", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, presign(t, base, http.MethodGet, "/bucket/key", 7*24*time.Hour+time.Second, now), nil)
			return r
		}},
		{name: "presigned URL tampered", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, strings.Replace(presign(t, base, http.MethodGet, "/bucket/key", time.Hour, now), "/bucket/key", "/bucket/kez", 1), nil)
			return r
		}},
		{name: "presigned URL missing a parameter", wantCode: "AuthorizationQueryParametersError", req: func(t *testing.T, base string) *http.Request {
			u := presign(t, base, http.MethodGet, "/bucket/key", time.Hour, now)
			i := strings.Index(u, "X-Amz-Date=")
			r, _ := http.NewRequest(http.MethodGet, u[:i]+"X-Amz-Datf="+u[i+len("X-Amz-Date="):], nil)
			return r
		}},
		{name: "both header and query authentication", wantCode: "InvalidArgument", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, presign(t, base, http.MethodGet, "/bucket/key", time.Hour, now), nil)
			r.Header.Set("Authorization", request{target: "/bucket/key"}.build(t, base).Header.Get("Authorization"))
			return r
		}},
		{name: "signature version 2 presigned URL", wantCode: "InvalidRequest", wantMsg: "Please use AWS4-HMAC-SHA256", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, base+"/bucket/key?AWSAccessKeyId="+testAccessKey+"&Expires=1999999999&Signature=abc%3D", nil)
			return r
		}},
		{name: "signature version 2 header", wantCode: "InvalidRequest", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, base+"/bucket/key", nil)
			r.Header.Set("Authorization", "AWS "+testAccessKey+":abc=")
			return r
		}},
		{name: "anonymous", wantCode: "AccessDenied", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, base+"/bucket/key", nil)
			return r
		}},
		{name: "authorization header without signature", wantCode: "AuthorizationHeaderMalformed", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
			return r
		}},
		{name: "credential scope for another service", wantCode: "AuthorizationHeaderMalformed", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/s3/aws4_request", "/ec2/aws4_request", 1))
			return r
		}},
		{name: "credential scope for another region", cfg: sigv4.Config{Region: testRegion}, wantCode: "AuthorizationHeaderMalformed", wantMsg: "expecting 'us-east-1'", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, region: "eu-west-1"}.build(t, base)
		}},
		{name: "credential date not X-Amz-Date's", wantCode: "AuthorizationHeaderMalformed", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			d := now.Format("20060102")
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/"+d+"/", "/"+now.Add(-48*time.Hour).Format("20060102")+"/", 1))
			return r
		}},
		{name: "X-Amz-Date with a fraction of a second", wantCode: "AccessDenied", wantMsg: "x-amz-date", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			d := r.Header.Get("X-Amz-Date")
			r.Header.Set("X-Amz-Date", strings.TrimSuffix(d, "Z")+".5Z")
			return r
		}},
		{name: "credential of six parts", wantCode: "AuthorizationHeaderMalformed", wantMsg: "mal-formed", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/aws4_request", "/aws4_request/x", 1))
			return r
		}},
		{name: "credential without an access key id", wantCode: "AuthorizationHeaderMalformed", wantMsg: "mal-formed", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Credential="+testAccessKey+"/", "Credential=/", 1))
			return r
		}},
		{name: "wrong payload hash", wantCode: "XAmzContentSHA256Mismatch", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, payloadHash: hexSHA256([]byte("other"))}.build(t, base)
		}},
		{name: "wrong x-amz-checksum-crc32 header", wantCode: "BadDigest", req: func(t *testing.T, base string) *http.Request {
			return request{target: "/bucket/key", body: payload, payloadHash: sigv4.UnsignedPayload, header: http.Header{"X-Amz-Checksum-Crc32": {crc32Base64([]byte("other"))}}}.build(t, base)
		}},
		{name: "corrupted chunk signature", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, flipSignatureChar)
		}},
		{name: "corrupted chunk data", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, flipDataByte)
		}},
		{name: "chunks reordered", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, func(b []byte) []byte {
				// Swap the first two 8 KiB chunks (header and data).
				first := bytes.Index(b, []byte("\r\n")) + 2 + 8192 + 2
				second := first + bytes.Index(b[first:], []byte("\r\n")) + 2 + 8192 + 2
				return append(append(append([]byte{}, b[first:second]...), b[:first]...), b[second:]...)
			})
		}},
		{name: "last chunk dropped", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, func(b []byte) []byte {
				return b[:bytes.LastIndex(b, []byte("0;chunk-signature="))]
			})
		}},
		{name: "body cut right after a chunk's data", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			// x-amz-decoded-content-length says one chunk: the cut body still
			// fits its Content-Length.
			return chunked{payload: payload, chunkSize: 8192, decodedLen: 8192}.build(t, base, func(b []byte) []byte {
				return b[:bytes.Index(b, []byte("\r\n"))+2+8192]
			})
		}},
		{name: "decoded length larger than the chunks", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192, decodedLen: int64(len(payload)) + 1}.build(t, base, nil)
		}},
		{name: "decoded length smaller than the chunks", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192, decodedLen: int64(len(payload)) - 1}.build(t, base, nil)
		}},
		{name: "oversize chunk header", wantCode: "InvalidRequest", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, func(b []byte) []byte {
				i := bytes.Index(b, []byte(";chunk-signature="))
				return append(append(append([]byte{}, b[:i]...), bytes.Repeat([]byte(";x=y"), 100_000)...), b[i:]...)
			})
		}},
		{name: "huge chunk size", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, replaceFirst("2000;", "fffffffffffffff;"))
		}},
		{name: "chunk size over 15 hex digits", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, replaceFirst("2000;", "00000000000002000;"))
		}},
		{name: "decoded length beyond Content-Length", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192, decodedLen: 1 << 60}.build(t, base, nil)
		}},
		{name: "second X-Amz-Date added", wantCode: "InvalidArgument", wantMsg: "X-Amz-Date", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Add("X-Amz-Date", now.Add(-time.Hour).Format("20060102T150405Z"))
			return r
		}},
		{name: "second Authorization added", wantCode: "InvalidArgument", wantMsg: "Authorization", req: func(t *testing.T, base string) *http.Request {
			r := request{target: "/bucket/key", body: payload}.build(t, base)
			r.Header.Add("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			return r
		}},
		{name: "second x-amz-content-sha256 on a presigned URL", wantCode: "InvalidArgument", wantMsg: "X-Amz-Content-Sha256", req: func(t *testing.T, base string) *http.Request {
			r, _ := http.NewRequest(http.MethodPut, presign(t, base, http.MethodPut, "/bucket/key", time.Hour, now), bytes.NewReader(payload))
			r.Header["X-Amz-Content-Sha256"] = []string{hexSHA256(payload), sigv4.UnsignedPayload}
			return r
		}},
		{name: "query pair after ';' appended", wantCode: "InvalidArgument", wantMsg: "query", req: func(t *testing.T, base string) *http.Request {
			r := request{method: http.MethodGet, target: "/bucket/key"}.build(t, base)
			r.URL.RawQuery = "uploads;"
			return r
		}},
		{name: "query pair with a bad escape appended", wantCode: "InvalidArgument", wantMsg: "query", req: func(t *testing.T, base string) *http.Request {
			r := request{method: http.MethodGet, target: "/bucket?list-type=2"}.build(t, base)
			r.URL.RawQuery += "&prefix=%zz"
			return r
		}},
		{name: "bytes after the last chunk", wantCode: "IncompleteBody", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, func(b []byte) []byte { return append(b, "smuggled"...) })
		}},
		{name: "a line after the last chunk", wantCode: "IncompleteBody", wantMsg: "after the end", req: func(t *testing.T, base string) *http.Request {
			return chunked{payload: payload, chunkSize: 8192}.build(t, base, func(b []byte) []byte { return append(b, "smuggled\r\n"...) })
		}},
		{name: "a line after the trailer", wantCode: "IncompleteBody", wantMsg: "after the end", req: func(t *testing.T, base string) *http.Request {
			return minioTrailer(t, base, payload, crc32Base64(payload), true, func(b []byte) []byte { return append(b, "x-amz-checksum-crc32:AAAAAA==\r\n"...) })
		}},
		{name: "wrong trailing checksum, unsigned trailer", wantCode: "BadDigest", req: func(t *testing.T, base string) *http.Request {
			return minioTrailer(t, base, payload, crc32Base64([]byte("other")), false, nil)
		}},
		{name: "wrong trailing checksum, signed trailer", wantCode: "BadDigest", req: func(t *testing.T, base string) *http.Request {
			return minioTrailer(t, base, payload, crc32Base64([]byte("other")), true, nil)
		}},
		{name: "tampered signed trailer", wantCode: "SignatureDoesNotMatch", req: func(t *testing.T, base string) *http.Request {
			good, bad := crc32Base64(payload), crc32Base64([]byte("other"))
			return minioTrailer(t, base, payload, good, true, replaceFirst(good, bad))
		}},
		{name: "corrupted data, unsigned trailer", wantCode: "BadDigest", req: func(t *testing.T, base string) *http.Request {
			return minioTrailer(t, base, payload, crc32Base64(payload), false, flipDataByte)
		}},
		{name: "trailer missing", wantCode: "MalformedTrailerError", req: func(t *testing.T, base string) *http.Request {
			return minioTrailer(t, base, payload, crc32Base64(payload), false, func(b []byte) []byte {
				return b[:bytes.Index(b, []byte("x-amz-checksum-crc32:"))]
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newS3Server(t, false, tc.cfg)
			req := tc.req(t, s.URL)
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			reply, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			o := s.last(t)
			if o.Code != tc.wantCode {
				t.Fatalf("code %q (%v); want %q", o.Code, o.Err, tc.wantCode)
			}
			if !strings.Contains(o.Err.Error(), tc.wantMsg) {
				t.Errorf("error %q; want it to mention %q", o.Err, tc.wantMsg)
			}
			if !bytes.Contains(reply, []byte("<Code>"+tc.wantCode+"</Code>")) {
				t.Errorf("reply %s; want code %s", reply, tc.wantCode)
			}
			if o.ChecksumAfter != "" {
				t.Errorf("Result.Checksum() = %q after a refused body; want empty", o.ChecksumAfter)
			}
			if o.Complete || bytes.Equal(o.Body, payload) {
				t.Errorf("the reader handed over %d of %d bytes (complete=%v): a refused body must never be whole", len(o.Body), len(payload), o.Complete)
			}
			if strings.Contains(string(reply), testSecret) || strings.Contains(o.Err.Error(), testSecret) {
				t.Errorf("the secret leaked into the answer")
			}
		})
	}
}
