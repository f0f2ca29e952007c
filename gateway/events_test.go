package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// eventsEnv is a gateway with the lock API (and the options given) in
// front of real etcd and a real S3 server, served over HTTP.
type eventsEnv struct {
	*env
	gw *gateway.Gateway
}

// newEventsEnv starts etcd, a bucket and a gateway of cfg with the lock
// API and the options that extra makes on its token store. wrap, when
// not nil, wraps the server's listener.
func newEventsEnv(tb testing.TB, cfg gateway.Config, wrap func(net.Listener) net.Listener, extra ...func(bucket string, store *tokenstore.Store) gateway.Option) *eventsEnv {
	tb.Helper()
	e := newStackEnv(tb)
	store, backend := e.connect(tb, tokenstore.Config{RequestTimeout: 5 * time.Second})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := []gateway.Option{gateway.WithLocks(store)}
	for _, option := range extra {
		opts = append(opts, option(e.bucket, store))
	}
	gw, err := gateway.New(cfg, store, backend, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return &eventsEnv{env: e, gw: gw}
}

// sseMessage is one Server-Sent Event.
type sseMessage struct {
	event, id, data string
}

// decision decodes a decision event's data.
func (m sseMessage) decision(tb testing.TB) map[string]any {
	tb.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(m.data), &d); err != nil {
		tb.Fatalf("event data %q: %v", m.data, err)
	}
	return d
}

// stream is a subscription to the feed, read by a goroutine of its own.
type stream struct {
	resp     *http.Response
	messages chan sseMessage // closed when the stream ends
}

// subscribe opens GET /v1/events?prefix=prefix with key (none when "")
// and fails unless it is answered 200 text/event-stream. Its messages are
// read only once read is called.
func subscribe(tb testing.TB, client *http.Client, base, prefix, key string) *stream {
	tb.Helper()
	resp := openEvents(tb, client, base, prefix, key)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tb.Fatalf("GET /v1/events: %d %s %s; want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return &stream{resp: resp, messages: make(chan sseMessage, 1<<16)}
}

func openEvents(tb testing.TB, client *http.Client, base, prefix, key string) *http.Response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/events?prefix="+prefix, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// read starts reading the stream's messages (comments are skipped).
func (s *stream) read() *stream {
	go func() {
		defer close(s.messages)
		sc := bufio.NewScanner(s.resp.Body)
		var m sseMessage
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
				if m != (sseMessage{}) {
					s.messages <- m
				}
				m = sseMessage{}
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				m.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s
}

// next returns the next message, failing if none comes within 10
// seconds (a bound on a hang, not a measurement) or the stream ends.
func (s *stream) next(tb testing.TB) sseMessage {
	tb.Helper()
	select {
	case m, ok := <-s.messages:
		if !ok {
			tb.Fatal("the event stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		tb.Fatal("no event within 10 s")
	}
	return sseMessage{}
}

// nextDecision returns the next decision's data, failing unless it is of
// kind ("": of any kind).
func (s *stream) nextDecision(tb testing.TB, kind string) map[string]any {
	tb.Helper()
	m := s.next(tb)
	d := m.decision(tb)
	if _, seq, _ := strings.Cut(m.id, "-"); m.event != "decision" || (kind != "" && d["kind"] != kind) || seq != fmt.Sprint(d["seq"]) {
		tb.Fatalf("got event %q id %s %s; want a decision of kind %s with id = <run>-<seq>", m.event, m.id, m.data, kind)
	}
	return d
}

// wantFields fails unless d has each field of want with that value
// (numbers as JSON has them: float64), and no field of absent.
func wantFields(tb testing.TB, d map[string]any, want map[string]any, absent ...string) {
	tb.Helper()
	for k, v := range want {
		if d[k] != v {
			tb.Errorf("event %v: %s = %#v; want %#v", d, k, d[k], v)
		}
	}
	for _, k := range absent {
		if _, ok := d[k]; ok {
			tb.Errorf("event %v has %s; want none", d, k)
		}
	}
}

// TestEventsWrites: accepted and refused writes appear on a subscriber's
// stream with their resource, token, high-water marks, ETag, status and
// latency; a stale token with the mark that refused it and where it was
// caught (the cached mark, or etcd's when another gateway raised it);
// a delete as delete.accepted. A subscriber of another prefix sees none
// of them.
func TestEventsWrites(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	prefix := "s3/" + e.bucket + "/"
	s := subscribe(t, nil, e.url, prefix, "").read()
	other := subscribe(t, nil, e.url, "s3/elsewhere/", "").read()

	r := e.put(t, "k", 5, "five")
	if r.status != http.StatusCreated {
		t.Fatalf("put 5: %s", r)
	}
	d := s.nextDecision(t, events.KindWriteAccepted)
	wantFields(t, d, map[string]any{"resource": prefix + "k", "token": "5", "hwm": "5", "etag": r.header.Get("ETag"), "status": 201.0}, "problem", "caught", "hwm_before")
	if ms, _ := d["latency_ms"].(float64); ms <= 0 {
		t.Errorf("latency_ms = %v; want > 0", d["latency_ms"])
	}
	if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d["time"])); err != nil || time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("time = %v (%v); want now", d["time"], err)
	}

	r = e.put(t, "k", 6, "six")
	d = s.nextDecision(t, events.KindWriteAccepted)
	wantFields(t, d, map[string]any{"token": "6", "hwm_before": "5", "hwm": "6", "etag": r.header.Get("ETag"), "status": 200.0})

	wantProblem(t, e.put(t, "k", 4, "four"), http.StatusConflict, "stale-token")
	d = s.nextDecision(t, events.KindWriteRefused)
	wantFields(t, d, map[string]any{"resource": prefix + "k", "token": "4", "hwm": "6", "problem": "stale-token", "status": 409.0, "caught": "cache"}, "etag")

	// Another gateway raises the mark to 9: this one's cache still says
	// 6, so etcd's fence check refuses 7.
	e2 := newEnvSharing(t, e.env)
	if r := e2.put(t, "k", 9, "nine"); r.status != http.StatusOK {
		t.Fatalf("put 9 through the other gateway: %s", r)
	}
	wantProblem(t, e.put(t, "k", 7, "seven"), http.StatusConflict, "stale-token")
	d = s.nextDecision(t, events.KindWriteRefused)
	wantFields(t, d, map[string]any{"token": "7", "hwm": "9", "problem": "stale-token", "caught": "etcd"})

	if r := e.delete(t, "k", 9); r.status != http.StatusNoContent {
		t.Fatalf("delete 9: %s", r)
	}
	d = s.nextDecision(t, events.KindDeleteAccepted)
	wantFields(t, d, map[string]any{"resource": prefix + "k", "token": "9", "hwm": "9", "status": 204.0})

	select {
	case m := <-other.messages:
		t.Fatalf("a subscriber of another prefix got %s %s", m.event, m.data)
	default:
	}
}

// TestEventsLocks: a lock's grant and release appear with the grant's
// token, session and waiters.
func TestEventsLocks(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	s := subscribe(t, nil, e.url, "jobs-", "").read()
	r := do(t, http.MethodPost, e.url+"/v1/sessions", nil, []byte(`{"ttl":10}`))
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || r.status != http.StatusCreated {
		t.Fatalf("session: %s", r)
	}
	body, _ := json.Marshal(api.LockRequest{Session: sess.ID})
	r = do(t, http.MethodPost, e.url+"/v1/locks/jobs-nightly", nil, body)
	var grant api.LockGrant
	if err := json.Unmarshal(r.body, &grant); err != nil || r.status != http.StatusOK {
		t.Fatalf("acquire: %s", r)
	}
	d := s.nextDecision(t, events.KindLockGranted)
	wantFields(t, d, map[string]any{"resource": "jobs-nightly", "token": grant.Token.String(), "session": sess.ID.String(), "waiters": 0.0})
	r = do(t, http.MethodDelete, fmt.Sprintf("%s/v1/locks/jobs-nightly?token=%d", e.url, grant.Token), nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("release: %s", r)
	}
	d = s.nextDecision(t, events.KindLockReleased)
	wantFields(t, d, map[string]any{"resource": "jobs-nightly", "token": grant.Token.String(), "waiters": 0.0})
}

// newAliceAndBob starts an events env with auth, and returns it with
// the keys of Alice, who may read and write a/ of the bucket, and Bob,
// who may write the whole bucket but read only b/.
func newAliceAndBob(t *testing.T) (e *eventsEnv, aliceKey, bobKey string) {
	t.Helper()
	aliceKey, aliceAPIKey := newKey(t, "alice")
	bobKey, bobAPIKey := newKey(t, "bob")
	e = newEventsEnv(t, gateway.Config{}, nil, func(bucket string, _ *tokenstore.Store) gateway.Option {
		return gateway.WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "alice", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/a/", Operations: []edge.Operation{edge.OpRead, edge.OpWrite}}}},
				{Name: "bob", Grants: []edge.Grant{
					{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpWrite}},
					{Prefix: "s3/" + bucket + "/b/", Operations: []edge.Operation{edge.OpRead}},
				}},
			},
			APIKeys: []edge.APIKey{aliceAPIKey, bobAPIKey},
		})
	})
	return e, aliceKey, bobKey
}

// TestEventsAuthorization: with auth, a subscriber sees only the events
// of resources it may read. Bob may write the whole bucket but read only
// b/: his stream skips the write of a/ and shows the write of b/ that
// came after it, while Alice, who reads a/, sees a/'s. Subscribing to a
// prefix one may not read at all is refused 403, and without a key 401.
func TestEventsAuthorization(t *testing.T) {
	e, aliceKey, bobKey := newAliceAndBob(t)
	prefix := "s3/" + e.bucket + "/"
	bob := subscribe(t, nil, e.url, "", bobKey).read()
	alice := subscribe(t, nil, e.url, prefix, aliceKey).read()
	put := func(key, apiKey string) {
		t.Helper()
		(authRequest{name: "put " + key, method: http.MethodPut, path: "/v1/objects/" + e.bucket + "/" + key, key: apiKey, token: "3", body: "x", status: http.StatusCreated}).run(t, &authEnv{env: e.env, gw: e.gw}, nil)
	}
	put("a/1", bobKey)
	put("b/1", bobKey)
	d := bob.nextDecision(t, events.KindWriteAccepted)
	wantFields(t, d, map[string]any{"resource": prefix + "b/1", "identity": "bob"})
	d = alice.nextDecision(t, events.KindWriteAccepted)
	wantFields(t, d, map[string]any{"resource": prefix + "a/1", "identity": "bob"})

	for _, c := range []struct {
		name, prefix, key string
		status            int
	}{
		{"bob under a/", prefix + "a/", bobKey, http.StatusForbidden},
		{"alice under b/", prefix + "b/", aliceKey, http.StatusForbidden},
		{"no key", "", "", http.StatusUnauthorized},
	} {
		resp := openEvents(t, nil, e.url, c.prefix, c.key)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: subscribe answered %d; want %d", c.name, resp.StatusCode, c.status)
		}
	}
}

// smallBuffers wraps a listener so that the server's side of each
// connection has a small send buffer: a client that stops reading
// stops the gateway's writes after a few kilobytes, not megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// smallReadClient is an HTTP client whose connections have a small
// receive buffer, set before they connect.
func smallReadClient() *http.Client {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// TestEventsSlowSubscriberDoesNotBlockWrites: a subscriber that never
// reads fills its connection and then its buffer; writes go on being
// answered while it is full, and the events they made are dropped and
// counted. When the subscriber reads again it gets what was buffered,
// then a dropped marker whose count is exactly the events missing
// between the ids around it, and the sum of the markers is the gateway's
// count of dropped events.
func TestEventsSlowSubscriberDoesNotBlockWrites(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{EventBuffer: 8}, func(l net.Listener) net.Listener { return smallBuffers{l} })
	if r := e.put(t, "k", 100, "x"); r.status != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	s := subscribe(t, smallReadClient(), e.url, "", "") // not read yet
	// Write until whileFull writes in a row were each answered while
	// their event was dropped: the subscriber's connection and buffer are
	// full (a stream that only waits between writes takes some events
	// within whileFull writes), and the writes went on regardless.
	const most, whileFull = 20000, 100
	dropped := metricValue(t, e.url, "fencegate_events_dropped_total")
	streak := 0
	for n := 0; streak < whileFull; n++ {
		if n == most {
			t.Fatalf("after %d writes, no %d in a row dropped their event", most, whileFull)
		}
		wantProblem(t, e.put(t, "k", 1, "stale"), http.StatusConflict, "stale-token")
		now := metricValue(t, e.url, "fencegate_events_dropped_total")
		if now == dropped+1 {
			streak++
		} else {
			streak = 0
		}
		dropped = now
	}
	s.read()
	var markers, lastID uint64
	var sawMarker, sawAfter bool
	pending := uint64(0)
	// Read until the markers account for every event the gateway
	// dropped, and an event came after a marker.
	for i := 0; !sawAfter || markers < uint64(metricValue(t, e.url, "fencegate_events_dropped_total")); i++ {
		if i == most {
			t.Fatalf("the markers count %d dropped events after %d messages; the gateway %v", markers, most, metricValue(t, e.url, "fencegate_events_dropped_total"))
		}
		var m sseMessage
		select {
		case m = <-s.messages:
		default:
			// Nothing to read: make an event, which finds room now.
			wantProblem(t, e.put(t, "k", 1, "stale"), http.StatusConflict, "stale-token")
			m = s.next(t)
		}
		switch m.event {
		case "dropped":
			var d struct{ Dropped uint64 }
			if err := json.Unmarshal([]byte(m.data), &d); err != nil || d.Dropped == 0 {
				t.Fatalf("dropped marker %q", m.data)
			}
			pending = d.Dropped
			markers += d.Dropped
			sawMarker = true
		case "decision":
			_, seq, _ := strings.Cut(m.id, "-")
			id, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				t.Fatalf("id %q", m.id)
			}
			if lastID != 0 && id-lastID-1 != pending {
				t.Fatalf("event %d after %d with %d dropped between; want the marker to count the gap", id, lastID, pending)
			}
			if pending > 0 {
				sawAfter = true
			}
			lastID, pending = id, 0
		}
	}
	if !sawMarker {
		t.Fatal("no dropped marker")
	}
	if got := metricValue(t, e.url, "fencegate_events_dropped_total"); uint64(got) != markers {
		t.Fatalf("the markers count %d dropped events; the gateway %v", markers, got)
	}
}

// TestEventsShutdown: draining the gateway ends open streams, so that the
// server's graceful Shutdown returns rather than waiting for them, and
// new subscribers are refused 503.
func TestEventsShutdown(t *testing.T) {
	e := newStackEnv(t)
	store, backend := e.connect(t, tokenstore.Config{RequestTimeout: 5 * time.Second})
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	s := subscribe(t, nil, base, "", "").read()

	gw.SetDraining()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a stream open: %v; want the stream ended by draining", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
	for range s.messages { // ends: the stream was closed
	}

	// A gateway that drains refuses new subscribers.
	h := httptest.NewServer(gw)
	defer h.Close()
	resp := openEvents(t, nil, h.URL, "", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("subscribe while draining: %d; want 503 with Retry-After", resp.StatusCode)
	}
}

// TestEventsSubscriberLimit: subscribers past Config.EventSubscribers are
// refused 503 gateway-busy, until one leaves.
func TestEventsSubscriberLimit(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{EventSubscribers: 2}, nil)
	subscribe(t, nil, e.url, "", "")
	second := subscribe(t, nil, e.url, "", "")
	r := do(t, http.MethodGet, e.url+"/v1/events", nil, nil)
	wantProblem(t, r, http.StatusServiceUnavailable, "gateway-busy")
	if metricValue(t, e.url, "fencegate_event_subscribers") != 2 {
		t.Fatal("fencegate_event_subscribers is not 2")
	}
	second.resp.Body.Close()
	testenv.WaitUntil(t, 10*time.Second, "the closed stream's subscriber to leave", func() bool {
		return metricValue(t, e.url, "fencegate_event_subscribers") == 1
	})
	subscribe(t, nil, e.url, "", "")
}

// TestEventsPartners: a partner request appears as partner.admitted, then
// write.accepted with the partner's status once forwarded; the same
// request again, answered from its idempotency record, as
// partner.replayed; a stale token as write.refused, not forwarded.
func TestEventsPartners(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	gw := startPartnerGateway(t, etcd, 5*time.Second, payRoute(t, partner.URL))
	s := subscribe(t, nil, gw, "partner/pay/", "").read()
	req := partnerReq{path: "pay/accounts/a1/charges", token: 7, key: "order-1", body: `{"amount":5}`}
	if r := partnerDo(t, gw, req); r.status != http.StatusCreated || replayed(r) {
		t.Fatalf("first call: %s", r)
	}
	wantFields(t, s.nextDecision(t, events.KindPartnerAdmitted), map[string]any{"resource": "partner/pay/accounts/a1", "token": "7"})
	wantFields(t, s.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": "partner/pay/accounts/a1", "token": "7", "hwm": "7", "status": 201.0})
	if r := partnerDo(t, gw, req); r.status != http.StatusCreated || !replayed(r) {
		t.Fatalf("second call: %s; want the replay", r)
	}
	wantFields(t, s.nextDecision(t, events.KindPartnerReplayed), map[string]any{"resource": "partner/pay/accounts/a1", "token": "7", "status": 201.0})
	req.token, req.key = 6, "order-2"
	wantProblem(t, partnerDo(t, gw, req), http.StatusConflict, "stale-token")
	wantFields(t, s.nextDecision(t, events.KindWriteRefused), map[string]any{"resource": "partner/pay/accounts/a1", "token": "6", "hwm": "7", "caught": "cache", "problem": "stale-token"})
	if n := partner.count(); n != 1 {
		t.Fatalf("the partner was called %d times; want 1", n)
	}
}

// TestEventsPartnerBusy: a partner request refused because another one on
// its resource is upstream appears as partner.busy with its token and
// 503, after the first one's partner.admitted.
func TestEventsPartnerBusy(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.MaxWait = 100 * time.Millisecond
	gw := startPartnerGateway(t, etcd, 5*time.Second, route)
	s := subscribe(t, nil, gw, "partner/pay/", "").read()
	first := make(chan result, 1)
	go func() { first <- partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/slow", token: 1}) }()
	<-partner.arrived
	wantFields(t, s.nextDecision(t, events.KindPartnerAdmitted), map[string]any{"resource": "partner/pay/accounts/a1", "token": "1"})
	wantProblem(t, partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 2, key: "k-busy"}), http.StatusServiceUnavailable, "resource-busy")
	wantFields(t, s.nextDecision(t, events.KindPartnerBusy), map[string]any{"resource": "partner/pay/accounts/a1", "token": "2", "status": 503.0})
	if r := <-first; r.status != http.StatusCreated {
		t.Fatalf("the slow request = %s; want 201", r)
	}
	wantFields(t, s.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": "partner/pay/accounts/a1", "token": "1", "status": 201.0})
}
