package s3api_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
	"fencegate/gateway"
)

// versitygw v1.8.0 ignores object server-side encryption: its posix
// backend reads none of the x-amz-server-side-encryption* headers, stores
// the bytes as sent and answers no encryption header. So these tests put
// sseStore between the gateway's S3 backend and versitygw: a real reverse
// proxy that records the encryption headers of every request the store
// gets, and answers them as AWS S3 does where versitygw does not (the
// encryption of a write echoed on its answer and on the object's reads;
// a read of an object written with a customer key (SSE-C) refused without
// that key, 400, or with another key, 403).

// sseStore is the recording proxy in front of the shared versitygw.
type sseStore struct {
	url string

	mu       sync.Mutex
	requests []storeRequest
	objects  map[string]http.Header // path -> the encryption answered for it
}

// storeRequest is one request the store got: its method, path, query,
// encryption headers (canonical names) and the status it was answered.
type storeRequest struct {
	method, path, query string
	sse                 map[string]string
	status              int
}

// Canonical names of the encryption headers.
const (
	hSSE          = "X-Amz-Server-Side-Encryption"
	hKMSKeyID     = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	hKMSContext   = "X-Amz-Server-Side-Encryption-Context"
	hBucketKey    = "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"
	hCustomerAlg  = "X-Amz-Server-Side-Encryption-Customer-Algorithm"
	hCustomerKey  = "X-Amz-Server-Side-Encryption-Customer-Key"
	hCustomerMD5  = "X-Amz-Server-Side-Encryption-Customer-Key-Md5"
	defaultKMSKey = "arn:aws:kms:us-east-1:111122223333:key/aws-s3-default"
)

func newSSEStore(tb testing.TB) *sseStore {
	tb.Helper()
	target, err := url.Parse(sharedS3.Endpoint())
	if err != nil {
		tb.Fatal(err)
	}
	s := &sseStore{objects: map[string]http.Header{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // SigV4 signed the gateway's Host
		},
		ModifyResponse: s.answer,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, storeRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, sse: sseHeaders(r.Header)})
		s.mu.Unlock()
		if status := s.refuseRead(r); status != 0 {
			s.noteStatus(r, status)
			w.WriteHeader(status)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// sseHeaders are h's encryption headers, a copy source's included.
func sseHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for name, values := range h {
		if strings.HasPrefix(name, hSSE) || strings.HasPrefix(name, "X-Amz-Copy-Source-Server-Side-Encryption") {
			out[name] = strings.Join(values, ",")
		}
	}
	return out
}

// refuseRead answers a read of an object written with a customer key as
// AWS does: 400 without the key, 403 with another (a HEAD's answer has
// no body, so neither has this one); 0 lets the request through. Its
// tags (GetObjectTagging) are read without the key, as on AWS.
func (s *sseStore) refuseRead(r *http.Request) int {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || r.URL.Query().Has("uploadId") || r.URL.Query().Has("tagging") {
		return 0
	}
	s.mu.Lock()
	written := s.objects[r.URL.Path]
	s.mu.Unlock()
	switch md5 := written.Get(hCustomerMD5); {
	case md5 == "":
		return 0
	case r.Header.Get(hCustomerKey) == "":
		return http.StatusBadRequest
	case r.Header.Get(hCustomerMD5) != md5:
		return http.StatusForbidden
	}
	return 0
}

func (s *sseStore) noteStatus(r *http.Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.requests) - 1; i >= 0; i-- {
		if q := &s.requests[i]; q.method == r.Method && q.path == r.URL.Path && q.status == 0 {
			q.status = status
			return
		}
	}
}

// answer adds to versitygw's answer the encryption headers AWS answers: a
// write's encryption (SSE-S3 when it asked for none, AWS's default since
// 2023), and on a read the encryption its object was written with.
func (s *sseStore) answer(resp *http.Response) error {
	r := resp.Request
	s.noteStatus(r, resp.StatusCode)
	if resp.StatusCode/100 != 2 {
		return nil
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPut && !q.Has("uploadId") || r.Method == http.MethodPost && q.Has("uploads"):
		answered := http.Header{}
		switch {
		case r.Header.Get(hCustomerAlg) != "":
			answered.Set(hCustomerAlg, r.Header.Get(hCustomerAlg))
			answered.Set(hCustomerMD5, r.Header.Get(hCustomerMD5))
		case strings.HasPrefix(r.Header.Get(hSSE), "aws:kms"):
			answered.Set(hSSE, r.Header.Get(hSSE))
			answered.Set(hKMSKeyID, cmpOr(r.Header.Get(hKMSKeyID), defaultKMSKey))
			if v := r.Header.Get(hBucketKey); v != "" {
				answered.Set(hBucketKey, v)
			}
		default:
			answered.Set(hSSE, "AES256")
		}
		if r.Method == http.MethodPut {
			s.objects[r.URL.Path] = answered
		}
		maps.Copy(resp.Header, answered)
	case r.Method == http.MethodPut && q.Has("uploadId"):
		if v := r.Header.Get(hCustomerAlg); v != "" {
			resp.Header.Set(hCustomerAlg, v)
			resp.Header.Set(hCustomerMD5, r.Header.Get(hCustomerMD5))
		}
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		maps.Copy(resp.Header, s.objects[r.URL.Path])
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// seen returns the requests the store got for bucket/key, and forgets
// them.
func (s *sseStore) seen(bucket, key string) []storeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out, rest []storeRequest
	for _, r := range s.requests {
		if r.path == "/"+bucket+"/"+key {
			out = append(out, r)
		} else {
			rest = append(rest, r)
		}
	}
	s.requests = rest
	return out
}

// newSSEDoor is a door whose gateway reaches versitygw through an
// sseStore, with logger (nil discards).
func newSSEDoor(tb testing.TB, logger *slog.Logger) (*door, *sseStore) {
	tb.Helper()
	store := newSSEStore(tb)
	return newDoor(tb, doorOptions{s3Endpoint: store.url, gateway: gateway.Config{Logger: logger}}), store
}

// customerKey is an SSE-C key as the SDKs send it: the key and its MD5,
// base64.
type customerKey struct{ raw []byte }

func newCustomerKey(tb testing.TB) customerKey {
	tb.Helper()
	k := customerKey{raw: make([]byte, 32)}
	if _, err := rand.Read(k.raw); err != nil {
		tb.Fatal(err)
	}
	return k
}

func (k customerKey) key() string { return base64.StdEncoding.EncodeToString(k.raw) }
func (k customerKey) md5() string {
	sum := md5.Sum(k.raw)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// headers are the three headers of k, as the store must get them.
func (k customerKey) headers() map[string]string {
	return map[string]string{hCustomerAlg: "AES256", hCustomerKey: k.key(), hCustomerMD5: k.md5()}
}

func (k customerKey) onPut(in *s3.PutObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key()), aws.String(k.md5())
}

func (k customerKey) onGet(in *s3.GetObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key()), aws.String(k.md5())
}

func (k customerKey) onHead(in *s3.HeadObjectInput) {
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key()), aws.String(k.md5())
}

// putInput is a PutObjectInput of key with token, changed by opts.
func putInput(d *door, key string, token api.Token, body string, opts ...func(*s3.PutObjectInput)) *s3.PutObjectInput {
	in := &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader(body),
		Metadata: map[string]string{"fence-token": token.String()}}
	for _, o := range opts {
		o(in)
	}
	return in
}

func wantSSE(tb testing.TB, what string, got, want map[string]string) {
	tb.Helper()
	if want == nil {
		want = map[string]string{}
	}
	if !maps.Equal(got, want) {
		tb.Errorf("%s: the store got encryption headers %v; want %v", what, got, want)
	}
}

// only returns the one request of rs with method (and, when not empty, a
// query that has param), failing tb unless there is exactly one.
func only(tb testing.TB, rs []storeRequest, method, param string) storeRequest {
	tb.Helper()
	var found []storeRequest
	for _, r := range rs {
		if r.method == method && (param == "" || strings.Contains(r.query, param)) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		tb.Fatalf("the store got %d %s requests (%s); want 1: %+v", len(found), method, param, rs)
	}
	return found[0]
}

// TestServerSideEncryptionReachesTheStore writes through the door with
// each kind of server-side encryption, as aws-sdk-go-v2 sends it, and
// shows what the store got: the write's headers on its PUT, exactly; the
// customer key (SSE-C) on the gateway's own observation (the HEAD before
// the fence check), which S3 refuses without it, and on the read; no
// SSE-S3 or SSE-KMS header on a HEAD or GET (S3 refuses those). The
// store's encryption answer reaches the client on the write and on the
// read.
func TestServerSideEncryptionReachesTheStore(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	c := d.client(writerKey)
	ctx := context.Background()
	ck := newCustomerKey(t)
	kmsContext := base64.StdEncoding.EncodeToString([]byte(`{"project":"fencegate"}`))
	for _, tc := range []struct {
		name     string
		put      func(*s3.PutObjectInput)
		customer bool
		want     map[string]string // on the PUT
		answer   types.ServerSideEncryption
		kmsKey   string
	}{
		{
			name:   "SSE-S3",
			put:    func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 },
			want:   map[string]string{hSSE: "AES256"},
			answer: types.ServerSideEncryptionAes256,
		},
		{
			name: "SSE-KMS",
			put: func(in *s3.PutObjectInput) {
				in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
				in.SSEKMSKeyId = aws.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd")
				in.SSEKMSEncryptionContext = aws.String(kmsContext)
				in.BucketKeyEnabled = aws.Bool(true)
			},
			want: map[string]string{hSSE: "aws:kms", hKMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/1234abcd",
				hKMSContext: kmsContext, hBucketKey: "true"},
			answer: types.ServerSideEncryptionAwsKms,
			kmsKey: "arn:aws:kms:us-east-1:111122223333:key/1234abcd",
		},
		{
			name:   "DSSE-KMS with the default key",
			put:    func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAwsKmsDsse },
			want:   map[string]string{hSSE: "aws:kms:dsse"},
			answer: types.ServerSideEncryptionAwsKmsDsse,
			kmsKey: defaultKMSKey,
		},
		{name: "SSE-C", put: ck.onPut, customer: true, want: ck.headers()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "sse/" + strings.ReplaceAll(tc.name, " ", "-")
			var reads map[string]string // what a HEAD and GET must carry
			if tc.customer {
				reads = ck.headers()
			}
			for _, w := range []struct {
				token api.Token
				body  string
			}{{1, "first"}, {2, "second"}} {
				token, body := w.token, w.body
				// The second write observes an object that exists: with
				// SSE-C, S3 answers that HEAD only with the key.
				out, err := c.PutObject(ctx, putInput(d, key, token, body, tc.put))
				if err != nil {
					t.Fatalf("PutObject(token %d): %v", token, err)
				}
				if out.ServerSideEncryption != tc.answer || aws.ToString(out.SSEKMSKeyId) != tc.kmsKey {
					t.Errorf("PutObject answered encryption %q, KMS key %q; want %q, %q", out.ServerSideEncryption, aws.ToString(out.SSEKMSKeyId), tc.answer, tc.kmsKey)
				}
				if tc.customer && (aws.ToString(out.SSECustomerAlgorithm) != "AES256" || aws.ToString(out.SSECustomerKeyMD5) != ck.md5()) {
					t.Errorf("PutObject answered SSE-C %q, %q; want AES256, the key's MD5", aws.ToString(out.SSECustomerAlgorithm), aws.ToString(out.SSECustomerKeyMD5))
				}
				seen := store.seen(d.bucket, key)
				wantSSE(t, "the write's PUT", only(t, seen, http.MethodPut, "").sse, tc.want)
				if token == 2 && !tc.customer {
					// Observed from the ETag cache: the gateway wrote
					// the version it replaces. An SSE-C object is
					// always observed with a HEAD (see
					// TestCustomerKeyWithoutItFailsClosed).
					if n := len(seen); n != 1 {
						t.Errorf("the store got %d requests for the second write; want its PUT alone: %+v", n, seen)
					}
				} else {
					head := only(t, seen, http.MethodHead, "")
					wantSSE(t, "the observation's HEAD", head.sse, reads)
					if wantStatus := map[api.Token]int{1: 404, 2: 200}[token]; head.status != wantStatus {
						t.Errorf("the observation's HEAD (token %d) was answered %d; want %d", token, head.status, wantStatus)
					}
				}
				if got, _, _ := d.stored(t, key); got != body {
					t.Errorf("stored %q; want %q", got, body)
				}
			}
			get := &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)}
			if tc.customer {
				ck.onGet(get)
			}
			obj, err := c.GetObject(ctx, get)
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			b, _ := io.ReadAll(obj.Body)
			obj.Body.Close()
			if string(b) != "second" || obj.ServerSideEncryption != tc.answer || aws.ToString(obj.SSEKMSKeyId) != tc.kmsKey {
				t.Errorf("GetObject = %q, encryption %q, KMS key %q; want %q, %q, %q", b, obj.ServerSideEncryption, aws.ToString(obj.SSEKMSKeyId), "second", tc.answer, tc.kmsKey)
			}
			if tc.customer && aws.ToString(obj.SSECustomerKeyMD5) != ck.md5() {
				t.Errorf("GetObject answered the key MD5 %q; want %q", aws.ToString(obj.SSECustomerKeyMD5), ck.md5())
			}
			wantSSE(t, "the read's GET", only(t, store.seen(d.bucket, key), http.MethodGet, "").sse, reads)
			headIn := &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)}
			if tc.customer {
				ck.onHead(headIn)
			}
			head, err := c.HeadObject(ctx, headIn)
			if err != nil {
				t.Fatalf("HeadObject: %v", err)
			}
			if head.ServerSideEncryption != tc.answer {
				t.Errorf("HeadObject answered encryption %q; want %q", head.ServerSideEncryption, tc.answer)
			}
			wantSSE(t, "the read's HEAD", only(t, store.seen(d.bucket, key), http.MethodHead, "").sse, reads)
		})
	}
}

// TestMalformedEncryptionRefused sends encryption headers that S3 refuses
// (400 InvalidArgument): the door refuses them as S3 does, before
// anything reaches etcd or the store, and nothing is written (read back
// with minio-go, straight from versitygw). The refusal never repeats the
// customer key.
func TestMalformedEncryptionRefused(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	c := d.client(writerKey)
	ctx := context.Background()
	ck := newCustomerKey(t)
	other := newCustomerKey(t)
	short := customerKey{raw: ck.raw[:16]}
	customer := func(alg, key, md5 string) func(*s3.PutObjectInput) {
		return func(in *s3.PutObjectInput) {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = optional(alg), optional(key), optional(md5)
		}
	}
	for _, tc := range []struct {
		name string
		put  func(*s3.PutObjectInput)
		opts []func(*s3.Options)
	}{
		{name: "unknown encryption", put: func(in *s3.PutObjectInput) { in.ServerSideEncryption = "AES128" }},
		{name: "KMS key with SSE-S3", put: func(in *s3.PutObjectInput) {
			in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAes256, aws.String("k")
		}},
		{name: "KMS key alone", put: func(in *s3.PutObjectInput) { in.SSEKMSKeyId = aws.String("k") }},
		{name: "KMS context not base64 JSON", put: func(in *s3.PutObjectInput) {
			in.ServerSideEncryption, in.SSEKMSEncryptionContext = types.ServerSideEncryptionAwsKms, aws.String("project=fencegate")
		}},
		{name: "KMS context a JSON list", put: func(in *s3.PutObjectInput) {
			in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
			in.SSEKMSEncryptionContext = aws.String(base64.StdEncoding.EncodeToString([]byte(`["a"]`)))
		}},
		{name: "bucket key not a boolean", put: func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAwsKms },
			opts: []func(*s3.Options){withHeader(hBucketKey, "maybe")}},
		{name: "customer key of 16 bytes", put: customer("AES256", short.key(), short.md5())},
		{name: "customer key not base64", put: customer("AES256", "not base64!", ck.md5())},
		{name: "customer key MD5 of another key", put: customer("AES256", ck.key(), other.md5())},
		{name: "customer key MD5 not base64", put: customer("AES256", ck.key(), "nope")},
		{name: "customer key without its MD5", put: customer("AES256", ck.key(), "")},
		{name: "customer key without algorithm", put: customer("", ck.key(), ck.md5())},
		{name: "customer algorithm without key", put: customer("AES256", "", "")},
		{name: "customer algorithm AES128", put: customer("AES128", ck.key(), ck.md5())},
		{name: "customer key and SSE-S3", put: func(in *s3.PutObjectInput) {
			ck.onPut(in)
			in.ServerSideEncryption = types.ServerSideEncryptionAes256
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "bad/" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := c.PutObject(ctx, putInput(d, key, 1, "never", tc.put), tc.opts...)
			wantAPIError(t, err, http.StatusBadRequest, "InvalidArgument")
			if strings.Contains(err.Error(), ck.key()) {
				t.Errorf("the refusal repeats the customer key: %v", err)
			}
			if _, _, ok := d.stored(t, key); ok {
				t.Errorf("%s was written", key)
			}
			if seen := store.seen(d.bucket, key); len(seen) != 0 {
				t.Errorf("the store got %+v; want nothing", seen)
			}
			if hwm := d.mark(t, key); hwm != 0 {
				t.Errorf("mark = %d; want none", hwm)
			}
		})
	}
	t.Run("read with a short key", func(t *testing.T) {
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("bad/read"),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(short.key()), SSECustomerKeyMD5: aws.String(short.md5())})
		wantAPIError(t, err, http.StatusBadRequest, "InvalidArgument")
		if seen := store.seen(d.bucket, "bad/read"); len(seen) != 0 {
			t.Errorf("the store got %+v; want nothing", seen)
		}
	})
}

// TestCustomerKeyWithoutItFailsClosed: an object written with a customer
// key cannot be observed without it (S3 answers the HEAD 400), so a write
// or delete without the key is refused and changes nothing, never taken
// for a write over an absent object; whether or not the gateway wrote the
// object last (its ETag cache keeps no version of an SSE-C object). With
// the key, the write goes through.
func TestCustomerKeyWithoutItFailsClosed(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	c := d.client(writerKey)
	ctx := context.Background()
	ck := newCustomerKey(t)
	if _, err := c.PutObject(ctx, putInput(d, "ssec", 1, "secret bytes", ck.onPut)); err != nil {
		t.Fatal(err)
	}
	store.seen(d.bucket, "ssec")
	_, err := c.PutObject(ctx, putInput(d, "ssec", 2, "plain"))
	wantAPIError(t, err, http.StatusBadRequest, "BadRequest")
	if body, token, _ := d.stored(t, "ssec"); body != "secret bytes" || token != "1" {
		t.Errorf("after a write without the key: stored %q with token %s; want the SSE-C object, token 1", body, token)
	}
	if n := len(store.seen(d.bucket, "ssec")); n != 1 {
		t.Errorf("the store got %d requests; want the observation's HEAD only", n)
	}
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("ssec")}, withHeader("X-Fence-Token", "2"))
	wantAPIError(t, err, http.StatusBadRequest, "BadRequest")
	if _, _, ok := d.stored(t, "ssec"); !ok {
		t.Error("a delete without the key deleted the object")
	}
	other := newCustomerKey(t)
	_, err = c.PutObject(ctx, putInput(d, "ssec", 2, "other key", other.onPut))
	if err == nil {
		t.Error("a write with another key than the object's went through")
	}
	if hwm := d.mark(t, "ssec"); hwm != 1 {
		t.Errorf("mark = %d; want 1: no refused write raises it", hwm)
	}
	if _, err := c.PutObject(ctx, putInput(d, "ssec", 2, "with the key", ck.onPut)); err != nil {
		t.Fatalf("a write with the key: %v", err)
	}
	if body, token, _ := d.stored(t, "ssec"); body != "with the key" || token != "2" {
		t.Errorf("stored %q with token %s; want the write with the key", body, token)
	}
}

// TestCustomerKeyNeverLogged runs SSE-C writes and reads that succeed and
// fail (refused, stale, store refusals, a lost key) with the gateway and
// door logging at DEBUG, and finds the key in none of the log lines, in
// base64, hex or raw.
func TestCustomerKeyNeverLogged(t *testing.T) {
	var logs syncBuffer
	d, _ := newSSEDoor(t, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c := d.client(writerKey)
	ctx := context.Background()
	ck, other := newCustomerKey(t), newCustomerKey(t)
	bad := func(in *s3.PutObjectInput) {
		ck.onPut(in)
		in.SSECustomerKeyMD5 = aws.String(other.md5())
	}
	steps := []struct {
		name string
		run  func() error
		ok   bool
	}{
		{"write", func() error { _, err := c.PutObject(ctx, putInput(d, "k", 2, "a", ck.onPut)); return err }, true},
		{"write again", func() error { _, err := c.PutObject(ctx, putInput(d, "k", 2, "b", ck.onPut)); return err }, true},
		{"stale write", func() error { _, err := c.PutObject(ctx, putInput(d, "k", 1, "c", ck.onPut)); return err }, false},
		{"MD5 mismatch", func() error { _, err := c.PutObject(ctx, putInput(d, "k", 3, "d", bad)); return err }, false},
		{"another key", func() error { _, err := c.PutObject(ctx, putInput(d, "k", 3, "e", other.onPut)); return err }, false},
		{"read", func() error {
			get := &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")}
			ck.onGet(get)
			obj, err := c.GetObject(ctx, get)
			if err == nil {
				obj.Body.Close()
			}
			return err
		}, true},
		{"read with another key", func() error {
			get := &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")}
			other.onGet(get)
			_, err := c.GetObject(ctx, get)
			return err
		}, false},
	}
	for _, s := range steps {
		if err := s.run(); (err == nil) != s.ok {
			t.Fatalf("%s: err = %v; want ok %v", s.name, err, s.ok)
		}
	}
	d.settle()
	out := logs.String()
	if !strings.Contains(out, `"msg":"request"`) {
		t.Fatalf("no access lines were logged:\n%s", out)
	}
	for _, k := range []customerKey{ck, other} {
		for _, form := range []string{k.key(), hex.EncodeToString(k.raw), string(k.raw), base64.RawStdEncoding.EncodeToString(k.raw)} {
			if strings.Contains(out, form) {
				t.Errorf("a customer key is in the logs:\n%s", out)
			}
		}
		if bytes.Contains([]byte(out), k.raw[:8]) {
			t.Errorf("bytes of a customer key are in the logs")
		}
	}
}

// TestEncryptionOnGCSBucketNotImplemented: a GCS bucket has no S3
// server-side encryption: 501, nothing sent to GCS.
func TestEncryptionOnGCSBucketNotImplemented(t *testing.T) {
	g := newGCSDoor(t, "ssegcs")
	c := g.client(writerKey)
	ctx := context.Background()
	ck := newCustomerKey(t)
	for name, opt := range map[string]func(*s3.PutObjectInput){
		"SSE-S3": func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 },
		"SSE-C":  ck.onPut,
	} {
		g.proxy.Reset()
		_, err := c.PutObject(ctx, putInput(g.door, "k", 1, "x", opt))
		if err == nil {
			t.Fatalf("%s: PutObject to a GCS bucket succeeded", name)
		}
		wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
		if n := g.proxy.Count(); n != 0 {
			t.Errorf("%s: GCS got %d requests; want none", name, n)
		}
	}
	get := &s3.GetObjectInput{Bucket: aws.String(g.bucket), Key: aws.String("k")}
	ck.onGet(get)
	_, err := c.GetObject(ctx, get)
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
}

// TestEncryptionOfUploadsAndCopies: CreateMultipartUpload passes its
// encryption to the store (and its customer key to the observation),
// UploadPart its customer key; CopyObject reads its source with the
// source's customer key (x-amz-copy-source-server-side-encryption-
// customer-*) and writes the destination with its own encryption.
func TestEncryptionOfUploadsAndCopies(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	c := d.client(writerKey)
	ctx := context.Background()
	ck := newCustomerKey(t)
	t.Run("multipart SSE-KMS", func(t *testing.T) {
		_, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp-kms"),
			Metadata: map[string]string{"fence-token": "1"}, ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("kms-key")})
		if err != nil {
			t.Fatal(err)
		}
		wantSSE(t, "the create's POST", only(t, store.seen(d.bucket, "mp-kms"), http.MethodPost, "uploads").sse,
			map[string]string{hSSE: "aws:kms", hKMSKeyID: "kms-key"})
	})
	t.Run("multipart SSE-C", func(t *testing.T) {
		create, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp-c"),
			Metadata: map[string]string{"fence-token": "1"}, SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key()), SSECustomerKeyMD5: aws.String(ck.md5())})
		if err != nil {
			t.Fatal(err)
		}
		seen := store.seen(d.bucket, "mp-c")
		wantSSE(t, "the create's observation", only(t, seen, http.MethodHead, "").sse, ck.headers())
		wantSSE(t, "the create's POST", only(t, seen, http.MethodPost, "uploads").sse, ck.headers())
		part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("mp-c"), UploadId: create.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part one"), SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key()), SSECustomerKeyMD5: aws.String(ck.md5())})
		if err != nil {
			t.Fatal(err)
		}
		wantSSE(t, "the part's PUT", only(t, store.seen(d.bucket, "mp-c"), http.MethodPut, "partNumber").sse, ck.headers())
		_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp-c"), UploadId: create.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
		if err != nil {
			t.Fatal(err)
		}
		if body, _, _ := d.stored(t, "mp-c"); body != "part one" {
			t.Errorf("stored %q; want the part", body)
		}
	})
	t.Run("copy", func(t *testing.T) {
		if _, err := c.PutObject(ctx, putInput(d, "copy-src", 1, "source bytes", ck.onPut)); err != nil {
			t.Fatal(err)
		}
		store.seen(d.bucket, "copy-src")
		out, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("copy-dst"), CopySource: aws.String(d.bucket + "/copy-src"),
			CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(ck.key()), CopySourceSSECustomerKeyMD5: aws.String(ck.md5()),
			ServerSideEncryption: types.ServerSideEncryptionAes256}, withHeader("X-Fence-Token", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Errorf("CopyObject answered encryption %q; want AES256", out.ServerSideEncryption)
		}
		wantSSE(t, "the source's GET", only(t, store.seen(d.bucket, "copy-src"), http.MethodGet, "GetObject").sse, ck.headers())
		wantSSE(t, "the destination's PUT", only(t, store.seen(d.bucket, "copy-dst"), http.MethodPut, "").sse, map[string]string{hSSE: "AES256"})
		if body, _, _ := d.stored(t, "copy-dst"); body != "source bytes" {
			t.Errorf("stored %q; want the source's bytes", body)
		}
		_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("copy-dst2"), CopySource: aws.String(d.bucket + "/copy-src")},
			withHeader("X-Fence-Token", "1"))
		wantAPIError(t, err, http.StatusBadRequest, "BadRequest") // S3's refusal of a GET without the key, as the proxy plays it
	})
}

// TestTagRewriteKeepsEncryption: a tag write rewrites the object (see
// gateway.PutTagsFenced), and the rewrite asks the store for the
// encryption the object has, so that tagging an SSE-KMS object does not
// leave it encrypted with another key, or with none. An object encrypted
// with a customer key cannot be read without it, so its tags cannot be
// rewritten: the tag write fails closed, and the object, its tags and its
// mark stay as they were.
func TestTagRewriteKeepsEncryption(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	ctx := context.Background()
	c := d.client(writerKey)
	kmsKey := "arn:aws:kms:us-east-1:111122223333:key/5678efgh"
	if _, err := c.PutObject(ctx, putInput(d, "kms", 1, "kms body", func(in *s3.PutObjectInput) {
		in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(kmsKey)
		in.BucketKeyEnabled = aws.Bool(true)
	})); err != nil {
		t.Fatal(err)
	}
	store.seen(d.bucket, "kms")
	if _, err := d.client(writerKey, fenced(2)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("kms"),
		Tagging: tagSet(map[string]string{"team": "blue"})}); err != nil {
		t.Fatalf("PutObjectTagging of an SSE-KMS object: %v", err)
	}
	wantSSE(t, "the tag rewrite's PUT", only(t, store.seen(d.bucket, "kms"), http.MethodPut, "").sse,
		map[string]string{hSSE: "aws:kms", hKMSKeyID: kmsKey, hBucketKey: "true"})
	wantTags(t, "the tags of kms", d.storedTags(t, "kms"), map[string]string{"team": "blue"})

	ck := newCustomerKey(t)
	if _, err := c.PutObject(ctx, putInput(d, "ssec", 3, "ssec body", ck.onPut)); err != nil {
		t.Fatal(err)
	}
	store.seen(d.bucket, "ssec")
	_, err := d.client(writerKey, fenced(4)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("ssec"),
		Tagging: tagSet(map[string]string{"team": "red"})})
	if err == nil {
		t.Fatal("PutObjectTagging of an SSE-C object succeeded; want it refused")
	}
	for _, r := range store.seen(d.bucket, "ssec") {
		if r.method == http.MethodPut {
			t.Errorf("the store got a PUT of the SSE-C object: %+v", r)
		}
	}
	if body, token, _ := d.stored(t, "ssec"); body != "ssec body" || token != "3" {
		t.Errorf("stored %q with token %q; want the object as written, token 3", body, token)
	}
	wantTags(t, "the tags of ssec", d.storedTags(t, "ssec"), map[string]string{})
	if m := d.mark(t, "ssec"); m != 3 {
		t.Errorf("mark = %d; want 3", m)
	}
}
