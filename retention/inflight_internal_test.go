package retention

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/backends/gcs"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// withTombstones evicts tombstones a retention after their last raise.
var withTombstones = Config{Retention: testRetention, TombstoneRetention: testRetention}

// createUpload starts a multipart upload of key with token through gw.
func (st *stack) createUpload(tb testing.TB, gw *gateway.Gateway, key string, token api.Token) (api.UploadBinding, error) {
	tb.Helper()
	return gw.Engine().CreateUpload(context.Background(), api.ObjectPath{Bucket: st.bucket, Key: key}, token, "", api.ObjectMetadata{})
}

// unbindAll deletes every upload binding from etcd, as their leases'
// expiry would.
func (st *stack) unbindAll(tb testing.TB) {
	tb.Helper()
	if _, err := st.etcd.Client(tb).Delete(context.Background(), "fencegate/uploads/", clientv3.WithPrefix()); err != nil {
		tb.Fatal(err)
	}
}

// TestUploadInProgressKeepsItsTombstone: CreateMultipartUpload raises the
// mark of an object that does not exist yet, and the upload may run for
// the upload TTL, longer than the tombstone retention. While its binding
// lives, passes keep the mark (a writer below the upload's token is
// refused mid-upload); once the upload is gone, the tombstone goes.
func TestUploadInProgressKeepsItsTombstone(t *testing.T) {
	st := newStack(t)
	gw, _ := st.multipartGateway(t, gateway.Config{}, nil)
	if _, err := st.createUpload(t, gw, "k", 5); err != nil {
		t.Fatalf("CreateUpload token 5: %v", err)
	}
	e := st.evictor(t, withTombstones)
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 5 {
		t.Fatalf("mark of an object being uploaded after a pass = %d; want 5 (stats %+v)", hwm, e.Stats())
	}
	if s := e.Stats(); s.Kept[keptUploading] != 1 || s.Evicted[evictedTombstone] != 0 {
		t.Fatalf("stats %+v; want the mark kept once as uploading, no tombstone evicted", s)
	}
	if got := st.write(t, st.gateway(t, gateway.Config{}), "k", 4, []byte("stale")); got != http.StatusConflict {
		t.Fatalf("PUT token 4 while the upload at 5 is in progress = %d; want 409", got)
	}
	if _, _, ok := st.stored(t, "k"); ok {
		t.Fatalf("the object exists after the stale PUT; want none")
	}
	st.unbindAll(t) // the upload's binding expires
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark once the upload's binding is gone = %d; want the tombstone evicted (stats %+v)", hwm, e.Stats())
	}
}

// TestUploadCreatedBetweenLookAndEvictionKeepsItsMark: an upload is
// created at the mark's own token after the evictor looked for uploads
// of the absent object and before its eviction. The gateway that creates
// it knows the mark, so its fence check alone could confirm the mark
// without writing it; CreateUpload writes the mark once the upload is
// bound, which fails the eviction's compare, and the mark stays.
func TestUploadCreatedBetweenLookAndEvictionKeepsItsMark(t *testing.T) {
	st := newStack(t)
	gw, gwURL := st.multipartGateway(t, gateway.Config{}, nil)
	st.mustWrite(t, gwURL, "k", 5, []byte("v"), http.StatusCreated)
	st.mustWrite(t, gwURL, "k", 5, nil, http.StatusNoContent) // a tombstone at 5, which gw knows
	e := st.evictor(t, withTombstones)
	var once sync.Once
	e.beforeEvict = func(ctx context.Context, m api.Mark) {
		once.Do(func() {
			if _, err := st.createUpload(t, gw, "k", 5); err != nil {
				t.Errorf("CreateUpload token 5 before the eviction: %v", err)
			}
		})
	}
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 5 {
		t.Fatalf("mark after an upload was created between the look and the eviction = %d; want 5 (stats %+v)", hwm, e.Stats())
	}
	if s := e.Stats(); s.Kept[keptRaised] != 1 || s.Evicted[evictedTombstone] != 0 {
		t.Fatalf("stats %+v; want the mark kept once as raised, no tombstone evicted", s)
	}
	if got := st.write(t, st.gateway(t, gateway.Config{}), "k", 4, []byte("stale")); got != http.StatusConflict {
		t.Fatalf("PUT token 4 while the upload at 5 is in progress = %d; want 409", got)
	}
}

// pausedBind is an UploadStore whose BindUpload waits for release once
// it has said so on reached.
type pausedBind struct {
	gateway.UploadStore
	reached, release chan struct{}
}

func (p *pausedBind) BindUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	close(p.reached)
	<-p.release
	return p.UploadStore.BindUpload(ctx, b, ttl)
}

// TestUploadBoundAfterTheEvictionRaisesItsMarkAgain: CreateUpload's
// fence check passes, and the tombstone is evicted before the upload is
// bound (the evictor saw no binding). CreateUpload then writes the mark
// again after binding, so when it answers, the mark holds its token and a
// writer below it is refused.
func TestUploadBoundAfterTheEvictionRaisesItsMarkAgain(t *testing.T) {
	st := newStack(t)
	paused := &pausedBind{reached: make(chan struct{}), release: make(chan struct{})}
	gw, gwURL := st.multipartGateway(t, gateway.Config{}, func(u gateway.UploadStore) gateway.UploadStore {
		paused.UploadStore = u
		return paused
	})
	st.mustWrite(t, gwURL, "k", 5, []byte("v"), http.StatusCreated)
	st.mustWrite(t, gwURL, "k", 5, nil, http.StatusNoContent)
	created := make(chan error, 1)
	go func() {
		_, err := st.createUpload(t, gw, "k", 5)
		created <- err
	}()
	select {
	case <-paused.reached:
	case err := <-created:
		t.Fatalf("CreateUpload answered %v before binding", err)
	case <-time.After(30 * time.Second):
		t.Fatal("CreateUpload never reached its binding")
	}
	e := st.evictor(t, withTombstones)
	agedPass(t, st, e, testRetention)
	if s := e.Stats(); s.Evicted[evictedTombstone] != 1 {
		t.Fatalf("stats %+v; want the tombstone evicted while the upload is not bound yet", s)
	}
	close(paused.release)
	if err := <-created; err != nil {
		t.Fatalf("CreateUpload token 5: %v", err)
	}
	if hwm := st.mark(t, "k"); hwm != 5 {
		t.Fatalf("mark once CreateUpload answered = %d; want 5", hwm)
	}
	if got := st.write(t, st.gateway(t, gateway.Config{}), "k", 4, []byte("stale")); got != http.StatusConflict {
		t.Fatalf("PUT token 4 while the upload at 5 is in progress = %d; want 409", got)
	}
}

// TestCreateUploadBelowTheObjectsTokenAfterEviction: once the mark of an
// object that records token 5 is evicted, CreateMultipartUpload with
// token 4 is refused by the token on the object (409), as a PUT is: it
// observes the object before its fence check, so it raises no mark (one
// at 4 would never match the object and never be evicted again) and
// creates no upload.
func TestCreateUploadBelowTheObjectsTokenAfterEviction(t *testing.T) {
	st := newStack(t)
	st.mustWrite(t, st.gateway(t, gateway.Config{}), "k", 5, []byte("v"), http.StatusCreated)
	e := st.evictor(t, Config{Retention: testRetention})
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark after eviction = %d; want none (stats %+v)", hwm, e.Stats())
	}
	gw, _ := st.multipartGateway(t, gateway.Config{}, nil)
	_, err := st.createUpload(t, gw, "k", 4)
	if status := api.ProblemFor(err).Status; !errors.Is(err, api.ErrStaleToken) || status != http.StatusConflict {
		t.Fatalf("CreateUpload token 4 below the object's 5 = %v (status %d); want a stale token, 409", err, status)
	}
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark after the refused CreateUpload = %d; want none raised", hwm)
	}
	for u := range st.minio.ListIncompleteUploads(context.Background(), st.bucket, "k", true) {
		t.Fatalf("S3 holds upload %+v after the refused CreateUpload; want none", u)
	}
	if _, err := st.createUpload(t, gw, "k", 5); err != nil {
		t.Fatalf("CreateUpload with the object's own token: %v", err)
	}
}

// bareNotFound starts a reverse proxy in front of S3 that answers every
// request for a key ending in "/lost" itself: 404 with no body, as a load
// balancer or a misrouted proxy would. It returns its URL.
func bareNotFound(tb testing.TB) string {
	tb.Helper()
	target, err := url.Parse(sharedS3.Endpoint())
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/lost") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestOnlyNoSuchKeyEvictsATombstone: a HEAD's 404 has no body, so a
// missing bucket and a proxy's bare 404 look like a missing key to it.
// The evictor evicts a tombstone only when the store says "no such key"
// of the bucket the mark names; the other two are kept and counted.
func TestOnlyNoSuchKeyEvictsATombstone(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	gw := st.gateway(t, gateway.Config{})
	st.mustWrite(t, gw, "deleted", 5, []byte("v"), http.StatusCreated)
	st.mustWrite(t, gw, "deleted", 6, nil, http.StatusNoContent)
	missingBucket := api.ObjectResource("no-such-bucket-"+st.bucket, "k")
	for _, r := range []api.Resource{st.resource("lost"), missingBucket} {
		if err := st.store.FenceCheck(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
	}
	proxied, err := s3.New(ctx, s3.Config{
		Endpoint:        bareNotFound(t),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := withTombstones
	cfg.Now, cfg.HeadsPerSecond, cfg.Logger = st.clock.Now, 1e6, discardLogger()
	e, err := New(cfg, st.store, proxied)
	if err != nil {
		t.Fatal(err)
	}
	agedPass(t, st, e, testRetention)
	if s := e.Stats(); s.Evicted[evictedTombstone] != 1 || s.Kept[keptUnconfirmed] != 2 {
		t.Fatalf("stats %+v; want the deleted object's tombstone evicted, two kept as unconfirmed", s)
	}
	if hwm := st.mark(t, "deleted"); hwm != 0 {
		t.Errorf("mark of a deleted object = %d; want evicted", hwm)
	}
	if hwm := st.mark(t, "lost"); hwm != 5 {
		t.Errorf("mark of an object behind a proxy's bare 404 = %d; want 5 kept", hwm)
	}
	if hwm, err := st.newStore(t).HighWaterMark(ctx, missingBucket); err != nil || hwm != 5 {
		t.Errorf("mark of an object in a missing bucket = %d, %v; want 5 kept", hwm, err)
	}
}

// TestGCSMissingBucketKeepsTheMark: GCS answers an object of a missing
// bucket 404 as it answers a missing object; the evictor, observing
// through GCS, evicts the tombstone of the missing object only.
func TestGCSMissingBucketKeepsTheMark(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	emulator := testenv.StartGCS(t)
	emulator.CreateBucket(t, st.bucket)
	observer, err := gcs.New(ctx, gcs.Config{Endpoint: emulator.Endpoint(), WithoutAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.Close() })
	missingBucket := api.ObjectResource("no-such-bucket-"+st.bucket, "k")
	for _, r := range []api.Resource{st.resource("gone"), missingBucket} {
		if err := st.store.FenceCheck(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
	}
	cfg := withTombstones
	cfg.Now, cfg.HeadsPerSecond, cfg.Logger = st.clock.Now, 1e6, discardLogger()
	e, err := New(cfg, st.store, observer)
	if err != nil {
		t.Fatal(err)
	}
	agedPass(t, st, e, testRetention)
	if s := e.Stats(); s.Evicted[evictedTombstone] != 1 || s.Kept[keptUnconfirmed] != 1 {
		t.Fatalf("stats %+v; want the missing object's tombstone evicted, the missing bucket's kept as unconfirmed", s)
	}
	if hwm := st.mark(t, "gone"); hwm != 0 {
		t.Errorf("mark of a missing object = %d; want evicted", hwm)
	}
	if hwm, err := st.newStore(t).HighWaterMark(ctx, missingBucket); err != nil || hwm != 5 {
		t.Errorf("mark of an object in a missing GCS bucket = %d, %v; want 5 kept", hwm, err)
	}
}
