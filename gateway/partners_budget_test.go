package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// metricValue reads one sample of the gateway's /metrics: the value of
// series (name and labels, as exposed), or -1 when it is not there.
func metricValue(tb testing.TB, gatewayURL, series string) float64 {
	tb.Helper()
	resp, err := http.Get(gatewayURL + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestPartnerBudgetOfARoute: a route whose budget is 3 records takes 3
// keys; a 4th is refused 503 idempotency-budget-exhausted with
// Retry-After and not forwarded, on this gateway and on another one on
// the same etcd; the 3 keys are still replayed, and a request without a
// key (which stores nothing) is still forwarded. /metrics shows the
// records, their bytes, and the refusals.
func TestPartnerBudgetOfARoute(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.Budget = partners.PartnerBudget{Records: 3}
	routes := []partners.PartnerRoute{route}
	gw1, _ := startAnswerGateway(t, etcd, gateway.Config{}, routes)
	gw2, _ := startAnswerGateway(t, etcd, gateway.Config{}, routes)
	for i := range 3 {
		if r := partnerDo(t, gw1, partnerReq{path: fmt.Sprintf("pay/accounts/a%d/charges", i), token: 1, key: fmt.Sprintf("k%d", i)}); r.status != http.StatusCreated {
			t.Fatalf("key %d = %s; want 201", i, r)
		}
	}
	refused := partnerDo(t, gw1, partnerReq{path: "pay/accounts/a9/charges", token: 1, key: "k-over"})
	wantProblem(t, refused, http.StatusServiceUnavailable, "idempotency-budget-exhausted")
	if refused.header.Get("Retry-After") == "" {
		t.Errorf("503 idempotency-budget-exhausted without Retry-After")
	}
	// The other gateway reads the usage from etcd (it has no cached
	// reading yet): the 3 records count there too.
	wantProblem(t, partnerDo(t, gw2, partnerReq{path: "pay/accounts/b9/charges", token: 1, key: "k-other"}), http.StatusServiceUnavailable, "idempotency-budget-exhausted")
	for i := range 3 {
		r := partnerDo(t, gw2, partnerReq{path: fmt.Sprintf("pay/accounts/a%d/charges", i), token: 1, key: fmt.Sprintf("k%d", i)})
		if r.status != http.StatusCreated || !replayed(r) {
			t.Fatalf("replay of key %d with the budget used up = %s; want the stored 201", i, r)
		}
	}
	if r := partnerDo(t, gw1, partnerReq{path: "pay/accounts/c1/charges", token: 1}); r.status != http.StatusCreated {
		t.Fatalf("request without a key = %s; want forwarded (it stores nothing)", r)
	}
	if n := partner.count(); n != 4 {
		t.Fatalf("partner got %d calls; want 4 (3 keys and the request without one)", n)
	}
	if v := metricValue(t, gw1, `fencegate_idempotency_records{route="pay"}`); v != 3 {
		t.Errorf("fencegate_idempotency_records = %v; want 3", v)
	}
	if v := metricValue(t, gw1, `fencegate_idempotency_bytes{route="pay"}`); v < 3*200 || v > 3*2048 {
		t.Errorf("fencegate_idempotency_bytes = %v; want the 3 records' few hundred bytes each", v)
	}
	if v := metricValue(t, gw1, `fencegate_idempotency_budget_refusals_total{route="pay"}`); v != 1 {
		t.Errorf("fencegate_idempotency_budget_refusals_total on the first gateway = %v; want 1", v)
	}
}

// TestPartnerBudgetOfAnIdentity: the identity's budget counts records
// of every route: with 2, a third key is refused on either route.
func TestPartnerBudgetOfAnIdentity(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	pay := payRoute(t, partner.URL)
	mail := payRoute(t, partner.URL)
	mail.Name = "mail"
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{PartnerIdentityBudget: partners.PartnerBudget{Records: 2}}, []partners.PartnerRoute{pay, mail})
	for _, path := range []string{"pay/accounts/a1/charges", "mail/accounts/a1/charges"} {
		if r := partnerDo(t, gw, partnerReq{path: path, token: 1, key: "k-" + path[:3]}); r.status != http.StatusCreated {
			t.Fatalf("%s = %s; want 201", path, r)
		}
	}
	for _, path := range []string{"pay/accounts/a2/charges", "mail/accounts/a2/charges"} {
		wantProblem(t, partnerDo(t, gw, partnerReq{path: path, token: 1, key: "k-third"}), http.StatusServiceUnavailable, "idempotency-budget-exhausted")
	}
	if n := partner.count(); n != 2 {
		t.Fatalf("partner got %d calls; want 2", n)
	}
}

// TestPartnerBudgetOfBytes: a budget of bytes is used up by the first
// record: the next key is refused.
func TestPartnerBudgetOfBytes(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.Budget = partners.PartnerBudget{Bytes: 100}
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []partners.PartnerRoute{route})
	if r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 1, key: "k1"}); r.status != http.StatusCreated {
		t.Fatalf("first = %s; want 201", r)
	}
	wantProblem(t, partnerDo(t, gw, partnerReq{path: "pay/accounts/a2/charges", token: 1, key: "k2"}), http.StatusServiceUnavailable, "idempotency-budget-exhausted")
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}

// TestBudgetLimitsExported: /metrics shows the configured size of the
// budget of buffered bodies and each partner route's idempotency budget,
// with the defaults filled in, and none for a bound that is none.
func TestBudgetLimitsExported(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	bounded := payRoute(t, partner.URL)
	bounded.Budget = partners.PartnerBudget{Records: 3, Bytes: 4096}
	defaulted := payRoute(t, partner.URL)
	defaulted.Name = "defaulted"
	unbounded := payRoute(t, partner.URL)
	unbounded.Name = "unbounded"
	unbounded.Budget = partners.PartnerBudget{Records: -1, Bytes: -1}
	gw := startPartnerGatewayWith(t, etcd, time.Second, gateway.Config{BufferBudgetBytes: 48 << 20}, bounded, defaulted, unbounded)
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{"fencegate_body_buffer_limit_bytes", 48 << 20},
		{`fencegate_idempotency_limit_records{route="pay"}`, 3},
		{`fencegate_idempotency_limit_bytes{route="pay"}`, 4096},
		{`fencegate_idempotency_limit_records{route="defaulted"}`, partners.DefaultPartnerBudgetRecords},
		{`fencegate_idempotency_limit_bytes{route="defaulted"}`, partners.DefaultPartnerBudgetBytes},
		{`fencegate_idempotency_limit_records{route="unbounded"}`, -1},
		{`fencegate_idempotency_limit_bytes{route="unbounded"}`, -1},
	} {
		if got := metricValue(t, gw, tc.series); got != tc.want {
			t.Errorf("%s = %v; want %v (-1: not exported)", tc.series, got, tc.want)
		}
	}
}

// TestFenceBatchSizesExported: the batch sizes a token store observes
// through FenceBatchSizes.Observe are on the /metrics of the gateway
// given them with WithFenceBatchSizes.
func TestFenceBatchSizesExported(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	batches := gateway.NewFenceBatchSizes()
	store, err := tokenstore.New(etcd.Client(t), tokenstore.Config{RequestTimeout: time.Second, ObserveFenceBatch: batches.Observe})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, newMemObjects(), gateway.WithFenceBatchSizes(batches))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	if err := store.FenceCheck(t.Context(), "s3/b/k", 1); err != nil {
		t.Fatalf("FenceCheck = %v", err)
	}
	batches.Observe(5)
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{"fencegate_fence_batch_size_count", 2},
		{"fencegate_fence_batch_size_sum", 6},
		{`fencegate_fence_batch_size_bucket{le="1"}`, 1},
		{`fencegate_fence_batch_size_bucket{le="4"}`, 1},
		{`fencegate_fence_batch_size_bucket{le="8"}`, 2},
		{`fencegate_fence_batch_size_bucket{le="128"}`, 2},
	} {
		if got := metricValue(t, srv.URL, tc.series); got != tc.want {
			t.Errorf("%s = %v; want %v", tc.series, got, tc.want)
		}
	}
}
