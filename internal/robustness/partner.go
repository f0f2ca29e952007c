package robustness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"fencegate/api"
)

// The partner route every gateway of the suite has: POSTs to
// /v1/partners/rb/accounts/{account}/charges reach the suite's
// PartnerServer as POST /accounts/{account}/charges, fenced on the
// resource partner/rb/accounts/{account}.
const (
	// PartnerRoute is the route's name.
	PartnerRoute = "rb"
	// partnerTimeout is the route's upstream timeout, and partnerMaxWait
	// how long a request waits for the resource's in-flight one.
	partnerTimeout = 2 * time.Second
	partnerMaxWait = time.Second
)

// PartnerResource is the fence resource of account's requests.
func PartnerResource(account string) api.Resource {
	return api.Resource("partner/" + PartnerRoute + "/accounts/" + account)
}

// PartnerCall is one request that reached the partner, in arrival order.
type PartnerCall struct {
	// Seq numbers the calls from 1, in the order they arrived.
	Seq int64
	// Account is the account of the request's path.
	Account string
	// Token is the request's X-Fence-Token (zero if none or bad).
	Token api.Token
	// Request is the workload request id the body names ("" if none).
	Request string
	// Overlapped says a call for the same account was in progress when
	// this one arrived; OverlapWith is that call's request id.
	Overlapped  bool
	OverlapWith string
	Start, Done time.Time
}

// PartnerServer is the partner API of the suite: a real HTTP server that
// cannot check tokens itself. It records every request it receives (its
// X-Fence-Token, its account and the request id in its body), notes a
// request that arrives while another for the same account is still in
// progress, and answers 201 after a short pause (2 to 12 ms) that widens
// the window in which two requests could overlap.
type PartnerServer struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	mu       sync.Mutex
	rnd      *rand.Rand
	seq      int64
	calls    []PartnerCall
	inFlight map[string]map[int64]string // account -> the calls in progress, seq -> request id
	// gate, when set (by tests), holds every call once recorded until it
	// is closed, instead of the short pause.
	gate <-chan struct{}
}

// NewPartnerServer starts a partner on a free port of 127.0.0.1. Close it.
func NewPartnerServer(seed uint64) (*PartnerServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("partner server: %w", err)
	}
	p := &PartnerServer{ln: ln, rnd: rand.New(rand.NewPCG(seed, 0x9a27)), inFlight: make(map[string]map[int64]string)}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// URL is the partner's base URL, the route's upstream.
func (p *PartnerServer) URL() string { return "http://" + p.ln.Addr().String() }

// Calls returns the calls recorded so far for accounts that start with
// prefix, in arrival order.
func (p *PartnerServer) Calls(prefix string) []PartnerCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PartnerCall
	for _, c := range p.calls {
		if strings.HasPrefix(c.Account, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// Close stops the server and waits for requests in progress.
func (p *PartnerServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	p.wg.Wait()
}

// serve answers POST /accounts/{account}/charges.
func (p *PartnerServer) serve(w http.ResponseWriter, r *http.Request) {
	account, ok := partnerAccount(r.URL.Path)
	if r.Method != http.MethodPost || !ok {
		http.Error(w, "partner: want POST /accounts/{account}/charges", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	call := PartnerCall{Account: account, Request: bodyRequest(body), Start: time.Now()}
	call.Token, _ = api.ParseToken(r.Header.Get(api.HeaderFenceToken))

	p.mu.Lock()
	p.seq++
	call.Seq = p.seq
	for _, other := range p.inFlight[account] {
		call.Overlapped, call.OverlapWith = true, other
	}
	if p.inFlight[account] == nil {
		p.inFlight[account] = make(map[int64]string)
	}
	p.inFlight[account][call.Seq] = call.Request
	index := len(p.calls)
	p.calls = append(p.calls, call)
	pause := time.Duration(2+p.rnd.IntN(10)) * time.Millisecond
	gate := p.gate
	p.mu.Unlock()

	if gate != nil {
		<-gate
	} else {
		time.Sleep(pause)
	}

	p.mu.Lock()
	delete(p.inFlight[account], call.Seq)
	p.calls[index].Done = time.Now()
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"ch_%d","request":%q}`, call.Seq, call.Request)
}

// partnerAccount returns the account of "/accounts/{account}/charges".
func partnerAccount(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/accounts/")
	if !ok {
		return "", false
	}
	account, tail, ok := strings.Cut(rest, "/")
	return account, ok && account != "" && tail == "charges"
}

// bodyRequest returns the request id a partner body starts with
// ("req=ID ..."), or "".
func bodyRequest(body []byte) string {
	rest, ok := bytes.CutPrefix(body, []byte("req="))
	if !ok {
		return ""
	}
	if i := bytes.IndexAny(rest, " \n"); i >= 0 {
		rest = rest[:i]
	}
	return string(rest)
}
