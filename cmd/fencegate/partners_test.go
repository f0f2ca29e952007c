package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// buildFencegate builds this command into a temporary directory, for
// tests of the real process (exit codes, SIGKILL).
func buildFencegate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencegate")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// holdingPartner is a partner API whose first request stays upstream until
// its caller goes away; later ones answer 201 at once. It records the
// Idempotency-Key each request carried.
type holdingPartner struct {
	*httptest.Server
	arrived chan struct{}

	mu   sync.Mutex
	keys []string
}

func newHoldingPartner(t *testing.T) *holdingPartner {
	t.Helper()
	p := &holdingPartner{arrived: make(chan struct{}, 16)}
	release := make(chan struct{})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
		n := len(p.keys)
		p.mu.Unlock()
		p.arrived <- struct{}{}
		if n == 1 {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]int{"call": n})
	}))
	t.Cleanup(func() {
		close(release)
		p.Close()
	})
	return p
}

func (p *holdingPartner) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// partnerPost sends a fenced POST with an idempotency key to a partner
// route and returns the status, the problem type (if any) and the body.
func partnerPost(t *testing.T, client *http.Client, url, key, token string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":5}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Fence-Token", token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var problem struct{ Type string }
	_ = json.Unmarshal(body, &problem)
	return resp.StatusCode, problem.Type, nil
}

// TestPartnerGatewayKilledWhileUpstream runs a real fencegate process,
// kills it with SIGKILL while its request is upstream, and retries with
// the same idempotency key through a second gateway on the same etcd: the
// retry gets 409 idempotency-in-flight (and another request for the
// resource 503 resource-busy) until the dead gateway's lease expires, and
// the partner is not called again meanwhile. Once the lease has expired
// the key is free, and the retry is forwarded with the same derived
// Idempotency-Key as the first attempt.
func TestPartnerGatewayKilledWhileUpstream(t *testing.T) {
	bin := buildFencegate(t)
	st := startStack(t, "dev")
	partner := newHoldingPartner(t)
	config := filepath.Join(t.TempDir(), "fencegate.yaml")
	yaml := `partners:
  - name: pay
    upstream: ` + partner.URL + `/v1
    methods: [POST]
    resource: accounts/{account}
    timeout: 2s
    max_wait: 100ms
    idempotency_key: required
`
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := []string{"--config", config, "--etcd-request-timeout", "500ms"}

	addrA := freeAddr(t)
	var stderrA testenv.Buffer
	procA := exec.Command(bin, st.serveArgs(addrA, extra...)...)
	procA.Stderr = &stderrA
	if err := procA.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = procA.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = procA.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("killed gateway's stderr:\n%s", stderrA.String())
		}
	})
	addrB := freeAddr(t)
	gatewayB := startRun(t, st.serveArgs(addrB, extra...)...)
	testenv.WaitUntil(t, 30*time.Second, "the gateway process is ready", func() bool { return readyzStatus("http://"+addrA) == http.StatusOK })
	gatewayB.waitReady(t, "http://"+addrB)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	first := make(chan error, 1)
	go func() {
		_, _, err := partnerPost(t, client, "http://"+addrA+"/v1/partners/pay/accounts/a1/charges", "order-7", "5")
		first <- err
	}()
	<-partner.arrived
	if err := procA.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	<-exited
	killed := time.Now()
	if err := <-first; err == nil {
		t.Fatal("the killed gateway answered its request")
	}

	urlB := "http://" + addrB + "/v1/partners/pay/accounts/a1/charges"
	// Another request for the resource: its marker is still held.
	status, typ, err := partnerPost(t, client, urlB, "order-8", "6")
	if err != nil || status != http.StatusServiceUnavailable || typ != "urn:fencegate:problem:resource-busy" {
		t.Fatalf("other key for the resource right after the kill = %d %s, %v; want 503 resource-busy", status, typ, err)
	}
	var inFlight int
	for {
		status, typ, err := partnerPost(t, client, urlB, "order-7", "5")
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusConflict && typ == "urn:fencegate:problem:idempotency-in-flight" {
			inFlight++
			if n := len(partner.calls()); n != 1 {
				t.Fatalf("partner got %d calls while the first attempt's outcome is unknown; want 1", n)
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatal("the dead gateway's record still in flight 30s after the kill")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if status != http.StatusCreated {
			t.Fatalf("retry after the lease expired = %d %s; want forwarded (201)", status, typ)
		}
		break
	}
	if inFlight == 0 {
		t.Fatal("no retry got 409 idempotency-in-flight")
	}
	keys := partner.calls()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || bytes.Contains([]byte(keys[0]), []byte("order-7")) {
		t.Fatalf("partner saw Idempotency-Keys %q; want two equal derived keys", keys)
	}
	t.Logf("retries got 409 for %v after the kill (%d answers); then the key was free", time.Since(killed).Round(100*time.Millisecond), inFlight)
}
