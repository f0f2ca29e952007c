package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
)

// slowPartnerRequest sends, on a connection of its own, the headers of a
// partner POST to path with token 1 and a Content-Length of announced
// bytes, then sent bytes of its body; the test sends the rest, or not.
func slowPartnerRequest(tb testing.TB, gatewayURL, path string, announced, sent int) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST /v1/partners/%s HTTP/1.1\r\nHost: fencegate\r\n%s: 1\r\nContent-Length: %d\r\n\r\n", path, api.HeaderFenceToken, announced)
	if _, err := conn.Write(append([]byte(head), bytes.Repeat([]byte("x"), sent)...)); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// readAnswer reads the gateway's answer on conn, within a bound that
// only a hang reaches.
func readAnswer(tb testing.TB, conn net.Conn) (int, string) {
	tb.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestPartnerBodiesShareTheBodyBudget: partner request bodies are held in
// memory, as buffered object bodies are, and are counted in the same
// budget (Config.BufferBudgetBytes) as their bytes arrive. Without it, N
// authorized clients that each send most of a body of the route's limit
// and stall would hold N times the limit, unbounded, until the server's
// read timeout. A body that finds the budget full is refused 503
// gateway-busy and nothing reaches the partner; the slow one, once sent
// whole, is forwarded, and its memory given back.
func TestPartnerBodiesShareTheBodyBudget(t *testing.T) {
	const (
		budget    = 256 << 10
		announced = 192 << 10
		sent      = 160 << 10 // three 64 KiB chunks reserved: 192 KiB
	)
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.MaxBodyBytes = budget
	gw := startPartnerGatewayWith(t, etcd, 5*time.Second, gateway.Config{BufferBytes: 128 << 10, BufferBudgetBytes: budget}, route)

	slow := slowPartnerRequest(t, gw, "pay/accounts/slow/charges", announced, sent)
	waitForBufferedAt(t, gw, sent)

	late := partnerDo(t, gw, partnerReq{path: "pay/accounts/late/charges", token: 1, body: strings.Repeat("y", 100<<10)})
	if late.status != http.StatusServiceUnavailable || late.problem.Type != api.ProblemTypePrefix+"gateway-busy" {
		t.Fatalf("partner request past the body budget = %s; want 503 gateway-busy", late)
	}
	if n := partner.count(); n != 0 {
		t.Fatalf("the partner got %d calls while no body was whole; want 0", n)
	}

	if _, err := slow.Write(bytes.Repeat([]byte("x"), announced-sent)); err != nil {
		t.Fatal(err)
	}
	if status, body := readAnswer(t, slow); status != http.StatusCreated {
		t.Fatalf("the slow partner request, sent whole = %d %s; want the partner's 201", status, body)
	}
	calls := partner.snapshot()
	if len(calls) != 1 || len(calls[0].Body) != announced {
		t.Fatalf("the partner got %d calls (%v); want the slow one, with its %d bytes", len(calls), calls, announced)
	}
	waitForReleasedAt(t, gw)
}

// TestPartnerBodyUnderTheTransferRate: a partner request body that stops
// arriving is cut off once a chunk takes longer than the transfer chunk
// timeout (the rate object bodies are held to), answered 400 and never
// forwarded, and its memory given back; not held until the server's
// whole-request read timeout (10 minutes by default).
func TestPartnerBodyUnderTheTransferRate(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	gw := startPartnerGatewayWith(t, etcd, 5*time.Second, gateway.Config{TransferChunkTimeout: 500 * time.Millisecond}, payRoute(t, partner.URL))

	stalled := slowPartnerRequest(t, gw, "pay/accounts/stalled/charges", 100<<10, 10<<10)
	status, body := readAnswer(t, stalled)
	if status != http.StatusBadRequest || !strings.Contains(body, "stopped arriving") {
		t.Fatalf("a partner body stalled past the transfer chunk timeout = %d %s; want 400 saying it stalled", status, body)
	}
	if n := partner.count(); n != 0 {
		t.Fatalf("the partner got %d calls for a body that never arrived; want 0", n)
	}
	waitForReleasedAt(t, gw)
}

// TestPartnerRouteBodyOverTheBudgetIsRefused: a route whose bodies may
// be larger than the whole budget of buffered bodies could never take
// its largest ones (each would be refused 503, for ever): the gateway
// refuses the configuration instead, saying which setting to change.
func TestPartnerRouteBodyOverTheBudgetIsRefused(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	store, partnerStore := newPartnerStores(t, etcd, 5*time.Second)
	route := payRoute(t, "http://127.0.0.1:1")
	route.MaxBodyBytes = 2 << 20
	cfg := gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: 1 << 20}
	_, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil))
	if err == nil || !strings.Contains(err.Error(), "max_body_bytes") || !strings.Contains(err.Error(), "buffer_budget_bytes") {
		t.Fatalf("gateway.New with a route's max_body_bytes over the body budget = %v; want an error naming both settings", err)
	}
	route.MaxBodyBytes = 1 << 20
	if _, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil)); err != nil {
		t.Fatalf("gateway.New with a route's max_body_bytes equal to the body budget: %v", err)
	}
}
