package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

func TestPutCreateReplaceAndRead(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	r := e.put(t, "docs/a.txt", 5, "first")
	if r.status != http.StatusCreated || r.header.Get("ETag") == "" || r.header.Get(api.HeaderFenceToken) != "5" || !r.write.Created {
		t.Fatalf("first PUT = %s, headers %v; want 201 with ETag and X-Fence-Token 5", r, r.header)
	}
	// The same token again (one lock holder, many writes) is accepted.
	r2 := e.put(t, "docs/a.txt", 5, "second")
	if r2.status != http.StatusOK || r2.write.Created || r2.write.ReplacedETag != r.header.Get("ETag") {
		t.Fatalf("second PUT with the same token = %s; want 200 replacing %s", r2, r.header.Get("ETag"))
	}
	if body, token, _ := e.stored(t, "docs/a.txt"); body != "second" || token != "5" {
		t.Fatalf("S3 holds %q with fence-token %q; want \"second\" with 5", body, token)
	}

	get := do(t, http.MethodGet, e.objectURL("docs/a.txt"), nil, nil)
	if get.status != http.StatusOK || string(get.body) != "second" || get.header.Get(api.HeaderFenceToken) != "5" || get.header.Get("ETag") != r2.header.Get("ETag") {
		t.Fatalf("GET = %s, headers %v; want 200 \"second\" with X-Fence-Token 5", get, get.header)
	}
	head := do(t, http.MethodHead, e.objectURL("docs/a.txt"), nil, nil)
	if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get(api.HeaderFenceToken) != "5" || head.header.Get("Content-Length") != "6" {
		t.Fatalf("HEAD = %s, headers %v; want 200, no body, X-Fence-Token 5, Content-Length 6", head, head.header)
	}
	fence := do(t, http.MethodGet, e.url+"/v1/fences/s3/"+e.bucket+"/docs/a.txt", nil, nil)
	if want := fmt.Sprintf(`{"resource":"s3/%s/docs/a.txt","high_water_mark":5}`, e.bucket); fence.status != http.StatusOK || strings.TrimSpace(string(fence.body)) != want {
		t.Fatalf("GET fence = %s; want 200 %s", fence, want)
	}
	wantProblem(t, do(t, http.MethodGet, e.objectURL("missing"), nil, nil), http.StatusNotFound, "not-found")
	if r := do(t, http.MethodHead, e.objectURL("missing"), nil, nil); r.status != http.StatusNotFound || len(r.body) != 0 {
		t.Fatalf("HEAD missing = %s; want 404 without a body", r)
	}
}

func TestStaleWriteRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	if r := e.put(t, "k", 34, "from 34"); r.status != http.StatusCreated {
		t.Fatalf("PUT token 34 = %s; want 201", r)
	}
	r := e.put(t, "k", 33, "from 33")
	wantProblem(t, r, http.StatusConflict, "stale-token")
	if r.problem.HighWaterMark != 34 || r.problem.Token != 33 {
		t.Fatalf("stale problem = %+v; want token 33, high_water_mark 34", r.problem)
	}
	if body, token, _ := e.stored(t, "k"); body != "from 34" || token != "34" {
		t.Fatalf("S3 holds %q with fence-token %q; want the 34 write", body, token)
	}
}

func TestDeleteLeavesTombstone(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	e.put(t, "k", 5, "v5")
	if r := e.delete(t, "k", 6); r.status != http.StatusNoContent || r.header.Get(api.HeaderFenceToken) != "6" {
		t.Fatalf("DELETE token 6 = %s; want 204", r)
	}
	if _, _, ok := e.stored(t, "k"); ok {
		t.Fatal("object still in S3 after a fenced delete")
	}
	// A stale writer may not re-create what a newer holder deleted.
	wantProblem(t, e.put(t, "k", 5, "stale"), http.StatusConflict, "stale-token")
	wantProblem(t, e.delete(t, "k", 5), http.StatusConflict, "stale-token")
	if _, _, ok := e.stored(t, "k"); ok {
		t.Fatal("stale create landed in S3")
	}
	if r := e.put(t, "k", 6, "v6"); r.status != http.StatusCreated {
		t.Fatalf("PUT by the deleting holder = %s; want 201", r)
	}
	// Deleting what is not there: TestDeleteAbsentLeavesNoMark and
	// TestDeleteAbsentTombstonesOption.
}

// TestObjectRecordedTokenRefusesStaleWithoutHWM covers an object written
// with a token before this etcd knew the resource: the token recorded on
// the object itself refuses an older one.
func TestObjectRecordedTokenRefusesStaleWithoutHWM(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	e.put(t, "k", 50, "v50")
	if _, err := e.etcd.Client(t).Delete(t.Context(), "fencegate/hwm/"+string(api.ObjectResource(e.bucket, "k"))); err != nil {
		t.Fatal(err)
	}
	// A second gateway on the same etcd and S3 has no cache to help.
	e2 := newEnvSharing(t, e)
	wantProblem(t, e2.put(t, "k", 40, "stale"), http.StatusConflict, "stale-token")
	if body, _, _ := e.stored(t, "k"); body != "v50" {
		t.Fatalf("S3 holds %q; want v50", body)
	}
}

// TestConcurrentWritersMonotonic races 50 writers with distinct random
// tokens on one object, each starting after a random delay and writing
// three times, on each store, then reads the writes the store really
// applied and checks that they form one chain of versions whose tokens
// never decrease. On S3 the applied writes are read on the wire (the
// conditional PUTs S3 answered 2xx); on GCS they are the gateway's
// acknowledged writes, each naming the generation GCS answered and the
// one its ifGenerationMatch required. A writer answered a retryable 503
// (etcd slower than the request timeout) waits and sends the write again,
// as a client would (putRetrying); every write's last answer must be a
// success or a 409.
func TestConcurrentWritersMonotonic(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) { concurrentWritersMonotonic(t, store) })
	}
}

// retryAttempts is how many times putRetrying sends one write.
const retryAttempts = 10

// putRetrying is e.put by a client that does what a retryable 503 asks:
// it waits for Retry-After and sends the same write again, up to
// retryAttempts times in all. It answers the last answer and how many
// times it sent the write. On a loaded machine etcd may take longer than
// the harness's request timeout, and the gateway then answers 503
// fence-unavailable: the fence check's outcome is unknown, and nothing was
// written to the store (the check comes before the write). That is the
// protocol's answer to a slow etcd, not to a race between writers; what
// the races must never do (versions out of token order, a write applied
// but not acknowledged) is checked on the chain of versions, retries or
// not.
func (e *env) putRetrying(tb testing.TB, key string, token api.Token, body string) (result, int) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		r := e.put(tb, key, token, body)
		if r.status != http.StatusServiceUnavailable || !r.problem.Retryable || attempt == retryAttempts {
			return r, attempt
		}
		wait, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || wait < 0 {
			tb.Errorf("retryable 503 with Retry-After %q: %s", r.header.Get("Retry-After"), r)
			return r, attempt
		}
		time.Sleep(time.Duration(wait) * time.Second)
	}
}

// chainLink is one applied write: the version it replaced (its
// condition), the version it made, and its token.
type chainLink struct {
	replaced, made string
	token          string
}

func concurrentWritersMonotonic(t *testing.T, store string) {
	e := newEnvOn(t, store, gateway.Config{})
	rng := rand.New(rand.NewPCG(42, 1))
	const writers, writesEach = 50, 3
	tokens := rng.Perm(1000)[:writers]
	delays := make([]time.Duration, writers)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(200)) * time.Millisecond
	}
	results := make([]result, writers*writesEach)
	var (
		wg      sync.WaitGroup
		retried atomic.Int64 // sends after a retryable 503
	)
	for i, tok := range tokens {
		wg.Go(func() {
			time.Sleep(delays[i])
			for j := range writesEach {
				r, sends := e.putRetrying(t, "hot", api.Token(tok+1), fmt.Sprintf("writer %d, write %d", tok+1, j))
				results[i*writesEach+j] = r
				retried.Add(int64(sends - 1))
			}
		})
	}
	wg.Wait()

	var accepted []api.Token
	var maxAccepted api.Token
	var acknowledged []chainLink
	for i, r := range results {
		tok := api.Token(tokens[i/writesEach] + 1)
		switch {
		case r.status == http.StatusOK || r.status == http.StatusCreated:
			accepted = append(accepted, tok)
			maxAccepted = max(maxAccepted, tok)
			acknowledged = append(acknowledged, chainLink{replaced: r.write.ReplacedETag, made: r.write.ETag, token: tok.String()})
		case r.status == http.StatusConflict && r.problem.Type == api.ProblemTypePrefix+"stale-token":
			if r.problem.HighWaterMark <= tok {
				t.Errorf("token %d refused as stale with high-water mark %d", tok, r.problem.HighWaterMark)
			}
		case r.status == http.StatusConflict && r.problem.Type == api.ProblemTypePrefix+"concurrent-modification":
			// Lost the race three times: refused, nothing written.
		default:
			t.Errorf("token %d: %s", tok, r)
		}
	}
	if len(accepted) < 2 {
		t.Fatalf("%d writes accepted; the chain check needs at least 2", len(accepted))
	}

	chain := acknowledged
	if store == api.StoreS3 {
		chain = nil
		for _, w := range e.s3.AppliedWrites() {
			chain = append(chain, chainLink{replaced: w.IfMatch, made: w.ETag, token: w.FenceToken})
		}
	}
	if len(chain) != len(accepted) {
		t.Fatalf("%s applied %d writes; the gateway acknowledged %d", store, len(chain), len(accepted))
	}
	// Follow the versions from the create: each write replaced the one
	// before it (its condition), and carried a token no smaller.
	byReplaced := map[string]int{}
	for i, w := range chain {
		byReplaced[w.replaced] = i
	}
	prevVersion, prevToken, seen := "", api.Token(0), 0
	for {
		i, ok := byReplaced[prevVersion]
		if !ok {
			break
		}
		w := chain[i]
		tok, err := api.ParseToken(w.token)
		if err != nil || tok < prevToken {
			t.Fatalf("version %d carries token %q after %d", seen, w.token, prevToken)
		}
		prevVersion, prevToken, seen = w.made, tok, seen+1
	}
	if seen != len(chain) {
		t.Fatalf("the applied writes do not form one chain: followed %d of %d", seen, len(chain))
	}
	slices.Sort(accepted)
	body, token, _ := e.stored(t, "hot")
	if token != maxAccepted.String() || !strings.HasPrefix(body, fmt.Sprintf("writer %d,", maxAccepted)) {
		t.Fatalf("%s holds %q with token %s; want the largest accepted token %d", store, body, token, maxAccepted)
	}
	t.Logf("%d writes by %d writers (%d sent again after a 503): %d accepted (tokens %v), final token %s", len(results), writers, retried.Load(), len(accepted), accepted, token)
}

// TestEtcdDownFailsClosed stops etcd: a write then gets 503 with
// Retry-After, and no write reaches S3.
func TestEtcdDownFailsClosed(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	e.put(t, "k", 5, "v5")
	e.etcd.Stop(t)
	e.s3.Reset()
	for _, tok := range []api.Token{6, 7} {
		r := e.put(t, "k", tok, "must not land")
		wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
		if r.header.Get("Retry-After") == "" || !r.problem.Retryable {
			t.Fatalf("503 without Retry-After or retryable: %s %v", r, r.header)
		}
		wantProblem(t, e.delete(t, "k", tok), http.StatusServiceUnavailable, "fence-unavailable")
	}
	if n := e.s3.CountMethod(http.MethodPut) + e.s3.CountMethod(http.MethodDelete); n != 0 {
		t.Fatalf("%d writes reached S3 while etcd was down", n)
	}
	if body, token, _ := e.stored(t, "k"); body != "v5" || token != "5" {
		t.Fatalf("S3 holds %q token %q; want v5 token 5", body, token)
	}
	ready := do(t, http.MethodGet, e.url+"/readyz", nil, nil)
	if ready.status != http.StatusServiceUnavailable || !bytes.Contains(ready.body, []byte(`"etcd"`)) {
		t.Fatalf("/readyz with etcd down = %s; want 503 naming etcd", ready)
	}
}

// TestStaleRefusedFromCache: once the gateway knows a high-water mark, an
// older token is refused without asking etcd or S3 anything.
func TestStaleRefusedFromCache(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	e.put(t, "k", 10, "v10")
	etcdBefore := e.etcdCalls.Count()
	e.s3.Reset()
	for _, tok := range []api.Token{9, 1} {
		r := e.put(t, "k", tok, "stale")
		wantProblem(t, r, http.StatusConflict, "stale-token")
		if r.problem.HighWaterMark != 10 {
			t.Fatalf("stale problem high_water_mark = %d; want 10", r.problem.HighWaterMark)
		}
		wantProblem(t, e.delete(t, "k", tok), http.StatusConflict, "stale-token")
	}
	if n := e.etcdCalls.Count() - etcdBefore; n != 0 {
		t.Fatalf("stale refusals made %d etcd requests; want 0", n)
	}
	if n := e.s3.Count(); n != 0 {
		t.Fatalf("stale refusals made %d S3 requests; want 0", n)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	if r := do(t, http.MethodGet, e.url+"/healthz", nil, nil); r.status != http.StatusOK {
		t.Fatalf("/healthz = %s", r)
	}
	if r := do(t, http.MethodGet, e.url+"/readyz", nil, nil); r.status != http.StatusOK {
		t.Fatalf("/readyz = %s", r)
	}
}

// TestS3FailuresMapTo5xx: with etcd healthy and S3 failing, the gateway
// answers 502 (S3 errors or unreachable) or 504 (S3 too slow), for
// writes (which fail at the observation) and reads alike.
func TestS3FailuresMapTo5xx(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		status  int
		slug    string
	}{
		{"S3 answers 500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusBadGateway, "upstream-error"},
		{"S3 does not answer in time", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}, http.StatusGatewayTimeout, "upstream-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			broken := httptest.NewServer(tt.handler)
			defer broken.Close()
			etcd := testenv.StartEtcd(t)
			store, err := tokenstore.New(etcd.Client(t), tokenstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			backend, err := s3.New(t.Context(), s3.Config{Endpoint: broken.URL, AccessKeyID: "k", SecretAccessKey: "s", UsePathStyle: true, ResponseHeaderTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(gw)
			defer srv.Close()
			wantProblem(t, do(t, http.MethodPut, srv.URL+"/v1/objects/bucket/k", []string{"5"}, []byte("x")), tt.status, tt.slug)
			wantProblem(t, do(t, http.MethodGet, srv.URL+"/v1/objects/bucket/k", nil, nil), tt.status, tt.slug)
		})
	}
}
