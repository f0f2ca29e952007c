package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/fielderr"
	"fencegate/tokenstore"
)

// newMultipartEnv is newEnv for a gateway with multipart uploads on
// (WithMultipart, bindings in etcd); it also returns the Gateway, whose
// exported multipart methods the S3 front door uses.
func newMultipartEnv(tb testing.TB, cfg gateway.Config) (*env, *gateway.Gateway) {
	tb.Helper()
	e := newStackEnv(tb)
	store, backend := e.connect(tb, tokenstore.Config{RequestTimeout: time.Second})
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(cfg, store, backend, gateway.WithMultipart(backend, uploads), gateway.WithTickets(backend))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return e, gw
}

// smallParts makes REST PUTs over 8 MiB go in parts of 5 MiB.
var smallParts = gateway.Config{MultipartThreshold: 8 << 20, MultipartPartSize: 5 << 20}

// generated is n bytes of a seeded generator, never held whole.
func generated(n int64, seed uint64) io.Reader {
	return io.LimitReader(&randReader{rand.NewChaCha8([32]byte{byte(seed)})}, n)
}

type randReader struct{ r *rand.ChaCha8 }

func (g *randReader) Read(p []byte) (int, error) { return g.r.Read(p) }

// putStream sends a PUT of body (n bytes, with a Content-Length) with
// token.
func (e *env) putStream(tb testing.TB, key string, token api.Token, body io.Reader, n int64) result {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPut, e.objectURL(key), body)
	if err != nil {
		tb.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set(api.HeaderFenceToken, token.String())
	return send(tb, req)
}

// uploadsLeft lists the bucket's multipart uploads in progress with
// minio-go, an independent client.
func (e *env) uploadsLeft(tb testing.TB) []string {
	tb.Helper()
	var ids []string
	for u := range e.minio.ListIncompleteUploads(context.Background(), e.bucket, "", true) {
		if u.Err != nil {
			tb.Fatalf("list uploads: %v", u.Err)
		}
		ids = append(ids, u.Key+" "+u.UploadID)
	}
	return ids
}

// TestPutInPartsLandsByteExact: a 200 MiB REST PUT over the threshold is
// uploaded in parts and lands byte for byte, recording its token, with no
// upload left behind.
func TestPutInPartsLandsByteExact(t *testing.T) {
	e, _ := newMultipartEnv(t, smallParts)
	const n = 200 << 20
	r := e.putStream(t, "big", 7, generated(n, 1), n)
	if r.status != http.StatusCreated || !r.write.Created || r.write.Token != 7 || !strings.HasSuffix(strings.Trim(r.write.ETag, `"`), "-40") {
		t.Fatalf("PUT of 200 MiB = %s; want 201 and a 40-part ETag", r)
	}
	want := sha256.New()
	_, _ = io.Copy(want, generated(n, 1))
	obj, err := e.minio.GetObject(context.Background(), e.bucket, "big", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got := sha256.New()
	read, err := io.Copy(got, obj)
	if err != nil || read != n || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("read back %d bytes, %v; want %d bytes with the body's SHA-256", read, err, n)
	}
	info, err := obj.Stat()
	if err != nil || info.UserMetadata["Fence-Token"] != "7" {
		t.Fatalf("stat = %+v, %v; want fence-token 7", info.UserMetadata, err)
	}
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Fatalf("uploads left: %v; want none", left)
	}
	// A second write in parts replaces it, If-Match its ETag.
	r = e.putStream(t, "big", 7, generated(9<<20, 2), 9<<20)
	if r.status != http.StatusOK || r.write.ReplacedETag == "" {
		t.Fatalf("second PUT in parts = %s; want 200 replacing the first", r)
	}
	// Below the threshold, one PUT as before.
	if r := e.put(t, "small", 7, "small body"); r.status != http.StatusCreated || strings.Contains(r.write.ETag, "-") {
		t.Fatalf("small PUT = %s; want 201 with a single-part ETag", r)
	}
}

// TestPutInPartsStale: a writer whose token goes stale while its body
// is uploaded in parts is refused 409, the object keeps the newer
// writer's bytes, and the upload is aborted: at a part (the mark rose
// between parts), at the completion's fence check (it rose after the
// completion observed the object), and after losing the completion's
// race (the newer writer wrote after the fence check passed).
func TestPutInPartsStale(t *testing.T) {
	const n = 20 << 20 // four parts of 5 MiB
	tests := []struct {
		name string
		// hooks returns the hooks that let the newer writer in, with
		// the env to write through once it exists.
		hooks func(newer func()) *gateway.TestHooks
		// midBody is where in the body the newer writer writes; -1
		// means it writes from a hook instead.
		midBody int64
	}{
		{"between parts", func(func()) *gateway.TestHooks { return nil }, 12 << 20},
		{"at the completion's fence check", func(newer func()) *gateway.TestHooks {
			return &gateway.TestHooks{AfterObserve: onceFor(5, newer)}
		}, -1},
		{"after the completion's fence check", func(newer func()) *gateway.TestHooks {
			return &gateway.TestHooks{AfterFenceCheck: onceFor(5, newer)}
		}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *env
			newer := func() {
				if r := e.put(t, "obj", 6, "bytes of 6"); r.status >= 300 {
					t.Errorf("newer writer's PUT = %s", r)
				}
			}
			cfg := smallParts
			cfg.TestHooks = tt.hooks(newer)
			e, _ = newMultipartEnv(t, cfg)
			if r := e.put(t, "obj", 4, "bytes of 4"); r.status != http.StatusCreated {
				t.Fatalf("first PUT = %s", r)
			}
			var body io.Reader = generated(n, 3)
			if tt.midBody >= 0 {
				body = io.MultiReader(io.LimitReader(body, tt.midBody), &callOnRead{f: newer}, body)
			}
			r := e.putStream(t, "obj", 5, body, n)
			wantProblem(t, r, http.StatusConflict, "stale-token")
			if r.problem.HighWaterMark != 6 || r.problem.Token != 5 {
				t.Fatalf("problem = %+v; want token 5, high-water mark 6", r.problem)
			}
			if got, token, _ := e.stored(t, "obj"); got != "bytes of 6" || token != "6" {
				t.Fatalf("object = %q, token %s; want the newer writer's bytes, token 6", got, token)
			}
			if left := e.uploadsLeft(t); len(left) != 0 {
				t.Fatalf("uploads left: %v; want the stale upload aborted", left)
			}
		})
	}
}

// onceFor returns a hook that calls f the first time it runs for token.
func onceFor(token api.Token, f func()) func(context.Context, api.Resource, api.Token) {
	var done atomic.Bool
	return func(_ context.Context, _ api.Resource, t api.Token) {
		if t == token && done.CompareAndSwap(false, true) {
			f()
		}
	}
}

// callOnRead calls f at its first read and then reads as at its end.
type callOnRead struct {
	f    func()
	done bool
}

func (c *callOnRead) Read([]byte) (int, error) {
	if !c.done {
		c.done = true
		c.f()
	}
	return 0, io.EOF
}

// TestMultipartMethods drives the exported methods that the S3 front
// door serves S3's multipart operations with.
func TestMultipartMethods(t *testing.T) {
	e, gw := newMultipartEnv(t, gateway.Config{})
	ctx := context.Background()
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	part := bytes.Repeat([]byte("a"), api.MinPartSize)

	b, err := gw.Engine().CreateUpload(ctx, p, 10, "text/plain", api.ObjectMetadata{})
	if err != nil || b.Token != 10 || b.Resource != p.Resource() {
		t.Fatalf("CreateUpload = %+v, %v", b, err)
	}
	// The create raised the mark: an upload of an older holder is
	// refused at once, without a request to S3.
	e.resetStoreCounts()
	if _, err := gw.Engine().CreateUpload(ctx, p, 9, "", api.ObjectMetadata{}); !errors.Is(err, api.ErrStaleToken) || e.storeRequests() != 0 {
		t.Fatalf("CreateUpload(9) after 10 = %v, %d S3 requests; want stale, none", err, e.storeRequests())
	}
	etag1, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, 0)
	if err != nil {
		t.Fatalf("UploadPart(1) = %v", err)
	}
	if _, err := put(t, e, "src", 10, "0123456789"); err != nil {
		t.Fatal(err)
	}
	etag2, err := gw.Engine().CopyPart(ctx, api.CopyPartInput{Path: p, UploadID: b.Capability(), Number: 2, Source: api.ObjectPath{Bucket: e.bucket, Key: "src"}, SourceRange: "bytes=0-3"}, 0)
	if err != nil {
		t.Fatalf("CopyPart(2) = %v", err)
	}
	list, err := gw.Engine().ListParts(ctx, p, b.Capability(), 0, 0)
	if err != nil || len(list.Parts) != 2 || list.Parts[1].Size != 4 {
		t.Fatalf("ListParts = %+v, %v; want two parts", list, err)
	}
	uploads, err := gw.Engine().ListUploads(ctx, api.ListUploadsInput{Bucket: e.bucket})
	if err != nil || len(uploads.Uploads) != 1 || uploads.Uploads[0].UploadID != b.UploadID {
		t.Fatalf("ListUploads = %+v, %v; want the one upload", uploads, err)
	}
	// An id of another object's upload, or none, is not found.
	other := api.ObjectPath{Bucket: e.bucket, Key: "other"}
	if _, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: other, UploadID: b.Capability(), Number: 1, Body: bytes.NewReader(nil)}, 0); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("UploadPart to another key's upload = %v; want ErrNotFound", err)
	}
	if _, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 0, Body: bytes.NewReader(nil)}, 0); !errors.Is(err, api.ErrInvalidRequest) {
		t.Fatalf("UploadPart(0) = %v; want ErrInvalidRequest", err)
	}
	res, err := gw.Engine().CompleteUpload(ctx, p, b.Capability(), 0, []api.Part{{Number: 1, ETag: etag1}, {Number: 2, ETag: etag2}})
	if err != nil || !res.Created || res.Token != 10 {
		t.Fatalf("CompleteUpload = %+v, %v", res, err)
	}
	if got, token, _ := e.stored(t, "doc"); len(got) != len(part)+4 || !strings.HasSuffix(got, "a0123") || token != "10" {
		t.Fatalf("object = %d bytes ending %q, token %s; want the two parts, token 10", len(got), got[len(got)-5:], token)
	}
	// Completed: the binding is gone.
	if _, err := gw.Engine().CompleteUpload(ctx, p, b.Capability(), 0, []api.Part{{Number: 1, ETag: etag1}}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("second CompleteUpload = %v; want ErrNotFound", err)
	}

	// A part of an upload whose token another writer passed is refused
	// at once: nothing but the abort reaches S3.
	b, err = gw.Engine().CreateUpload(ctx, p, 11, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.put(t, "doc", 12, "bytes of 12"); r.status != http.StatusOK {
		t.Fatalf("PUT(12) = %s", r)
	}
	e.resetStoreCounts()
	_, err = gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, 0)
	var stale *api.StaleTokenError
	if !errors.As(err, &stale) || stale.HighWaterMark != 12 || e.storeRequests() != 1 {
		t.Fatalf("UploadPart of a stale upload = %v, %d S3 requests; want stale (mark 12), only the abort", err, e.storeRequests())
	}
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Fatalf("uploads left: %v; want the stale upload aborted", left)
	}
	if got, token, _ := e.stored(t, "doc"); got != "bytes of 12" || token != "12" {
		t.Fatalf("object = %q, token %s; want 12's", got, token)
	}

	// Abort of a live upload.
	b, err = gw.Engine().CreateUpload(ctx, p, 12, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Engine().AbortUpload(ctx, p, b.Capability(), 0); err != nil {
		t.Fatalf("AbortUpload = %v", err)
	}
	if _, err := gw.Engine().ListParts(ctx, p, b.Capability(), 0, 0); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("ListParts after abort = %v; want ErrNotFound", err)
	}
}

// put is e.put as an error.
func put(tb testing.TB, e *env, key string, token api.Token, body string) (result, error) {
	tb.Helper()
	r := e.put(tb, key, token, body)
	if r.status >= 300 {
		return r, errors.New(r.String())
	}
	return r, nil
}

// TestMultipartOff: without WithMultipart, bodies over the threshold go
// in one PUT as before.
func TestMultipartOff(t *testing.T) {
	e := newEnv(t, smallParts)
	const n = 9 << 20
	if r := e.putStream(t, "obj", 3, generated(n, 4), n); r.status != http.StatusCreated || strings.Contains(r.write.ETag, "-") {
		t.Fatalf("PUT of 9 MiB without multipart = %s; want 201, one PUT", r)
	}
}

// TestPutInPartsLimit: a body over MaxMultipartBodyBytes is refused 413
// before anything reaches S3 or etcd's marks.
func TestPutInPartsLimit(t *testing.T) {
	cfg := smallParts
	cfg.MaxMultipartBodyBytes = 10 << 20
	e, _ := newMultipartEnv(t, cfg)
	e.resetStoreCounts()
	const n = 11 << 20
	r := e.putStream(t, "obj", 3, generated(n, 5), n)
	wantProblem(t, r, http.StatusRequestEntityTooLarge, "body-too-large")
	if got := e.storeRequests(); got != 0 {
		t.Fatalf("%d S3 requests; want none", got)
	}
	if hwm, err := e.store.HighWaterMark(context.Background(), api.ObjectResource(e.bucket, "obj")); err != nil || hwm != 0 {
		t.Fatalf("mark = %d, %v; want none", hwm, err)
	}
}

// TestMultipartConfig: part sizes and body limits outside S3's limits
// are refused.
func TestMultipartConfig(t *testing.T) {
	tests := []struct {
		cfg   gateway.Config
		field string // "" when valid
	}{
		{gateway.Config{}, ""},
		{gateway.Config{MultipartThreshold: -1}, ""},
		{gateway.Config{MultipartPartSize: 4 << 20}, "multipart_part_size"},
		{gateway.Config{MultipartPartSize: 6 << 30}, "multipart_part_size"},
		{gateway.Config{MultipartPartSize: 5 << 20, MaxMultipartBodyBytes: 5<<20*10000 + 1}, "max_multipart_body_bytes"},
		{gateway.Config{UploadTTL: time.Millisecond}, "upload_ttl"},
	}
	for _, tt := range tests {
		errs := fielderr.List(tt.cfg.Validate(nil))
		if tt.field == "" && len(errs) != 0 || tt.field != "" && (len(errs) != 1 || errs[0].Field != tt.field) {
			t.Errorf("Validate(%+v) = %v; want an error of %q", tt.cfg, errs, tt.field)
		}
	}
}

// TestUploadOfAnOlderGateway: a binding recorded by a gateway from before
// bindings had a secret (resource and token only, as during a rolling
// upgrade) has no capability. Its upload takes the upload's token on
// every request: one without is refused (ErrMissingToken, saying what to
// send), and no id of the capability's form names it; with the token its
// creator completes it.
func TestUploadOfAnOlderGateway(t *testing.T) {
	e, gw := newMultipartEnv(t, gateway.Config{})
	ctx := context.Background()
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	b, err := gw.Engine().CreateUpload(ctx, p, 10, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	client := e.etcd.Client(t)
	key := "fencegate/uploads/" + b.UploadID
	resp, err := client.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("binding %s = %+v, %v", key, resp, err)
	}
	older := `{"resource":"` + string(p.Resource()) + `","token":10}`
	if _, err := client.Put(ctx, key, older, clientv3.WithLease(clientv3.LeaseID(resp.Kvs[0].Lease))); err != nil {
		t.Fatal(err)
	}
	part := bytes.Repeat([]byte("a"), api.MinPartSize)
	send := func(id string, token api.Token) error {
		_, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, token)
		return err
	}
	if err := send(b.Capability(), 0); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("UploadPart by the capability of a binding without a secret = %v; want ErrNotFound", err)
	}
	if err := send(b.UploadID, 0); !errors.Is(err, api.ErrMissingToken) || !strings.Contains(err.Error(), "X-Fence-Token") {
		t.Fatalf("UploadPart without a token = %v; want ErrMissingToken saying to send X-Fence-Token", err)
	}
	if err := send(b.UploadID, 10); err != nil {
		t.Fatalf("UploadPart with the upload's token = %v", err)
	}
	list, err := gw.Engine().ListParts(ctx, p, b.UploadID, 0, 0)
	if err != nil || len(list.Parts) != 1 {
		t.Fatalf("ListParts = %+v, %v; want the part", list, err)
	}
	if _, err := gw.Engine().CompleteUpload(ctx, p, b.UploadID, 0, []api.Part{{Number: 1, ETag: list.Parts[0].ETag}}); !errors.Is(err, api.ErrMissingToken) {
		t.Fatalf("CompleteUpload without a token = %v; want ErrMissingToken", err)
	}
	if res, err := gw.Engine().CompleteUpload(ctx, p, b.UploadID, 10, []api.Part{{Number: 1, ETag: list.Parts[0].ETag}}); err != nil || res.Token != 10 {
		t.Fatalf("CompleteUpload with the upload's token = %+v, %v", res, err)
	}
	if got, token, _ := e.stored(t, "doc"); got != string(part) || token != "10" {
		t.Fatalf("object = %d bytes, token %s; want the part, token 10", len(got), token)
	}
}

// landsThenAborted is a multipart store whose first UploadPart stores
// the part and then runs overtake before it answers: the part is on its
// way while another request finds its upload stale and the gateway
// aborts it.
type landsThenAborted struct {
	gateway.MultipartStore
	overtake func()
	once     sync.Once
}

func (s *landsThenAborted) UploadPart(ctx context.Context, in api.UploadPartInput) (string, error) {
	etag, err := s.MultipartStore.UploadPart(ctx, in)
	s.once.Do(s.overtake)
	return etag, err
}

// TestPartOnItsWayWhenAbortedStale: a part that the store takes while
// the gateway aborts its upload as stale (another part found the mark
// past the upload's token) is answered stale, as a part sent after the
// abort, not as stored; and the upload is aborted in the store again
// after it, so that nothing the part left there (a store may take a part
// that arrives under an abort and keep the upload) stays behind.
func TestPartOnItsWayWhenAbortedStale(t *testing.T) {
	e := newStackEnv(t)
	store, backend := e.connect(t, tokenstore.Config{RequestTimeout: time.Second})
	uploads, err := tokenstore.NewUploads(store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	part := bytes.Repeat([]byte("a"), api.MinPartSize)
	var gw *gateway.Gateway
	var b api.UploadBinding
	multipart := &landsThenAborted{MultipartStore: backend}
	multipart.overtake = func() {
		if r := e.put(t, "doc", 21, "bytes of 21"); r.status >= 300 {
			t.Errorf("PUT(21) = %s", r)
		}
		if _, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 2, Body: bytes.NewReader(part), Size: int64(len(part))}, 0); !errors.Is(err, api.ErrStaleToken) {
			t.Errorf("UploadPart(2) after PUT(21) = %v; want stale", err)
		}
	}
	gw, err = gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, gateway.WithMultipart(multipart, uploads))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	if b, err = gw.Engine().CreateUpload(ctx, p, 20, "", api.ObjectMetadata{}); err != nil {
		t.Fatal(err)
	}
	_, err = gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, 0)
	var stale *api.StaleTokenError
	if !errors.As(err, &stale) || stale.HighWaterMark != 21 {
		t.Errorf("UploadPart(1), stored while its upload was aborted as stale = %v; want stale (mark 21)", err)
	}
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Errorf("uploads left: %v; want the stale upload aborted", left)
	}
	if got, token, _ := e.stored(t, "doc"); got != "bytes of 21" || token != "21" {
		t.Errorf("object = %q, token %s; want 21's", got, token)
	}
}
