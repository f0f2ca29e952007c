package s3api_test

// The door as an attacker sees it: requests signed by a real identity,
// then changed on the way (a replay, a proxy, a client that was
// captured), sent to a door in front of real etcd and a real versitygw.
// Every test reads back what landed with an independent client and the
// high-water marks from etcd: a refusal that stored something, or raised
// a mark beyond what the signer asked for, is a hole whatever it answered.

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
)

// attackDomain is the virtual-hosted-style domain of the attack doors.
const attackDomain = "s3.example"

// signedRequest is a request to d, signed by the SDK's v4 signer as
// accessKey over payload (its hex SHA-256 as x-amz-content-sha256, or
// payloadHash when set), with host as its Host when set.
type signedRequest struct {
	method, target, host string
	header               http.Header
	body                 []byte
	payloadHash          string
	at                   time.Time
}

func (s signedRequest) build(tb testing.TB, d *door, accessKey string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(s.method, d.url+s.target, bytes.NewReader(s.body))
	if err != nil {
		tb.Fatal(err)
	}
	if s.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if s.host != "" {
		req.Host = s.host
	}
	for name, values := range s.header {
		req.Header[name] = values
	}
	hash := s.payloadHash
	if hash == "" {
		sum := sha256.Sum256(s.body)
		hash = hex.EncodeToString(sum[:])
	}
	req.Header.Set("X-Amz-Content-Sha256", hash)
	at := s.at
	if at.IsZero() {
		at = time.Now()
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: d.keys[accessKey][0]}, req, hash, "s3", "us-east-1", at); err != nil {
		tb.Fatal(err)
	}
	return req
}

// presignedRequest is a request to d with a URL presigned by the SDK's v4
// signer as accessKey: target carries X-Amz-Expires (and any parameter
// to sign); header holds the headers to sign, which the request sends.
func presignedRequest(tb testing.TB, d *door, accessKey, method, target string, header http.Header, body []byte, at time.Time) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, d.url+target, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true; o.DisableHeaderHoisting = true })
	signedURL, signedHeader, err := signer.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: d.keys[accessKey][0]}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", at)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := http.NewRequest(method, signedURL, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body == nil {
		out.Body, out.ContentLength = http.NoBody, 0
	}
	for name, values := range signedHeader {
		if !strings.EqualFold(name, "host") {
			out.Header[name] = values
		}
	}
	return out
}

// send sends req and returns its status and error document (zero on 2xx
// and on HEAD).
func (d *door) send(tb testing.TB, req *http.Request) (int, s3ErrorBody) {
	tb.Helper()
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 || req.Method == http.MethodHead {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, s3ErrorBody{}
	}
	return resp.StatusCode, readS3Error(tb, resp)
}

// storedKeys lists every key of bucket as versitygw holds it.
func (d *door) storedKeys(tb testing.TB, bucket string) []string {
	tb.Helper()
	var keys []string
	for o := range d.minio.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			tb.Fatalf("list %s: %v", bucket, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// seed writes key straight to versitygw (not through the door).
func (d *door) seed(tb testing.TB, key, body string) {
	tb.Helper()
	if _, err := d.minio.PutObject(context.Background(), d.bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// wantUntouched fails unless key still holds body with no token, and its
// mark is zero.
func (d *door) wantUntouched(tb testing.TB, key, body string) {
	tb.Helper()
	got, token, ok := d.stored(tb, key)
	if !ok || got != body || token != "" {
		tb.Errorf("%s holds %q with token %q (exists %v); want %q untouched", key, got, token, ok, body)
	}
	if hwm := d.mark(tb, key); hwm != 0 {
		tb.Errorf("mark of %s raised to %d", key, hwm)
	}
}

// TestAttackReadGrantNeverWrites: the reader identity, with a read grant
// only, signs (correctly) every spelling of a write it can think of:
// operation-changing query parameters in any case, the SDKs' x-id,
// method-override headers, copies, multipart, DeleteObjects. None is
// answered 2xx but the one whose every key failed (DeleteObjects answers
// 200 with an Error per key, as S3); none reaches S3 with a write; the
// object is untouched and no mark is raised.
func TestAttackReadGrantNeverWrites(t *testing.T) {
	d := newDoor(t, doorOptions{})
	d.seed(t, "victim", "original")
	b := "/" + d.bucket
	deleteBody := []byte(`<Delete><Object><Key>victim</Key></Object></Delete>`)
	tests := []struct {
		name, method, target string
		header               http.Header
		body                 []byte
		ok200                bool // DeleteObjects: 200 with per-key errors
	}{
		{name: "PutObject", method: "PUT", target: b + "/victim"},
		{name: "PutObject x-id", method: "PUT", target: b + "/victim?x-id=PutObject"},
		{name: "GET posing as PutObject", method: "GET", target: b + "/victim?x-id=PutObject"},
		{name: "DeleteObject", method: "DELETE", target: b + "/victim"},
		{name: "DeleteObject x-id", method: "DELETE", target: b + "/victim?x-id=DeleteObject"},
		{name: "CopyObject", method: "PUT", target: b + "/victim", header: http.Header{"X-Amz-Copy-Source": {d.bucket + "/victim"}, "X-Amz-Metadata-Directive": {"REPLACE"}}},
		{name: "CreateMultipartUpload", method: "POST", target: b + "/victim?uploads"},
		{name: "CreateMultipartUpload Uploads", method: "POST", target: b + "/victim?Uploads"},
		{name: "CreateMultipartUpload UPLOADS", method: "POST", target: b + "/victim?UPLOADS"},
		{name: "UploadPart", method: "PUT", target: b + "/victim?partNumber=1&uploadId=x"},
		{name: "UploadPart partnumber", method: "PUT", target: b + "/victim?partnumber=1&uploadId=x"},
		{name: "UploadPart UploadId", method: "PUT", target: b + "/victim?partNumber=1&UploadId=x"},
		{name: "CompleteMultipartUpload", method: "POST", target: b + "/victim?uploadId=x", body: []byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"x"</ETag></Part></CompleteMultipartUpload>`)},
		{name: "AbortMultipartUpload", method: "DELETE", target: b + "/victim?uploadId=x"},
		{name: "DeleteObjects", method: "POST", target: b + "?delete", body: deleteBody, ok200: true},
		{name: "DeleteObjects Delete", method: "POST", target: b + "?Delete", body: deleteBody},
		{name: "PutObjectTagging", method: "PUT", target: b + "/victim?tagging"},
		{name: "PutObjectAcl", method: "PUT", target: b + "/victim?acl"},
		{name: "PutObjectAcl ACL", method: "PUT", target: b + "/victim?ACL"},
		{name: "GET with method override", method: "GET", target: b + "/victim", header: http.Header{"X-Http-Method-Override": {"PUT"}, "X-Method-Override": {"DELETE"}}},
		{name: "POST with method override", method: "POST", target: b + "/victim", header: http.Header{"X-Http-Method-Override": {"PUT"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			header := http.Header{"X-Amz-Meta-Fence-Token": {"7"}}
			for name, values := range tt.header {
				header[name] = values
			}
			body := tt.body
			if body == nil && (tt.method == "PUT" || tt.method == "POST") {
				body = []byte("overwritten by a reader")
			}
			status, e := d.send(t, signedRequest{method: tt.method, target: tt.target, header: header, body: body}.build(t, d, readerKey))
			switch {
			case tt.method == "GET" && status == http.StatusOK:
				// A read is what the reader may do; it must stay one.
			case tt.ok200 && status == http.StatusOK:
			case status/100 == 2:
				t.Errorf("%s %s by the reader: %d; want a refusal", tt.method, tt.target, status)
			}
			_ = e
			for _, m := range []string{"PUT", "POST", "DELETE"} {
				if n := d.s3.CountMethod(m); n != 0 {
					t.Errorf("%d %s requests reached S3", n, m)
				}
			}
			d.wantUntouched(t, "victim", "original")
		})
	}
}

// TestAttackSignatureReuse: a PUT the writer signed for one object is
// sent, changed, for another: another key, bucket, method, Host,
// addressing style, encoding of the key, dot segments, empty segments,
// a trailing slash, another Unicode normalization, an operation-changing
// query parameter added. Each is refused; nothing lands anywhere and no
// mark moves.
func TestAttackSignatureReuse(t *testing.T) {
	d := newDoor(t, doorOptions{domain: attackDomain})
	other := d.bucket + "-other"
	sharedS3.CreateBucket(t, other)
	d.seed(t, "caf\u00e9", "original")
	d.seed(t, "a/b", "original")
	vhost := d.bucket + "." + attackDomain
	pathStyle := signedRequest{method: "PUT", target: "/" + d.bucket + "/caf%C3%A9"}
	vhosted := signedRequest{method: "PUT", target: "/caf%C3%A9", host: vhost}
	slash := signedRequest{method: "PUT", target: "/" + d.bucket + "/a%2Fb"}
	// retarget sends the request to target (path and query, as on the
	// wire) instead of the one signed.
	retarget := func(target string) func(*http.Request) {
		return func(r *http.Request) {
			u, err := url.Parse(d.url + target)
			if err != nil {
				panic(err)
			}
			r.URL = u
		}
	}
	tests := []struct {
		name   string
		signed signedRequest
		tamper func(*http.Request)
	}{
		{"another key", pathStyle, retarget("/" + d.bucket + "/cafe")},
		{"another bucket", pathStyle, retarget("/" + other + "/caf%C3%A9")},
		{"NFD spelling of the key", pathStyle, retarget("/" + d.bucket + "/cafe%CC%81")},
		{"upper-case escape", pathStyle, retarget("/" + d.bucket + "/caf%c3%a9")},
		{"double-encoded key", pathStyle, retarget("/" + d.bucket + "/caf%25C3%25A9")},
		{"trailing slash", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9/")},
		{"empty segment", pathStyle, retarget("/" + d.bucket + "//caf%C3%A9")},
		{"dot segment", pathStyle, retarget("/" + d.bucket + "/./caf%C3%A9")},
		{"dot-dot segment", pathStyle, retarget("/" + d.bucket + "/x/../caf%C3%A9")},
		{"%2F for /", slash, retarget("/" + d.bucket + "/a/b")},
		{"/ for %2F", signedRequest{method: "PUT", target: "/" + d.bucket + "/a/b"}, retarget("/" + d.bucket + "/a%2Fb")},
		{"method PUT to DELETE", pathStyle, func(r *http.Request) { r.Method = "DELETE" }},
		{"method PUT to POST", pathStyle, func(r *http.Request) { r.Method = "POST" }},
		{"query ?uploads added", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9?uploads")},
		{"query ?partNumber added", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9?partNumber=1&uploadId=x")},
		{"query ?x-id added", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9?x-id=PutObject")},
		{"query ?tagging added", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9?tagging")},
		{"query ?acl added", pathStyle, retarget("/" + d.bucket + "/caf%C3%A9?acl")},
		{"virtual host to another bucket", vhosted, func(r *http.Request) { r.Host = other + "." + attackDomain }},
		{"virtual host to path style", vhosted, func(r *http.Request) { r.Host = attackDomain; retarget("/" + d.bucket + "/caf%C3%A9")(r) }},
		{"path style to virtual host", pathStyle, func(r *http.Request) { r.Host = vhost; retarget("/caf%C3%A9")(r) }},
		{"virtual host, Host upper case", vhosted, func(r *http.Request) { r.Host = strings.ToUpper(vhost) }},
		{"virtual host, Host with a port", vhosted, func(r *http.Request) { r.Host = vhost + ":443" }},
		{"virtual host, Host with a trailing dot", vhosted, func(r *http.Request) { r.Host = vhost + "." }},
		{"absolute-form target naming another bucket's host", vhosted, func(r *http.Request) {
			// The request line names other's host; the Host header still
			// says the signed one.
			r.URL.Opaque = "//" + other + "." + attackDomain + "/caf%C3%A9"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			tt.signed.header = http.Header{"X-Amz-Meta-Fence-Token": {"9"}}
			tt.signed.body = []byte("replayed")
			req := tt.signed.build(t, d, writerKey)
			tt.tamper(req)
			status, e := d.send(t, req)
			if status/100 == 2 {
				t.Errorf("%s %s (Host %s): %d; want a refusal", req.Method, req.URL, req.Host, status)
			} else if status != http.StatusForbidden && status != http.StatusBadRequest && status != http.StatusNotImplemented {
				t.Errorf("%s %s: %d %s; want 403, 400 or 501", req.Method, req.URL, status, e.Code)
			}
			for _, m := range []string{"PUT", "POST", "DELETE"} {
				if n := d.s3.CountMethod(m); n != 0 {
					t.Errorf("%d %s requests reached S3", n, m)
				}
			}
			for _, bucket := range []string{d.bucket, other} {
				for _, k := range d.storedKeys(t, bucket) {
					if bucket != d.bucket || (k != "caf\u00e9" && k != "a/b") {
						t.Errorf("%s/%s was stored", bucket, k)
					}
				}
			}
			d.wantUntouched(t, "caf\u00e9", "original")
			d.wantUntouched(t, "a/b", "original")
			for _, k := range []string{"cafe", "cafe\u0301", "caf%C3%A9", "a"} {
				if hwm := d.mark(t, k); hwm != 0 {
					t.Errorf("mark of %q raised to %d", k, hwm)
				}
			}
		})
	}
}

// TestAttackTokenReplay: the writer's signed PUT with token 5 is
// captured; the attacker replays it with another token in every place a
// token can be, and with the other headers that change what a write
// does. Each replay is refused: the mark stays 5 and S3 keeps token 5's
// bytes. So does a presigned PUT for token 5.
func TestAttackTokenReplay(t *testing.T) {
	d := newDoor(t, doorOptions{})
	b := "/" + d.bucket
	original := signedRequest{method: "PUT", target: b + "/k", header: http.Header{"X-Amz-Meta-Fence-Token": {"5"}}, body: []byte("token 5")}
	if status, e := d.send(t, original.build(t, d, writerKey)); status != http.StatusOK {
		t.Fatalf("the original put: %d %s", status, e.Code)
	}
	d.seed(t, "source", "copied bytes")
	set := func(name, value string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set(name, value) }
	}
	add := func(name, value string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Add(name, value) }
	}
	query := func(raw string) func(*http.Request) {
		return func(r *http.Request) { r.URL.RawQuery = raw }
	}
	tests := []struct {
		name   string
		tamper func(*http.Request)
	}{
		{"metadata token changed", set("X-Amz-Meta-Fence-Token", "6")},
		{"metadata token repeated", add("X-Amz-Meta-Fence-Token", "6")},
		{"X-Fence-Token added", set(api.HeaderFenceToken, "6")},
		{"metadata token in the query", query("x-amz-meta-fence-token=6")},
		{"metadata token in the query, upper case", query("X-AMZ-META-FENCE-TOKEN=6")},
		{"X-Fence-Token in the query", query("X-Fence-Token=6")},
		{"underscore spelling", func(r *http.Request) { r.Header["X-Amz-Meta-Fence_token"] = []string{"6"} }},
		{"raw lower-case header name", func(r *http.Request) { r.Header["x-amz-meta-fence-token"] = []string{"6"} }},
		{"copy source added", set("X-Amz-Copy-Source", d.bucket+"/source")},
		{"metadata directive added", set("X-Amz-Metadata-Directive", "REPLACE")},
		{"If-Match added", set("If-Match", `"x"`)},
		{"If-None-Match added", set("If-None-Match", "*")},
		{"other user metadata added", set("X-Amz-Meta-Owner", "attacker")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A fresh signature over token 5 and the bytes "token 6":
			// were the change ignored, the write would land, and S3
			// would hold "token 6".
			replay := original
			replay.body = []byte("token 6")
			req := replay.build(t, d, writerKey)
			tt.tamper(req)
			status, e := d.send(t, req)
			if status/100 == 2 {
				t.Errorf("replay: %d; want a refusal", status)
			}
			_ = e
			if hwm := d.mark(t, "k"); hwm != 5 {
				t.Errorf("mark = %d; want 5", hwm)
			}
			if body, token, _ := d.stored(t, "k"); body != "token 5" || token != "5" {
				t.Errorf("S3 holds %q with token %q; want token 5's bytes", body, token)
			}
		})
	}
	t.Run("presigned", func(t *testing.T) {
		presigned := func() *http.Request {
			return presignedRequest(t, d, writerKey, "PUT", b+"/p?X-Amz-Expires=900&X-Amz-Meta-Fence-Token=5", nil, []byte("presigned 5"), time.Now())
		}
		if status, e := d.send(t, presigned()); status != http.StatusOK {
			t.Fatalf("presigned put: %d %s", status, e.Code)
		}
		for _, tamper := range []func(*http.Request){
			func(r *http.Request) {
				r.URL.RawQuery = strings.Replace(r.URL.RawQuery, "Fence-Token=5", "Fence-Token=6", 1)
			},
			func(r *http.Request) { r.URL.RawQuery += "&X-Amz-Meta-Fence-Token=6" },
			set("X-Amz-Meta-Fence-Token", "6"),
			set(api.HeaderFenceToken, "6"),
			set("X-Amz-Copy-Source", d.bucket+"/source"),
		} {
			req := presigned()
			tamper(req)
			if status, _ := d.send(t, req); status/100 == 2 {
				t.Errorf("presigned replay %s %v: %d; want a refusal", req.URL.RawQuery, req.Header, status)
			}
			if hwm := d.mark(t, "p"); hwm != 5 {
				t.Errorf("mark = %d; want 5", hwm)
			}
			if body, token, _ := d.stored(t, "p"); body != "presigned 5" || token != "5" {
				t.Errorf("S3 holds %q with token %q; want the presigned write's", body, token)
			}
		}
	})
}

// TestAttackPresignedURLs: the bounds of query authentication. An expiry
// over 7 days, negative, not a number; a date in the future beyond the
// skew; an expired URL; a URL replayed with another method; a URL with
// an Authorization header too; a parameter given twice. Each is refused
// with S3's code and nothing reaches S3.
func TestAttackPresignedURLs(t *testing.T) {
	d := newDoor(t, doorOptions{})
	d.seed(t, "k", "original")
	b := "/" + d.bucket
	now := time.Now()
	put := func(expires string, at time.Time) func(*testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			return presignedRequest(t, d, writerKey, "PUT", b+"/k?X-Amz-Meta-Fence-Token=3&X-Amz-Expires="+url.QueryEscape(expires), nil, []byte("presigned"), at)
		}
	}
	tests := []struct {
		name   string
		req    func(*testing.T) *http.Request
		status int
		code   string
	}{
		{"expires over 7 days", put("604801", now), 400, "AuthorizationQueryParametersError"},
		{"expires negative", put("-1", now), 400, "AuthorizationQueryParametersError"},
		{"expires not a number", put("soon", now), 400, "AuthorizationQueryParametersError"},
		{"expires a float", put("60.5", now), 400, "AuthorizationQueryParametersError"},
		{"expires huge", put("99999999999999999999", now), 400, "AuthorizationQueryParametersError"},
		{"dated 16 minutes ahead", put("3600", now.Add(16*time.Minute)), 403, "AccessDenied"},
		{"dated a day ahead, 7 days valid", put("604800", now.Add(24*time.Hour)), 403, "AccessDenied"},
		{"expired", put("60", now.Add(-2*time.Minute)), 403, "AccessDenied"},
		{"expired 7-day URL", put("604800", now.Add(-8*24*time.Hour)), 403, "AccessDenied"},
		{"PUT URL used for DELETE", func(t *testing.T) *http.Request {
			r := put("900", now)(t)
			r.Method, r.Body, r.ContentLength = "DELETE", http.NoBody, 0
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"GET URL used for PUT", func(t *testing.T) *http.Request {
			r := presignedRequest(t, d, writerKey, "GET", b+"/k?X-Amz-Expires=900", nil, nil, now)
			out, _ := http.NewRequest("PUT", r.URL.String()+"&X-Amz-Meta-Fence-Token=3", strings.NewReader("x"))
			return out
		}, 403, "SignatureDoesNotMatch"},
		{"GET URL used for PUT, same query", func(t *testing.T) *http.Request {
			r := presignedRequest(t, d, writerKey, "GET", b+"/k?X-Amz-Expires=900&X-Amz-Meta-Fence-Token=3", nil, nil, now)
			out, _ := http.NewRequest("PUT", r.URL.String(), strings.NewReader("x"))
			return out
		}, 403, "SignatureDoesNotMatch"},
		{"presigned and an Authorization header", func(t *testing.T) *http.Request {
			r := put("900", now)(t)
			signed := signedRequest{method: "PUT", target: b + "/k", body: []byte("presigned")}.build(t, d, writerKey)
			r.Header.Set("Authorization", signed.Header.Get("Authorization"))
			return r
		}, 400, "InvalidArgument"},
		{"X-Amz-Signature twice", func(t *testing.T) *http.Request {
			r := put("900", now)(t)
			r.URL.RawQuery += "&X-Amz-Signature=" + strings.Repeat("0", 64)
			return r
		}, 400, "AuthorizationQueryParametersError"},
		{"X-Amz-Expires twice", func(t *testing.T) *http.Request {
			r := put("900", now)(t)
			r.URL.RawQuery += "&X-Amz-Expires=604800"
			return r
		}, 400, "AuthorizationQueryParametersError"},
		{"X-Amz-Date twice", func(t *testing.T) *http.Request {
			r := put("900", now)(t)
			r.URL.RawQuery += "&X-Amz-Date=" + now.UTC().Format("20060102T150405Z")
			return r
		}, 400, "AuthorizationQueryParametersError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			status, e := d.send(t, tt.req(t))
			if status != tt.status || e.Code != tt.code {
				t.Errorf("got %d %s (%s); want %d %s", status, e.Code, e.Message, tt.status, tt.code)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3", n)
			}
			d.wantUntouched(t, "k", "original")
		})
	}
}

// TestAttackHeaderSmuggling: headers repeated or left out of the
// signature. A second Authorization, X-Amz-Date, X-Amz-Content-Sha256,
// X-Amz-Decoded-Content-Length added to a signed request; a signature
// that does not cover host or x-amz-content-sha256. Each is refused and
// nothing lands.
func TestAttackHeaderSmuggling(t *testing.T) {
	d := newDoor(t, doorOptions{})
	b := "/" + d.bucket
	signed := func(t *testing.T, key string) *http.Request {
		return signedRequest{method: "PUT", target: b + "/" + key, header: http.Header{"X-Amz-Meta-Fence-Token": {"4"}}, body: []byte("smuggled")}.build(t, d, writerKey)
	}
	tests := []struct {
		name   string
		tamper func(*testing.T, *http.Request)
	}{
		{"second Authorization", func(t *testing.T, r *http.Request) {
			r.Header.Add("Authorization", "AWS4-HMAC-SHA256 Credential="+readerKey+"/20200101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature="+strings.Repeat("0", 64))
		}},
		{"second Authorization first", func(t *testing.T, r *http.Request) {
			r.Header["Authorization"] = append([]string{"junk"}, r.Header["Authorization"]...)
		}},
		{"second X-Amz-Date", func(t *testing.T, r *http.Request) {
			r.Header.Add("X-Amz-Date", time.Now().Add(-time.Hour).UTC().Format("20060102T150405Z"))
		}},
		{"second X-Amz-Content-Sha256", func(t *testing.T, r *http.Request) {
			r.Header.Add("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}},
		{"X-Amz-Decoded-Content-Length added", func(t *testing.T, r *http.Request) {
			r.Header.Add("X-Amz-Decoded-Content-Length", "3")
		}},
		{"host left out of SignedHeaders", func(t *testing.T, r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "host;", "", 1))
		}},
		{"x-amz-content-sha256 left out of SignedHeaders", func(t *testing.T, r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "x-amz-content-sha256;", "", 1))
		}},
		{"x-amz-meta-fence-token left out of SignedHeaders", func(t *testing.T, r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), ";x-amz-meta-fence-token", "", 1))
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			d.seed(t, key, "original")
			d.s3.Reset()
			req := signed(t, key)
			tt.tamper(t, req)
			status, e := d.send(t, req)
			if status != http.StatusForbidden && status != http.StatusBadRequest {
				t.Errorf("got %d %s; want 403 or 400", status, e.Code)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3", n)
			}
			d.wantUntouched(t, key, "original")
		})
	}
}

// TestAttackUnsignedQueryPairs: a query pair that Go's parser drops (a
// ';' separator, a bad escape) is covered by no signature. Appended to
// a signed request it must not be served as if it were not there: an
// upstream, a proxy or a later version that reads the raw query would
// see an operation nobody signed.
func TestAttackUnsignedQueryPairs(t *testing.T) {
	d := newDoor(t, doorOptions{})
	b := "/" + d.bucket
	for i, extra := range []string{"uploads;", "x-id=DeleteObject;x=1", "partNumber=%zz", "x=%", "a=1;tagging"} {
		t.Run(extra, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			d.seed(t, key, "original")
			for _, tt := range []struct {
				method, target string
				body           []byte
				accessKey      string
			}{
				{"GET", b + "/" + key, nil, readerKey},
				{"PUT", b + "/" + key, []byte("unsigned query"), writerKey},
			} {
				d.s3.Reset()
				req := signedRequest{method: tt.method, target: tt.target, header: http.Header{"X-Amz-Meta-Fence-Token": {"3"}}, body: tt.body}.build(t, d, tt.accessKey)
				if req.URL.RawQuery != "" {
					req.URL.RawQuery += "&"
				}
				req.URL.RawQuery += extra
				status, e := d.send(t, req)
				if status != http.StatusBadRequest {
					t.Errorf("%s with ?%s appended after signing: %d %s; want 400", tt.method, extra, status, e.Code)
				}
				if n := d.s3.Count(); n != 0 {
					t.Errorf("%d requests reached S3", n)
				}
			}
			d.wantUntouched(t, key, "original")
		})
	}
}

// TestAttackKeyEncodingsStayInPrefix: the logs identity may write under
// logs/ only. It writes keys that a store decoding once more, or
// normalizing Unicode, would resolve outside logs/: encoded dot
// segments, encoded slashes, full-width and one-dot-leader dots,
// backslashes. Each is refused or lands under logs/ at exactly the key
// written; nothing lands anywhere else and no mark outside logs/ moves.
func TestAttackKeyEncodingsStayInPrefix(t *testing.T) {
	d := newDoor(t, doorOptions{})
	keys := []string{
		"logs/%2E%2E/escape1",
		"logs/%2e%2e%2fescape2",
		"logs/..%2Fescape3",
		"logs/%252E%252E/escape4",
		"logs/\uff0e\uff0e/escape5",
		"logs/\u2024\u2024/escape6",
		"logs/..\\escape7",
		"logs/\u002e\u0338/escape8",
		"logs/.\u200b./escape9",
	}
	for i, key := range keys {
		t.Run(key, func(t *testing.T) {
			token := api.Token(i + 1)
			target := "/" + d.bucket + "/" + escapeKey(key)
			status, e := d.send(t, signedRequest{method: "PUT", target: target, header: http.Header{"X-Amz-Meta-Fence-Token": {token.String()}}, body: []byte(key)}.build(t, d, logsKey))
			if status == http.StatusOK {
				body, got, ok := d.stored(t, key)
				if !ok || body != key || got != token.String() {
					t.Errorf("%q: answered 200 but S3 holds %q token %q (exists %v) at that key", key, body, got, ok)
				}
			} else if status != http.StatusBadRequest && status != http.StatusForbidden {
				t.Errorf("%q: %d %s", key, status, e.Code)
			}
		})
	}
	for _, k := range d.storedKeys(t, d.bucket) {
		if !strings.HasPrefix(k, "logs/") {
			t.Errorf("stored outside logs/: %q", k)
		}
	}
	for i := range keys {
		if hwm := d.mark(t, fmt.Sprintf("escape%d", i+1)); hwm != 0 {
			t.Errorf("mark of escape%d raised to %d", i+1, hwm)
		}
	}
}

// escapeKey percent-encodes key for a path, keeping '/'.
func escapeKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(p), "+", "%2B")
	}
	return strings.Join(parts, "/")
}

// chunkedPut is an aws-chunked PutObject of payload by the writer with
// token, signed per chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) by the
// SDK's signers, or, with trailer set, STREAMING-UNSIGNED-PAYLOAD-TRAILER
// with x-amz-trailer: x-amz-checksum-crc32 and its right value. tamper
// changes the encoded body; decoded overrides
// x-amz-decoded-content-length (signed) when non-negative.
type chunkedPut struct {
	key       string
	token     api.Token
	payload   []byte
	chunkSize int
	trailer   bool
	decoded   int64
	tamper    func([]byte) []byte
	// unknownLength sends the body with Transfer-Encoding: chunked, no
	// Content-Length to hold x-amz-decoded-content-length against.
	unknownLength bool
}

func (c chunkedPut) build(tb testing.TB, d *door) *http.Request {
	tb.Helper()
	mode := "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	if c.trailer {
		mode = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	}
	decoded := int64(len(c.payload))
	if c.decoded >= 0 {
		decoded = c.decoded
	}
	at := time.Now()
	creds := aws.Credentials{AccessKeyID: writerKey, SecretAccessKey: d.keys[writerKey][0]}
	req, err := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/"+c.key, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.FormatInt(decoded, 10))
	req.Header.Set("X-Amz-Content-Sha256", mode)
	req.Header.Set("X-Amz-Meta-Fence-Token", c.token.String())
	if c.trailer {
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, req, mode, "s3", "us-east-1", at); err != nil {
		tb.Fatal(err)
	}
	auth := req.Header.Get("Authorization")
	seed, _ := hex.DecodeString(auth[strings.Index(auth, "Signature=")+len("Signature="):])
	stream := v4.NewStreamSigner(creds, "s3", "us-east-1", seed)
	var body bytes.Buffer
	rest := c.payload
	for {
		n := min(c.chunkSize, len(rest))
		if c.trailer {
			body.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n")
		} else {
			sig, err := stream.GetSignature(context.Background(), nil, rest[:n], at)
			if err != nil {
				tb.Fatal(err)
			}
			body.WriteString(strconv.FormatInt(int64(n), 16) + ";chunk-signature=" + hex.EncodeToString(sig) + "\r\n")
		}
		if n == 0 {
			break
		}
		body.Write(rest[:n])
		body.WriteString("\r\n")
		rest = rest[n:]
	}
	if c.trailer {
		sum := crc32.ChecksumIEEE(c.payload)
		body.WriteString("x-amz-checksum-crc32:" + base64.StdEncoding.EncodeToString(crc32Bytes(sum)) + "\r\n\r\n")
	} else {
		body.WriteString("\r\n")
	}
	b := body.Bytes()
	if c.tamper != nil {
		b = c.tamper(bytes.Clone(b))
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	if c.unknownLength {
		req.ContentLength = -1
	}
	return req
}

func crc32Bytes(sum uint32) []byte {
	return []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
}

// TestAttackChunkedBodies: aws-chunked bodies a client signed, then
// changed: chunk sizes that overflow, are negative, or exceed the signed
// decoded length; a declared length far beyond the body; a final chunk
// cut short or missing; a trailer missing, naming another checksum, or
// wrong; more chunks than declared; bytes after the body's end. Each is
// refused; nothing is stored; with the body under the gateway's buffer
// (verified before the fence check) no mark is raised, and with a
// streamed one (BufferBytes 1 KiB) the mark is at most the signed token
// (the fence check precedes the body's end) and nothing is stored.
func TestAttackChunkedBodies(t *testing.T) {
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(b, []byte(old)) {
				panic("no " + old + " in the body")
			}
			return bytes.Replace(b, []byte(old), []byte(new), 1)
		}
	}
	firstSize := func(size string) func([]byte) []byte {
		return func(b []byte) []byte {
			i := bytes.IndexAny(b, ";\r")
			return append([]byte(size), b[i:]...)
		}
	}
	lastSignedChunk := []byte("0;chunk-signature=")
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	goodSum := base64.StdEncoding.EncodeToString(crc32Bytes(crc32.ChecksumIEEE(payload)))
	badSum := base64.StdEncoding.EncodeToString(crc32Bytes(crc32.ChecksumIEEE([]byte("other"))))
	tests := []struct {
		name          string
		trailer       bool
		decoded       int64
		unknownLength bool
		tamper        func([]byte) []byte
		wantCode      string
	}{
		{name: "chunk size overflows int64", decoded: -1, tamper: firstSize("10000000000000000"), wantCode: "IncompleteBody"},
		{name: "chunk size of 15 f", decoded: -1, tamper: firstSize("fffffffffffffff"), wantCode: "IncompleteBody"},
		{name: "negative chunk size", decoded: -1, tamper: firstSize("-400"), wantCode: "IncompleteBody"},
		{name: "chunk size beyond the decoded length", decoded: -1, tamper: firstSize("1001"), wantCode: "IncompleteBody"},
		{name: "decoded length a TiB", decoded: 1 << 40, wantCode: "IncompleteBody"},
		{name: "decoded length a TiB, no Content-Length", decoded: 1 << 40, unknownLength: true, wantCode: "EntityTooLarge"},
		{name: "decoded length short of the chunks", decoded: 1000, wantCode: "IncompleteBody"},
		{name: "final chunk cut short", decoded: -1, tamper: func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("\r\n0;"))-10] }, wantCode: "IncompleteBody"},
		{name: "final zero chunk missing", decoded: -1, tamper: func(b []byte) []byte { return b[:bytes.LastIndex(b, lastSignedChunk)] }, wantCode: "IncompleteBody"},
		{name: "one chunk more than declared", decoded: -1, tamper: func(b []byte) []byte {
			i := bytes.LastIndex(b, lastSignedChunk)
			extra := append([]byte("1;chunk-signature="+strings.Repeat("0", 64)+"\r\nX\r\n"), b[i:]...)
			return append(b[:i:i], extra...)
		}, wantCode: "IncompleteBody"},
		{name: "bytes after the last chunk", decoded: -1, tamper: func(b []byte) []byte { return append(b, "smuggled bytes"...) }, wantCode: "IncompleteBody"},
		{name: "a chunk after the last chunk", decoded: -1, tamper: func(b []byte) []byte {
			return append(b, "5;chunk-signature="+strings.Repeat("0", 64)+"\r\nextra\r\n0;chunk-signature="+strings.Repeat("0", 64)+"\r\n\r\n"...)
		}, wantCode: "IncompleteBody"},
		{name: "chunk header line of 64 KiB", decoded: -1, tamper: firstSize("4" + strings.Repeat(" ", 64<<10)), wantCode: "InvalidRequest"},
		{name: "trailer missing", trailer: true, decoded: -1, tamper: func(b []byte) []byte { return b[:bytes.Index(b, []byte("x-amz-checksum-crc32:"))] }, wantCode: "MalformedTrailerError"},
		{name: "trailer names another checksum", trailer: true, decoded: -1, tamper: replace("x-amz-checksum-crc32:", "x-amz-checksum-crc32c:"), wantCode: "MalformedTrailerError"},
		{name: "trailer checksum wrong", trailer: true, decoded: -1, tamper: replace(goodSum, badSum), wantCode: "BadDigest"},
		{name: "trailer checksum of other bytes", trailer: true, decoded: -1, tamper: func(b []byte) []byte {
			i := bytes.Index(b, []byte("\r\n")) + 2
			b[i] ^= 0xff
			return b
		}, wantCode: "BadDigest"},
		{name: "bytes after the trailer", trailer: true, decoded: -1, tamper: func(b []byte) []byte { return append(b, "smuggled bytes"...) }, wantCode: "IncompleteBody"},
		{name: "a second trailer after the trailer", trailer: true, decoded: -1, tamper: func(b []byte) []byte {
			return append(b, "x-amz-checksum-crc32:AAAAAA==\r\n\r\n"...)
		}, wantCode: "IncompleteBody"},
	}
	for _, streamed := range []bool{false, true} {
		cfg := gateway.Config{}
		if streamed {
			cfg.BufferBytes = 1024
		}
		d := newDoor(t, doorOptions{gateway: cfg})
		for i, tt := range tests {
			t.Run(fmt.Sprintf("streamed=%v/%s", streamed, tt.name), func(t *testing.T) {
				key := fmt.Sprintf("chunked%d", i)
				req := chunkedPut{key: key, token: 7, payload: payload, chunkSize: 1024, trailer: tt.trailer, decoded: tt.decoded, tamper: tt.tamper, unknownLength: tt.unknownLength}.build(t, d)
				status, e := d.send(t, req)
				if status/100 == 2 {
					t.Errorf("answered %d; want %s", status, tt.wantCode)
				} else if e.Code != tt.wantCode {
					t.Errorf("answered %d %s (%s); want %s", status, e.Code, e.Message, tt.wantCode)
				}
				if _, _, ok := d.stored(t, key); ok {
					t.Errorf("stored")
				}
				hwm := d.mark(t, key)
				if !streamed && hwm != 0 {
					t.Errorf("mark raised to %d by a body refused before the fence check", hwm)
				}
				if hwm > 7 {
					t.Errorf("mark raised to %d beyond the signed token 7", hwm)
				}
			})
		}
		t.Run(fmt.Sprintf("streamed=%v/untampered", streamed), func(t *testing.T) {
			for _, trailer := range []bool{false, true} {
				key := fmt.Sprintf("good-%v", trailer)
				status, e := d.send(t, chunkedPut{key: key, token: 7, payload: payload, chunkSize: 1000, trailer: trailer, decoded: -1}.build(t, d))
				if status != http.StatusOK {
					t.Fatalf("trailer=%v: %d %s (%s)", trailer, status, e.Code, e.Message)
				}
				if body, token, _ := d.stored(t, key); body != string(payload) || token != "7" {
					t.Fatalf("trailer=%v: stored %d bytes, token %q", trailer, len(body), token)
				}
			}
		})
	}
}

// TestAttackEndlessChunkHeader: a chunk header line that never ends, in a
// body announced as 1 GiB, is refused after a bounded read: the door
// never buffers a line it was told nothing about. The sender counts what
// the door took; the bound is loose (socket buffers), but far below the
// gigabyte a door buffering the line would read.
func TestAttackEndlessChunkHeader(t *testing.T) {
	d := newDoor(t, doorOptions{})
	req := chunkedPut{key: "endless", token: 7, payload: []byte("x"), chunkSize: 1, decoded: -1}.build(t, d)
	const announced = 1 << 30
	body := &countingReader{r: io.MultiReader(strings.NewReader("1"), endless{'1'})}
	req.Body, req.ContentLength = io.NopCloser(io.LimitReader(body, announced)), announced
	resp, err := d.srv.Client().Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			t.Fatalf("an endless chunk header got %d", resp.StatusCode)
		}
	}
	if n := body.n.Load(); n > 64<<20 {
		t.Errorf("the door read %d bytes of an endless line; want a bounded read", n)
	}
	if _, _, ok := d.stored(t, "endless"); ok {
		t.Errorf("stored")
	}
	if hwm := d.mark(t, "endless"); hwm != 0 {
		t.Errorf("mark raised to %d", hwm)
	}
}

// endless yields its byte forever.
type endless [1]byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e[0]
	}
	return len(p), nil
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestAttackEmptyBodies: a body of zero bytes has no last byte to hold
// back, so a failed check cannot keep a store that was sent nothing from
// completing: an empty PutObject or UploadPart whose signed payload hash,
// checksum header or aws-chunked trailer does not match must be refused
// before the store is asked at all. A captured request replayed with its
// body dropped is this case.
func TestAttackEmptyBodies(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	b := "/" + d.bucket
	created, err := d.client(writerKey).CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("parts"), Metadata: map[string]string{"fence-token": "3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	uploadID := aws.ToString(created.UploadId)
	otherHash := sha256.Sum256([]byte("the real part"))
	wrongCRC := base64.StdEncoding.EncodeToString(crc32Bytes(crc32.ChecksumIEEE([]byte("the real part"))))
	otherMD5 := md5.Sum([]byte("the real part"))
	wrongMD5 := base64.StdEncoding.EncodeToString(otherMD5[:])
	tests := []struct {
		name string
		req  func(t *testing.T) *http.Request
	}{
		{"PutObject, payload hash of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/empty1", header: http.Header{"X-Amz-Meta-Fence-Token": {"3"}}, payloadHash: hex.EncodeToString(otherHash[:])}.build(t, d, writerKey)
		}},
		{"PutObject, checksum of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/empty2", header: http.Header{"X-Amz-Meta-Fence-Token": {"3"}, "X-Amz-Checksum-Crc32": {wrongCRC}}, payloadHash: "UNSIGNED-PAYLOAD"}.build(t, d, writerKey)
		}},
		{"UploadPart, payload hash of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/parts?partNumber=1&uploadId=" + url.QueryEscape(uploadID), payloadHash: hex.EncodeToString(otherHash[:])}.build(t, d, writerKey)
		}},
		{"UploadPart, checksum of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/parts?partNumber=2&uploadId=" + url.QueryEscape(uploadID), header: http.Header{"X-Amz-Checksum-Crc32": {wrongCRC}}, payloadHash: "UNSIGNED-PAYLOAD"}.build(t, d, writerKey)
		}},
		{"PutObject, aws-chunked trailer of other bytes", func(t *testing.T) *http.Request {
			return chunkedPut{key: "empty3", token: 3, trailer: true, decoded: -1, tamper: func(body []byte) []byte {
				good := base64.StdEncoding.EncodeToString(crc32Bytes(crc32.ChecksumIEEE(nil)))
				return bytes.Replace(body, []byte(good), []byte(wrongCRC), 1)
			}}.build(t, d)
		}},
		{"PutObject, aws-chunked, bytes after the last chunk", func(t *testing.T) *http.Request {
			return chunkedPut{key: "empty4", token: 3, decoded: -1, tamper: func(body []byte) []byte { return append(body, "smuggled"...) }}.build(t, d)
		}},
		{"PutObject, Content-MD5 of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/empty5", header: http.Header{"X-Amz-Meta-Fence-Token": {"3"}, "Content-Md5": {wrongMD5}}, payloadHash: "UNSIGNED-PAYLOAD"}.build(t, d, writerKey)
		}},
		{"UploadPart, Content-MD5 of other bytes", func(t *testing.T) *http.Request {
			return signedRequest{method: "PUT", target: b + "/parts?partNumber=3&uploadId=" + url.QueryEscape(uploadID), header: http.Header{"Content-Md5": {wrongMD5}}, payloadHash: "UNSIGNED-PAYLOAD"}.build(t, d, writerKey)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e := d.send(t, tt.req(t))
			if status/100 == 2 {
				t.Errorf("answered %d; want a refusal", status)
			} else if status != http.StatusBadRequest {
				t.Errorf("answered %d %s (%s); want 400", status, e.Code, e.Message)
			}
		})
	}
	for _, k := range []string{"empty1", "empty2", "empty3", "empty4", "empty5"} {
		if _, _, ok := d.stored(t, k); ok {
			t.Errorf("%s stored", k)
		}
		if hwm := d.mark(t, k); hwm != 0 {
			t.Errorf("mark of %s raised to %d", k, hwm)
		}
	}
	// The same requests with what the empty body really is are served.
	emptyMD5 := md5.Sum(nil)
	good := signedRequest{method: "PUT", target: b + "/empty-good", header: http.Header{"X-Amz-Meta-Fence-Token": {"3"},
		"Content-Md5": {base64.StdEncoding.EncodeToString(emptyMD5[:])}, "X-Amz-Checksum-Crc32": {base64.StdEncoding.EncodeToString(crc32Bytes(crc32.ChecksumIEEE(nil)))}}}
	if status, e := d.send(t, good.build(t, d, writerKey)); status != http.StatusOK {
		t.Fatalf("a good empty put: %d %s (%s)", status, e.Code, e.Message)
	}
	if body, token, ok := d.stored(t, "empty-good"); !ok || body != "" || token != "3" {
		t.Fatalf("a good empty put stored %q token %q (exists %v)", body, token, ok)
	}
	storeID, _, _ := api.SplitCapability(uploadID) // the door answered the creator's id
	parts, err := minio.Core{Client: d.minio}.ListObjectParts(ctx, d.bucket, "parts", storeID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts.ObjectParts {
		t.Errorf("part %d of %d bytes stored", p.PartNumber, p.Size)
	}
}

// TestAttackListingStaysInPrefix: the logs identity may read under logs/
// only. Listings with the prefix its grant needs, and markers,
// continuation tokens and delimiters of its choosing, name no key
// outside logs/; a prefix that is not under logs/ is refused.
func TestAttackListingStaysInPrefix(t *testing.T) {
	d := newDoor(t, doorOptions{})
	for _, k := range []string{"a-secret", "logs/x", "logs/y/z", "logsz-secret", "z-secret"} {
		d.seed(t, k, "x")
	}
	b := "/" + d.bucket
	tokens := []string{"", "a", "YS1zZWNyZXQ=", "z-secret", base64.StdEncoding.EncodeToString([]byte("a-secret")), "bG9nc3otc2VjcmV0"}
	var targets []string
	for _, tok := range tokens {
		targets = append(targets,
			b+"?list-type=2&prefix=logs%2F&continuation-token="+url.QueryEscape(tok),
			b+"?list-type=2&prefix=logs%2F&start-after="+url.QueryEscape(tok),
			b+"?prefix=logs%2F&marker="+url.QueryEscape(tok),
			b+"?list-type=2&prefix=logs%2F&delimiter="+url.QueryEscape(tok))
	}
	for _, target := range targets {
		req := signedRequest{method: "GET", target: target}.build(t, d, logsKey)
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var list struct {
			Keys     []string `xml:"Contents>Key"`
			Prefixes []string `xml:"CommonPrefixes>Prefix"`
		}
		if resp.StatusCode == http.StatusOK {
			if err := xml.Unmarshal(body, &list); err != nil {
				t.Fatalf("GET %s: %v: %s", target, err, body)
			}
		}
		for _, k := range append(list.Keys, list.Prefixes...) {
			if !strings.HasPrefix(k, "logs/") {
				t.Errorf("GET %s (%d) names %q", target, resp.StatusCode, k)
			}
		}
	}
	for _, prefix := range []string{"", "logs", "logsz", "a", "logs/../a-secret"} {
		req := signedRequest{method: "GET", target: b + "?list-type=2&prefix=" + url.QueryEscape(prefix)}.build(t, d, logsKey)
		if status, e := d.send(t, req); status/100 == 2 {
			t.Errorf("list with prefix %q: %d %s; want a refusal", prefix, status, e.Code)
		}
	}
}
