package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

func TestWithLockRunsFnWhileHeld(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url, SessionTTL: 5 * time.Second}
	ctx := context.Background()
	var token api.Token
	err := c.WithLock(ctx, "job", func(ctx context.Context, tok api.Token) error {
		token = tok
		st, err := c.LockState(ctx, "job")
		if err != nil {
			return err
		}
		if !st.Held || st.Holder != 0 || st.QueueLength != 1 {
			t.Errorf("LockState inside fn = %+v; want held, without the holder's token", st)
		}
		return nil
	})
	if err != nil || token == 0 {
		t.Fatalf("WithLock = %v, token %d", err, token)
	}
	if st, err := c.LockState(ctx, "job"); err != nil || st.QueueLength != 0 {
		t.Fatalf("LockState after WithLock = %+v, %v; want free", st, err)
	}
	boom := errors.New("boom")
	if err := c.WithLock(ctx, "job", func(context.Context, api.Token) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("WithLock = %v; want fn's error", err)
	}
}

// TestWithLockNeverOverlaps: concurrent WithLock calls on one lock never
// run fn at the same time, and their tokens grow in the order they ran.
func TestWithLockNeverOverlaps(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url, SessionTTL: 10 * time.Second}
	var (
		mu      sync.Mutex
		inside  int
		tokens  []api.Token
		wg      sync.WaitGroup
		overlap bool
	)
	for range 8 {
		wg.Go(func() {
			err := c.WithLock(context.Background(), "job", func(ctx context.Context, tok api.Token) error {
				mu.Lock()
				inside++
				overlap = overlap || inside > 1
				tokens = append(tokens, tok)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("WithLock: %v", err)
			}
		})
	}
	wg.Wait()
	if overlap {
		t.Error("two fn calls ran at once")
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("tokens %v: not strictly increasing in the order fn ran", tokens)
		}
	}
}

// TestWithLockCancelledWhenEtcdStops: fn's ctx is cancelled within the
// session's TTL after etcd stops answering (keepalives then fail), with a
// cause wrapping ErrSessionLost, and WithLock reports the loss.
func TestWithLockCancelledWhenEtcdStops(t *testing.T) {
	e := newEnv(t, nil)
	const ttl = 3 * time.Second
	c := &client.Client{BaseURL: e.url, SessionTTL: ttl}
	var stopped, cancelled time.Time
	err := c.WithLock(context.Background(), "job", func(ctx context.Context, token api.Token) error {
		e.etcd.Stop(t)
		stopped = time.Now()
		select {
		case <-ctx.Done():
			cancelled = time.Now()
		case <-time.After(10 * ttl):
			t.Error("fn's ctx not cancelled 10 TTLs after etcd stopped")
			return nil
		}
		if cause := context.Cause(ctx); !errors.Is(cause, client.ErrSessionLost) {
			t.Errorf("context.Cause = %v; want ErrSessionLost", cause)
		}
		return ctx.Err()
	})
	e.etcd.Restart(t)
	if !errors.Is(err, client.ErrSessionLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("WithLock = %v; want ErrSessionLost and fn's context.Canceled", err)
	}
	elapsed := cancelled.Sub(stopped)
	t.Logf("fn's ctx cancelled %v after etcd stopped (TTL %v)", elapsed, ttl)
	if elapsed > ttl {
		t.Errorf("fn's ctx cancelled %v after etcd stopped; want within the TTL %v", elapsed, ttl)
	}
}

// TestSessionLostWhenRevoked: a session revoked by someone else is lost at
// its next keepalive, and a lock held through it is gone.
func TestSessionLostWhenRevoked(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}
	ctx := context.Background()
	s, err := c.NewSession(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Lock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/v1/sessions/"+s.ID().String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("session not lost 30s after it was revoked")
	}
	if err := s.Err(); !errors.Is(err, client.ErrSessionLost) || !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("Err() = %v; want ErrSessionLost wrapping ErrSessionNotFound", err)
	}
	if _, err := s.Lock(ctx, "job"); !errors.Is(err, client.ErrSessionLost) {
		t.Fatalf("Lock on a lost session = %v; want ErrSessionLost", err)
	}
}

// TestSessionOutlivesTTL: a session of 1 s, kept alive in the background,
// holds its lock for several TTLs.
func TestSessionOutlivesTTL(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}
	ctx := context.Background()
	s, err := c.NewSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
	if st, err := s.LockState(ctx, "job"); err != nil || st.Holder != l.Token {
		t.Fatalf("LockState = %+v, %v; want holder %d", st, err, l.Token)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err(), client.ErrSessionClosed) {
		t.Fatalf("Err() after Close = %v; want ErrSessionClosed", s.Err())
	}
	if st, err := c.LockState(ctx, "job"); err != nil || st.QueueLength != 0 {
		t.Fatalf("LockState after Close = %+v, %v; want free", st, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close = %v; want nil", err)
	}
}

func TestLockTryLockUnlock(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}
	ctx := context.Background()
	a, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	la, err := a.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "job"); !errors.Is(err, api.ErrLockTimeout) {
		t.Fatalf("TryLock on a held lock = %v; want ErrLockTimeout", err)
	}
	var e2 *client.Error
	if _, err := b.TryLock(ctx, "job"); !errors.As(err, &e2) || e2.Problem.Status != http.StatusConflict || !e2.Problem.Retryable {
		t.Fatalf("TryLock error = %#v; want a retryable 409 *client.Error", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Lock(waitCtx, "job")
	cancel()
	if !errors.Is(err, api.ErrLockTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a short ctx = %v; want a timeout", err)
	}
	got := make(chan *client.Lock, 1)
	go func() {
		lb, err := b.Lock(ctx, "job")
		if err != nil {
			t.Errorf("b.Lock: %v", err)
		}
		got <- lb
	}()
	for {
		st, err := c.LockState(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if st.QueueLength == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil || lb.Token <= la.Token || lb.Session() != b {
		t.Fatalf("b's lock = %+v; want a token above %d", lb, la.Token)
	}
	if err := la.Unlock(ctx); err != nil { // a retried unlock is harmless
		t.Fatal(err)
	}
	if st, _ := b.LockState(ctx, "job"); st.Holder != lb.Token {
		t.Fatalf("a retried Unlock touched the new holder: %+v", st)
	}
}

func TestObjects(t *testing.T) {
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}
	ctx := context.Background()
	const key = "dir/a key, ü?#%.txt"
	res, err := c.PutObject(ctx, e.bucket, key, 5, strings.NewReader("v5"))
	if err != nil || !res.Created || res.Token != 5 || res.ETag == "" || res.Resource != api.ObjectResource(e.bucket, key) {
		t.Fatalf("PutObject = %+v, %v", res, err)
	}
	res, err = c.PutObject(ctx, e.bucket, key, 7, bytes.NewReader([]byte("v7")))
	if err != nil || res.Created || res.ReplacedETag == "" {
		t.Fatalf("PutObject(replace) = %+v, %v", res, err)
	}
	_, err = c.PutObject(ctx, e.bucket, key, 6, strings.NewReader("v6"))
	var stale *api.StaleTokenError
	if !errors.Is(err, api.ErrStaleToken) || !errors.As(err, &stale) || stale.HighWaterMark != 7 || stale.Token != 6 {
		t.Fatalf("stale PutObject = %v; want ErrStaleToken with HWM 7", err)
	}
	obj, err := c.GetObject(ctx, e.bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(body) != "v7" || obj.Token != 7 || obj.ETag == "" || obj.Size != 2 {
		t.Fatalf("GetObject = %q, %+v", body, obj)
	}
	for _, tt := range []struct {
		opt                client.GetOption
		body, contentRange string
		err                error
	}{
		{opt: client.Range(1, 1), body: "7", contentRange: "bytes 1-1/2"},
		{opt: client.Range(0, -1), body: "v7", contentRange: "bytes 0-1/2"},
		{opt: client.Range(5, -1), err: api.ErrRangeNotSatisfiable},
	} {
		obj, err := c.GetObject(ctx, e.bucket, key, tt.opt)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Fatalf("GetObject(range) = %v; want %v", err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if string(body) != tt.body || obj.ContentRange != tt.contentRange || obj.Token != 7 {
			t.Fatalf("GetObject(range) = %q, %+v; want %q, Content-Range %q, token 7", body, obj, tt.body, tt.contentRange)
		}
	}
	if b, tok, _ := e.stored(t, key); b != "v7" || tok != "7" {
		t.Fatalf("S3 holds %q with token %q", b, tok)
	}
	if hwm, err := c.HighWaterMark(ctx, api.ObjectResource(e.bucket, key)); err != nil || hwm != 7 {
		t.Fatalf("HighWaterMark = %d, %v; want 7", hwm, err)
	}
	if err := c.DeleteObject(ctx, e.bucket, key, 6); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("stale DeleteObject = %v; want ErrStaleToken", err)
	}
	if err := c.DeleteObject(ctx, e.bucket, key, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetObject(ctx, e.bucket, key); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("GetObject(deleted) = %v; want ErrNotFound", err)
	}
	if _, err := c.PutObject(ctx, e.bucket, key, 0, strings.NewReader("x")); !errors.Is(err, api.ErrMalformedToken) {
		t.Fatalf("PutObject(token 0) = %v; want ErrMalformedToken", err)
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := (&client.Client{}).LockState(ctx, "job"); err == nil {
		t.Error("a Client without BaseURL worked")
	}
	if _, err := (&client.Client{BaseURL: "http://127.0.0.1:1"}).NewSession(ctx, time.Second); err == nil {
		t.Error("NewSession with nothing listening succeeded")
	}
	bogus := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer bogus.Close()
	_, err := (&client.Client{BaseURL: bogus.URL}).LockState(ctx, "job")
	var e *client.Error
	if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), "502") {
		t.Errorf("answer without a problem body = %v; want a plain error naming the status", err)
	}
}

// TestCallPartner, against a stand-in for the gateway's partner route:
// every attempt carries the token, the resource and the same idempotency
// key; a retryable problem is retried, a partner's own answer (even a
// problem+json of the partner) is returned as it is, and a refusal by the
// gateway is a typed error.
func TestCallPartner(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path == "/v1/partners/payments/stale":
			w.Header().Set("Content-Type", api.ContentTypeProblem)
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"type":"urn:fencegate:problem:stale-token","title":"Stale fencing token","status":409,"token":3,"high_water_mark":9}`)
		case r.URL.Path != "/v1/partners/payments/accounts/a1/charges" || r.URL.RawQuery != "expand=1" ||
			r.Header.Get(api.HeaderFenceToken) != "42" || r.Header.Get(api.HeaderFenceResource) != "partner/payments/a1" ||
			string(body) != `{"amount":5}` || r.Method != http.MethodPost:
			t.Errorf("unexpected request %s %s %v %q", r.Method, r.URL, r.Header, body)
			w.WriteHeader(http.StatusTeapot)
		case n == 1:
			w.Header().Set("Content-Type", api.ContentTypeProblem)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"type":"urn:fencegate:problem:fence-unavailable","title":"Fence check unavailable","status":503,"retryable":true}`)
		default:
			w.Header().Set("Content-Type", api.ContentTypeProblem) // the partner's own problem
			w.WriteHeader(http.StatusPaymentRequired)
			io.WriteString(w, `{"type":"https://partner.example/insufficient-funds","status":402}`)
		}
	}))
	defer srv.Close()
	c := &client.Client{BaseURL: srv.URL}
	ctx := context.Background()
	resp, err := c.CallPartner(ctx, "payments", client.PartnerRequest{
		Path:     "accounts/a1/charges?expand=1",
		Token:    42,
		Resource: "partner/payments/a1",
		Body:     []byte(`{"amount":5}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(string(body), "insufficient-funds") {
		t.Fatalf("CallPartner = %d %q; want the partner's 402", resp.StatusCode, body)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || len(keys[0]) != 32 {
		t.Fatalf("idempotency keys %q; want one generated key on both attempts", keys)
	}
	_, err = c.CallPartner(ctx, "payments", client.PartnerRequest{Path: "stale", Token: 3, IdempotencyKey: "k1"})
	var stale *api.StaleTokenError
	if !errors.As(err, &stale) || stale.HighWaterMark != 9 {
		t.Fatalf("CallPartner(stale) = %v; want *api.StaleTokenError", err)
	}
	if len(keys) != 3 || keys[2] != "k1" {
		t.Fatalf("keys %q; want the stale call sent once with key k1", keys)
	}
	if _, err := c.CallPartner(ctx, "payments", client.PartnerRequest{Path: "x"}); !errors.Is(err, api.ErrMissingToken) {
		t.Fatalf("CallPartner without a token = %v; want ErrMissingToken", err)
	}
}

// TestLockWaitsOutTheWaiterLimit: Lock, which waits until granted, also
// waits out a gateway at its limit of waiters (503 too-many-waiters):
// it polls again after Retry-After, and is granted once a place is free.
func TestLockWaitsOutTheWaiterLimit(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	h, err := newGatewayHandlerWith(gateway.Config{MaxLockWaiters: 1}, etcd.Client(t), sharedS3.Endpoint(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &client.Client{BaseURL: srv.URL}
	ctx := context.Background()
	var sessions []*client.Session
	for range 3 {
		s, err := c.NewSession(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		sessions = append(sessions, s)
	}
	la, err := sessions[0].TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *client.Lock
		err error
	}
	lockAsync := func(s *client.Session) chan result {
		got := make(chan result, 1)
		go func() {
			l, err := s.Lock(ctx, "job")
			got <- result{l, err}
		}()
		return got
	}
	gotB := lockAsync(sessions[1]) // the one waiter the gateway admits
	testenv.WaitUntil(t, 30*time.Second, "b waits", func() bool {
		st, err := c.LockState(ctx, "job")
		return err == nil && st.QueueLength == 2
	})
	gotC := lockAsync(sessions[2])
	testenv.WaitUntil(t, 30*time.Second, "c is refused too-many-waiters", func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `problem="too-many-waiters"`)
	})
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-gotB
	if b.err != nil {
		t.Fatalf("b.Lock: %v", b.err)
	}
	if err := b.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-gotC; r.err != nil || r.l.Token <= b.l.Token {
		t.Fatalf("c.Lock = %+v, %v; want a grant after b's (token %d)", r.l, r.err, b.l.Token)
	}
}
