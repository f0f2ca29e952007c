package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"fencegate/gateway"
	"fencegate/internal/testenv"
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
	route.Budget = gateway.PartnerBudget{Records: 3}
	routes := []gateway.PartnerRoute{route}
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
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{PartnerIdentityBudget: gateway.PartnerBudget{Records: 2}}, []gateway.PartnerRoute{pay, mail})
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
	route.Budget = gateway.PartnerBudget{Bytes: 100}
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []gateway.PartnerRoute{route})
	if r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 1, key: "k1"}); r.status != http.StatusCreated {
		t.Fatalf("first = %s; want 201", r)
	}
	wantProblem(t, partnerDo(t, gw, partnerReq{path: "pay/accounts/a2/charges", token: 1, key: "k2"}), http.StatusServiceUnavailable, "idempotency-budget-exhausted")
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}
