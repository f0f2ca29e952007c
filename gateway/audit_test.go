package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
)

// lockedBuffer is a log destination that server goroutines write to while
// the test reads it.
type lockedBuffer struct{ testenv.Buffer }

// lines parses every JSON log line written so far.
func (b *lockedBuffer) lines(tb testing.TB) []map[string]any {
	tb.Helper()
	return jsonLines(tb, b.String())
}

// jsonLines parses a JSON log, one object a line.
func jsonLines(tb testing.TB, log string) []map[string]any {
	tb.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			tb.Fatalf("log line %q is not JSON: %v", sc.Bytes(), err)
		}
		lines = append(lines, line)
	}
	return lines
}

// auditLines returns the audit lines of the request with id requestID,
// or of every request when requestID is "".
func (b *lockedBuffer) auditLines(tb testing.TB, requestID string) []map[string]any {
	tb.Helper()
	var audit []map[string]any
	for _, line := range b.lines(tb) {
		if line["msg"] == "write refused" && (requestID == "" || line["request_id"] == requestID) {
			audit = append(audit, line)
		}
	}
	return audit
}

// TestAuditLine checks that a refused write leaves exactly one audit line
// in the gateway's JSON log, with the fields an operator needs, and that
// accepted writes and refusals that are not audited leave none. Every
// request has exactly one line, the audit line or the access line.
func TestAuditLine(t *testing.T) {
	var logs lockedBuffer
	e := newEnv(t, gateway.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	const key = "audited"
	resource := "s3/" + e.bucket + "/" + key
	path := "/v1/objects/" + e.bucket + "/" + key

	tests := []struct {
		name       string
		method     string
		tokens     []string
		wantStatus int
		want       map[string]any // nil: no audit line
	}{
		{
			name: "accepted write", method: http.MethodPut, tokens: []string{"5"},
			wantStatus: http.StatusCreated,
		},
		{
			name: "stale write", method: http.MethodPut, tokens: []string{"3"},
			wantStatus: http.StatusConflict,
			want: map[string]any{
				"level": "WARN", "resource": resource, "token": 3.0, "high_water_mark": 5.0,
				"identity": "", "method": "PUT", "path": path, "status": 409.0,
				"problem_type": api.ProblemTypePrefix + "stale-token",
			},
		},
		{
			name: "stale delete", method: http.MethodDelete, tokens: []string{"4"},
			wantStatus: http.StatusConflict,
			want: map[string]any{
				"level": "WARN", "resource": resource, "token": 4.0, "high_water_mark": 5.0,
				"identity": "", "method": "DELETE", "path": path, "status": 409.0,
				"problem_type": api.ProblemTypePrefix + "stale-token",
			},
		},
		{
			name: "missing token (not audited: a malformed request)", method: http.MethodPut,
			wantStatus: http.StatusPreconditionRequired,
		},
		{
			name: "read (not a write)", method: http.MethodGet,
			wantStatus: http.StatusOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, e.url+path, tt.tokens, []byte("body"))
			if r.status != tt.wantStatus {
				t.Fatalf("%s %s = %s; want %d", tt.method, path, r, tt.wantStatus)
			}
			id := r.header.Get("X-Request-Id")
			if id == "" || (r.problem.Type != "" && r.problem.RequestID != id) {
				t.Fatalf("request id %q, problem's %q: want one, the same", id, r.problem.RequestID)
			}
			// The request's line is written when the handlers return:
			// before net/http sends a buffered answer, but after a GET's
			// body, which goes out a flushed chunk at a time, has reached
			// the client. Each request has one line: the audit line
			// replaces the access line and carries its fields.
			var own []map[string]any
			testenv.WaitUntil(t, 10*time.Second, "the request's log line", func() bool {
				own = own[:0]
				for _, line := range logs.lines(t) {
					if line["request_id"] == id {
						own = append(own, line)
					}
				}
				return len(own) > 0
			})
			if len(own) != 1 {
				t.Fatalf("%d log lines for request %s; want 1: %v", len(own), id, own)
			}
			for _, field := range []string{"status", "bytes", "duration", "method", "path", "identity"} {
				if _, ok := own[0][field]; !ok {
					t.Errorf("the request's line %v has no %s", own[0], field)
				}
			}
			lines := logs.auditLines(t, id)
			if tt.want == nil {
				if len(lines) != 0 || own[0]["msg"] != "request" {
					t.Fatalf("audit lines %v, line %v; want none, and an access line", lines, own[0])
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("%d audit lines for request %s; want 1 (log: %v)", len(lines), id, logs.lines(t))
			}
			for field, want := range tt.want {
				if got, ok := lines[0][field]; !ok || got != want {
					t.Errorf("audit line %s = %v (present %v); want %v", field, got, ok, want)
				}
			}
		})
	}
}

// TestAuditAuthRefusals checks the audit lines of writes refused by
// authentication (401) and authorization (403): the identity is the
// caller's ("" when unauthenticated), the resource comes from the path,
// and refused reads are not audited. The 401, answered before routing, is
// still counted under its route pattern, and /metrics needs no key.
func TestAuditAuthRefusals(t *testing.T) {
	readerKey, readerAPIKey := newKey(t, "reader")
	a := newAuthEnv(t, func(bucket string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{{Name: "reader", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpRead}}}}},
			APIKeys:    []edge.APIKey{readerAPIKey},
		}
	})
	a.serve(t)
	path := "/v1/objects/" + a.bucket + "/guarded"
	tests := []struct {
		name       string
		method     string
		key        string
		wantStatus int
		want       map[string]any // nil: no audit line
	}{
		{
			name: "write without a key", method: http.MethodPut,
			wantStatus: http.StatusUnauthorized,
			want: map[string]any{
				"resource": "s3/" + a.bucket + "/guarded", "token": 8.0, "identity": "",
				"method": "PUT", "path": path, "status": 401.0, "problem_type": api.ProblemTypePrefix + "unauthorized",
			},
		},
		{
			name: "write with a reader's key", method: http.MethodDelete, key: readerKey,
			wantStatus: http.StatusForbidden,
			want: map[string]any{
				"resource": "s3/" + a.bucket + "/guarded", "token": 8.0, "identity": "reader",
				"method": "DELETE", "path": path, "status": 403.0, "problem_type": api.ProblemTypePrefix + "forbidden",
			},
		},
		{
			name: "read without a key (not a write)", method: http.MethodGet,
			wantStatus: http.StatusUnauthorized,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, a.url+path, bytes.NewReader([]byte("body")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(api.HeaderFenceToken, "8")
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			r := send(t, req)
			if r.status != tt.wantStatus {
				t.Fatalf("%s %s = %s; want %d", tt.method, path, r, tt.wantStatus)
			}
			var lines []map[string]any
			for _, line := range a.log.lines(t) {
				if line["msg"] == "write refused" && line["request_id"] == r.header.Get("X-Request-Id") {
					lines = append(lines, line)
				}
			}
			if tt.want == nil {
				if len(lines) != 0 {
					t.Fatalf("audit lines %v; want none", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("%d audit lines; want 1 (log:\n%s)", len(lines), a.log.String())
			}
			for field, want := range tt.want {
				if got, ok := lines[0][field]; !ok || got != want {
					t.Errorf("audit line %s = %v (present %v); want %v", field, got, ok, want)
				}
			}
		})
	}
	families := a.scrape(t) // with no key: /metrics is open
	unauthorized := map[string]string{"route": objectRoute, "method": "PUT", "status_class": "4xx", "problem": "unauthorized"}
	if got := sample(families, "fencegate_requests_total", unauthorized); got != 1 {
		t.Errorf("fencegate_requests_total%v = %g; want 1", unauthorized, got)
	}
	for reason, want := range map[string]float64{"unauthorized": 1, "forbidden": 1} {
		if got := sample(families, "fencegate_refused_writes_total", map[string]string{"reason": reason}); got != want {
			t.Errorf("fencegate_refused_writes_total{reason=%q} = %g; want %g", reason, got, want)
		}
	}
}

// TestAuditPartnerRefusals checks the audit lines of partner requests
// refused as stale and for reusing an idempotency key, against a real
// etcd and a real partner server that must see neither.
func TestAuditPartnerRefusals(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	store, partnerStore := newPartnerStores(t, etcd, time.Second)
	var logs lockedBuffer
	cfg := gateway.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	gw, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{payRoute(t, partner.URL)}, partnerStore, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	first := partnerReq{path: "pay/accounts/a1/charges", token: 5, key: "k1", body: `{"amount":5}`}
	if r := partnerDo(t, srv.URL, first); r.status != http.StatusCreated {
		t.Fatalf("first = %s; want 201", r)
	}
	if lines := logs.auditLines(t, ""); len(lines) != 0 {
		t.Fatalf("audit lines after an accepted request: %v; want none", lines)
	}
	tests := []struct {
		name       string
		req        partnerReq
		wantStatus int
		want       map[string]any
	}{
		{
			name:       "stale token",
			req:        partnerReq{path: "pay/accounts/a1/charges", token: 3, body: `{"amount":3}`},
			wantStatus: http.StatusConflict,
			want: map[string]any{
				"token": 3.0, "high_water_mark": 5.0, "method": "POST", "status": 409.0,
				"path": "/v1/partners/pay/accounts/a1/charges", "problem_type": api.ProblemTypePrefix + "stale-token",
			},
		},
		{
			name:       "idempotency key reused for another body",
			req:        partnerReq{path: "pay/accounts/a1/charges", token: 5, key: "k1", body: `{"amount":6}`},
			wantStatus: http.StatusUnprocessableEntity,
			want: map[string]any{
				"token": 5.0, "method": "POST", "status": 422.0, "identity": "",
				"path": "/v1/partners/pay/accounts/a1/charges", "problem_type": api.ProblemTypePrefix + "idempotency-mismatch",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := partnerDo(t, srv.URL, tt.req)
			if r.status != tt.wantStatus {
				t.Fatalf("%s = %s; want %d", tt.req.path, r, tt.wantStatus)
			}
			lines := logs.auditLines(t, r.header.Get("X-Request-Id"))
			if len(lines) != 1 {
				t.Fatalf("%d audit lines; want 1 (log: %v)", len(lines), logs.lines(t))
			}
			for field, want := range tt.want {
				if got, ok := lines[0][field]; !ok || got != want {
					t.Errorf("audit line %s = %v (present %v); want %v", field, got, ok, want)
				}
			}
			if r.problem.Resource != "" && lines[0]["resource"] != string(r.problem.Resource) {
				t.Errorf("audit line resource = %v; want the problem's, %q", lines[0]["resource"], r.problem.Resource)
			}
		})
	}
	if n := partner.count(); n != 1 {
		t.Errorf("partner got %d calls; want 1 (refusals are not forwarded)", n)
	}
}
