package console_test

// These tests drive the console in a real headless Chromium (Debian's
// chromium package, `make chromium`), through chromedp, over a real
// gateway on real etcd and versitygw. They look at the page only through
// its DOM, polled until a deadline: no timing is asserted beyond a
// generous wait. Each view's screenshot goes to the test's artifact
// directory (go test -artifacts -outputdir DIR keeps them).

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/console"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// The identities of the test gateway: admin may do everything; watcher
// may only read the resources under s3/demo/visible/.
const (
	adminKey   = "console-admin-key"
	watcherKey = "console-watcher-key"
	bucket     = "demo"
)

// domWait bounds every wait for the page: generous, since the machine is
// shared; the tests assert what appears, not how fast.
const domWait = 20 * time.Second

// consoleEnv is a gateway with the console on real etcd and S3, and a
// browser.
type consoleEnv struct {
	url     string
	browser context.Context // the browser's first tab
	// partnerGate holds the partner's answers until it is closed.
	partnerGate chan struct{}
	gateOnce    sync.Once
}

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	chromium := os.Getenv("FENCEGATE_CHROMIUM")
	if chromium == "" {
		path, err := exec.LookPath("chromium")
		if err != nil {
			t.Fatalf("chromium not found (the console tests drive the page in headless Chromium): run make chromium, or set FENCEGATE_CHROMIUM")
		}
		chromium = path
	}
	etcd := testenv.StartEtcd(t)
	objects := testenv.StartS3(t)
	objects.CreateBucket(t, bucket)
	store, err := tokenstore.New(etcd.Client(t), tokenstore.Config{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := s3.New(t.Context(), s3.Config{Endpoint: objects.Endpoint(), AccessKeyID: objects.AccessKey, SecretAccessKey: objects.SecretKey, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(key string) [32]byte { return sha256.Sum256([]byte(key)) }
	auth := edge.Auth{
		Identities: []edge.Identity{
			{Name: "admin", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
			{Name: "watcher", Grants: []edge.Grant{
				{Prefix: "s3/" + bucket + "/visible/", Operations: []edge.Operation{edge.OpRead}},
				{Prefix: "watched-", Operations: []edge.Operation{edge.OpRead}}, // locks it sees, may not hold
			}},
		},
		APIKeys: []edge.APIKey{{SHA256: sum(adminKey), Identity: "admin"}, {SHA256: sum(watcherKey), Identity: "watcher"}},
	}
	partnerStore, err := tokenstore.NewPartners(store)
	if err != nil {
		t.Fatal(err)
	}
	e := &consoleEnv{partnerGate: make(chan struct{})}
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // held until the test opens the gate, so that it is seen in flight
		case <-e.partnerGate:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	}))
	t.Cleanup(partner.Close)
	partnerURL, _ := url.Parse(partner.URL)
	route := partners.PartnerRoute{Name: "payments", Upstream: partnerURL, Methods: []string{http.MethodPost}, Resource: "accounts/{account}", RequireIdempotencyKey: true}
	opts := []gateway.Option{gateway.WithLocks(store), gateway.WithInspection(store), gateway.WithConsole(console.Handler()), gateway.WithAuth(auth),
		gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil)}
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	t.Cleanup(e.openPartnerGate) // before the server closes: no request held

	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	e.url, e.browser = srv.URL, browser
	return e
}

// openPartnerGate lets the partner answer the requests it holds, and
// every later one at once.
func (e *consoleEnv) openPartnerGate() {
	e.gateOnce.Do(func() { close(e.partnerGate) })
}

// tab opens the console in a new tab and connects it with key.
func (e *consoleEnv) tab(t *testing.T, key string) context.Context {
	t.Helper()
	return e.tabAt(t, key, "/ui/")
}

// tabAt opens the console at path (such as a deep link, /ui/#locks) in a
// new tab and connects it with key.
func (e *consoleEnv) tabAt(t *testing.T, key, path string) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(e.browser)
	t.Cleanup(cancel)
	// The first action on a context opens its tab, which lives as long as
	// the context that action ran with: the tab's own, not a timeout's.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	run(t, tab,
		chromedp.Navigate(e.url+path),
		chromedp.WaitReady(chromedp.CSS("#connect")),
		chromedp.SendKeys(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS("#connect")),
	)
	return tab
}

func run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 2*domWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the tab into v.
func eval[T any](t *testing.T, tab context.Context, expr string, v *T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 2*domWait)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluate %.80q: %v", expr, err)
	}
	*v = got
}

// waitDOM polls expr, a JavaScript expression, until it is true.
func waitDOM(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	testenv.WaitUntil(t, domWait, what, func() bool {
		var ok bool
		eval(t, tab, expr, &ok)
		return ok
	})
}

// waitLive waits until the page's event feed is connected.
func waitLive(t *testing.T, tab context.Context) {
	t.Helper()
	testenv.WaitUntil(t, domWait, "the page's event feed is live", func() bool {
		var state string
		eval(t, tab, `document.getElementById('feed-status').dataset.state + ' ' + document.getElementById('feed-status').textContent`, &state)
		if strings.HasPrefix(state, "error") {
			t.Logf("feed: %s", state)
		}
		return strings.HasPrefix(state, "live")
	})
}

func show(t *testing.T, tab context.Context, view string) {
	t.Helper()
	run(t, tab, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tabs button[data-view=%q]`, view))))
}

// screenshot writes the tab's page as name.png to the test's artifact
// directory.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 2*domWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// send makes a plain HTTP request to the gateway, as curl would, and
// returns the status and body.
func (e *consoleEnv) send(t *testing.T, method, path, key string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (e *consoleEnv) put(t *testing.T, key string, token api.Token, body string) int {
	t.Helper()
	status, _ := e.send(t, http.MethodPut, "/v1/objects/"+bucket+"/"+key, adminKey, map[string]string{api.HeaderFenceToken: token.String()}, body)
	return status
}

// session creates a lock-API session of ttl seconds as admin, which
// nobody keeps alive, and returns its id.
func (e *consoleEnv) session(t *testing.T, ttl int) string {
	t.Helper()
	status, body := e.send(t, http.MethodPost, "/v1/sessions", adminKey, nil, fmt.Sprintf(`{"ttl": %d}`, ttl))
	var s struct{ Session string }
	if err := json.Unmarshal([]byte(body), &s); status != http.StatusCreated || err != nil {
		t.Fatalf("create session: %d %s", status, body)
	}
	return s.Session
}

// acquire takes lock name as admin with session, without waiting, and
// returns the grant's token.
func (e *consoleEnv) acquire(t *testing.T, name, session string) api.Token {
	t.Helper()
	status, body := e.send(t, http.MethodPost, "/v1/locks/"+name, adminKey, nil, fmt.Sprintf(`{"session": %q, "wait": 0}`, session))
	var grant struct{ Token api.Token }
	if err := json.Unmarshal([]byte(body), &grant); status != http.StatusOK || err != nil {
		t.Fatalf("acquire %s: %d %s", name, status, body)
	}
	return grant.Token
}

// rowExpr is the JavaScript test of a decision row with these attributes.
func rowExpr(attrs map[string]string) string {
	sel := "#decisions tbody tr"
	for k, v := range attrs {
		sel += fmt.Sprintf(`[data-%s=%q]`, k, v)
	}
	q, _ := json.Marshal(sel)
	return fmt.Sprintf(`document.querySelector(%s) !== null`, q)
}

func TestConsoleDecisions(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	waitLive(t, tab)

	// A write made with a plain HTTP PUT appears, accepted.
	if s := e.put(t, "report.csv", 5, "token 5's report"); s != http.StatusCreated {
		t.Fatalf("PUT with token 5: %d; want 201", s)
	}
	waitDOM(t, tab, "the accepted write's row", rowExpr(map[string]string{"kind": "write.accepted", "resource": "s3/demo/report.csv", "token": "5", "hwm": "5"}))

	// A stale write appears refused, with its token and the mark.
	if s := e.put(t, "report.csv", 4, "token 4's late report"); s != http.StatusConflict {
		t.Fatalf("PUT with token 4 after 5: %d; want 409", s)
	}
	refused := rowExpr(map[string]string{"kind": "write.refused", "resource": "s3/demo/report.csv", "token": "4", "hwm": "5"})
	waitDOM(t, tab, "the refused write's row, token 4 against HWM 5", refused)
	var text string
	eval(t, tab, `document.querySelector('#decisions tr.refused').textContent`, &text)
	if !strings.Contains(text, "token 4 < HWM 5") {
		t.Errorf("refused row reads %q; want it to say token 4 < HWM 5", text)
	}
	screenshot(t, tab, "decisions")

	// The resources view lists the mark from etcd, and charts the
	// resource's accepted and refused tokens.
	show(t, tab, "resources")
	waitDOM(t, tab, "the mark of s3/demo/report.csv in the listing", `document.querySelector('#marks tr[data-resource="s3/demo/report.csv"][data-hwm="5"]') !== null`)
	waitDOM(t, tab, "the chart's accepted and refused points", `document.querySelector('#charts svg[data-resource="s3/demo/report.csv"] circle.accepted-dot[data-token="5"]') !== null && document.querySelector('#charts svg[data-resource="s3/demo/report.csv"] .refused-dot[data-token="4"]') !== null`)
	screenshot(t, tab, "resources")

	// Metrics: the rates and p99 parsed from /metrics.
	show(t, tab, "metrics")
	waitDOM(t, tab, "the p99 of object writes, and a request rate from two scrapes", `(() => {
		const v = (id) => { const r = document.querySelector('#metrics tr[data-measure="' + id + '"] td.mono'); return r === null ? '' : r.textContent; };
		return / ms$/.test(v('p99_writes')) && / \/s$/.test(v('requests_rate'));
	})()`)
	screenshot(t, tab, "metrics")
	show(t, tab, "partners")
	waitDOM(t, tab, "the in-flight listing", `document.querySelector('#inflight tbody tr') !== null`)
	screenshot(t, tab, "partners")
}

func TestConsoleLocks(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	token := e.acquire(t, "report", e.session(t, 30))
	waiter := e.session(t, 30)
	waited := make(chan int, 1)
	go func() {
		// Waits in the queue until the holder releases, below.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/v1/locks/report", strings.NewReader(fmt.Sprintf(`{"session": %q, "wait": 50}`, waiter)))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- 0
			return
		}
		res.Body.Close()
		waited <- res.StatusCode
	}()

	show(t, tab, "locks")
	waitDOM(t, tab, "the lock with its holder's token and one waiter",
		fmt.Sprintf(`(() => { const r = document.querySelector('#locks tr[data-lock="report"]'); return r !== null && r.dataset.holder === %q && r.dataset.queue === "2" && r.dataset.waiters.split(' ').filter(Boolean).length === 1; })()`, token.String()))
	screenshot(t, tab, "locks")

	if status, body := e.send(t, http.MethodDelete, "/v1/locks/report?token="+token.String(), adminKey, nil, ""); status != http.StatusOK {
		t.Fatalf("release: %d %s", status, body)
	}
	if s := <-waited; s != http.StatusOK {
		t.Fatalf("the waiter's acquire: %d; want 200 once the holder released", s)
	}
	waitDOM(t, tab, "the lock held by the former waiter, with no waiter",
		`(() => { const r = document.querySelector('#locks tr[data-lock="report"]'); return r !== null && r.dataset.queue === "1"; })()`)
}

// TestConsoleLockRevoked: a session revoked (DELETE /v1/sessions/{id})
// while it holds a lock shows in the decisions as lock.revoked, with the
// grant's token, saying which session was revoked, as an expiry shows as
// lock.expired; and the locks view no longer lists the lock.
func TestConsoleLockRevoked(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	waitLive(t, tab)
	// An expiry's row says that the gateway's watch of lock expiries
	// runs: the revoke below is after the revision it started from.
	fence := e.acquire(t, "fence", e.session(t, api.MinSessionTTL))
	waitDOM(t, tab, "the fence lock's lock.expired row", rowExpr(map[string]string{"kind": "lock.expired", "resource": "fence", "token": fence.String()}))

	session := e.session(t, 30)
	token := e.acquire(t, "report", session)
	show(t, tab, "locks")
	waitDOM(t, tab, "the lock held with the grant's token",
		fmt.Sprintf(`(() => { const r = document.querySelector('#locks tr[data-lock="report"]'); return r !== null && r.dataset.holder === %q; })()`, token.String()))
	if status, body := e.send(t, http.MethodDelete, "/v1/sessions/"+session, adminKey, nil, ""); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	waitDOM(t, tab, "the lock.revoked row", rowExpr(map[string]string{"kind": "lock.revoked", "resource": "report", "token": token.String()}))
	var cell struct{ Text, Title string }
	eval(t, tab, `(() => { const c = document.querySelector('#decisions tr[data-kind="lock.revoked"] td.kind'); return {Text: c.textContent, Title: c.title}; })()`, &cell)
	if want := "lock.revoked: session " + session + " revoked"; cell.Text != want {
		t.Errorf("the lock.revoked row's kind reads %q; want %q", cell.Text, want)
	}
	if !strings.Contains(cell.Title, "revoked") || !strings.Contains(cell.Title, "not released") {
		t.Errorf("the lock.revoked row's kind has the title %q; want it to say the session was revoked and the lock lost, not released", cell.Title)
	}
	waitDOM(t, tab, "the locks view without the lock", `document.querySelector('#locks tr[data-lock="report"]') === null`)
	screenshot(t, tab, "locks-revoked")
	show(t, tab, "decisions")
	screenshot(t, tab, "decisions-revoked")
}

func TestConsoleSeedReplay(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	waitLive(t, tab)
	show(t, tab, "seed")
	run(t, tab,
		chromedp.SetValue(chromedp.CSS("#seed-bucket"), bucket),
		chromedp.SetValue(chromedp.CSS("#seed-ttl"), "2"),
		chromedp.SetValue(chromedp.CSS("#seed-stall"), "6"),
		chromedp.Click(chromedp.CSS("#seed-run")),
	)
	// TTL 2 s and a stall of 6 s: the scenario takes about 7 seconds.
	testenv.WaitUntil(t, 60*time.Second, "the seed scenario to end", func() bool {
		var outcome string
		eval(t, tab, `document.getElementById('seed-result').dataset.outcome || ''`, &outcome)
		return outcome != "" && outcome != "running"
	})
	var result struct {
		Outcome, Text, Status, Token string
		Both                         bool
		Log                          string
	}
	eval(t, tab, `(() => {
		const r = document.getElementById('seed-result');
		const w = document.querySelector('#seed-svg g[data-seed="c1-write"]');
		return {Outcome: r.dataset.outcome, Text: r.textContent, Status: w ? w.dataset.status : '', Token: w ? w.dataset.token : '',
			Both: document.querySelector('#seed-svg g[data-seed="both-hold"]') !== null, Log: document.getElementById('seed-log').textContent};
	})()`, &result)
	screenshot(t, tab, "seed")
	if result.Outcome != "fenced" || result.Status != "409" || !result.Both {
		t.Fatalf("seed replay: outcome %q, client 1's write drawn with status %q, both-hold interval drawn %v; want fenced, 409, true\nresult: %s\nlog: %s",
			result.Outcome, result.Status, result.Both, result.Text, result.Log)
	}
	// The store holds client 2's report: the page's requests were real.
	var key string
	eval(t, tab, `document.getElementById('seed-log').textContent.match(/console-seed-([a-z0-9]+)/)[1]`, &key)
	// The feed showed client 1's lock lost to its session's expiry, with
	// client 1's token.
	expired := rowExpr(map[string]string{"kind": "lock.expired", "resource": "console-seed-" + key, "token": result.Token})
	waitDOM(t, tab, "client 1's lock.expired row", expired)
	var text string
	eval(t, tab, `document.querySelector('#decisions tr[data-kind="lock.expired"] td.kind').textContent`, &text)
	if !strings.Contains(text, "expired") || !strings.Contains(text, "session ") {
		t.Errorf("the lock.expired row's kind reads %q; want it to name the session that expired", text)
	}
	status, body := e.send(t, http.MethodGet, "/v1/objects/"+bucket+"/console-seed/"+key, adminKey, nil, "")
	if status != http.StatusOK || body != "client 2's report" {
		t.Fatalf("the scratch key holds %d %q; want client 2's report", status, body)
	}
}

// TestConsoleLockEventsWithoutGrant: the watcher may read the locks
// watched-*, not take them: the feed sends it their events without the
// grant's token and session, and the page shows the grant and the
// revoke with an empty token and the session hidden.
func TestConsoleLockEventsWithoutGrant(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, watcherKey)
	waitLive(t, tab)
	session := e.session(t, 30)
	e.acquire(t, "watched-job", session)
	waitDOM(t, tab, "the grant's row without its token", rowExpr(map[string]string{"kind": "lock.granted", "resource": "watched-job", "token": ""}))
	if status, body := e.send(t, http.MethodDelete, "/v1/sessions/"+session, adminKey, nil, ""); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	waitDOM(t, tab, "the revoke's row without its token", rowExpr(map[string]string{"kind": "lock.revoked", "resource": "watched-job", "token": ""}))
	var text string
	eval(t, tab, `[...document.querySelectorAll('#decisions tbody tr')].map(r => r.textContent).join('\n')`, &text)
	if want := "lock.revoked: session (hidden) revoked"; !strings.Contains(text, want) {
		t.Errorf("the watcher's decisions read %q; want a row %q", text, want)
	}
	if strings.Contains(text, session) {
		t.Errorf("the watcher's decisions show the session %s: %q", session, text)
	}
	screenshot(t, tab, "watcher-lock-revoked")
}

func TestConsoleShowsOnlyWhatTheKeyMayRead(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, watcherKey)
	waitLive(t, tab)
	// The hidden write first: events arrive in order, so once the
	// visible one is in the table, the hidden one would be too.
	if s := e.put(t, "hidden/secret.csv", 7, "not for the watcher"); s != http.StatusCreated {
		t.Fatalf("PUT hidden: %d", s)
	}
	if s := e.put(t, "hidden/secret.csv", 6, "stale, not for the watcher"); s != http.StatusConflict {
		t.Fatalf("stale PUT hidden: %d", s)
	}
	if s := e.put(t, "visible/report.csv", 7, "for the watcher"); s != http.StatusCreated {
		t.Fatalf("PUT visible: %d", s)
	}
	waitDOM(t, tab, "the visible write's row", rowExpr(map[string]string{"kind": "write.accepted", "resource": "s3/demo/visible/report.csv"}))
	var hidden int
	eval(t, tab, `[...document.querySelectorAll('#decisions tbody tr')].filter(r => r.dataset.resource.startsWith('s3/demo/hidden/')).length`, &hidden)
	if hidden != 0 {
		t.Fatalf("the watcher's page shows %d decisions on s3/demo/hidden/; want none", hidden)
	}
	screenshot(t, tab, "watcher-decisions")
	// Nor does the listing of marks show the hidden mark.
	show(t, tab, "resources")
	waitDOM(t, tab, "the visible mark", `document.querySelector('#marks tr[data-resource="s3/demo/visible/report.csv"]') !== null`)
	eval(t, tab, `document.querySelectorAll('#marks tr[data-resource^="s3/demo/hidden/"]').length`, &hidden)
	if hidden != 0 {
		t.Fatalf("the watcher's page lists %d marks under s3/demo/hidden/; want none", hidden)
	}
}

func TestConsolePartners(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	waitLive(t, tab)
	show(t, tab, "partners")
	charge := func() chan int {
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/v1/partners/payments/accounts/a1/charges", strings.NewReader(`{"amount": 5}`))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			req.Header.Set(api.HeaderFenceToken, "9")
			req.Header.Set("Idempotency-Key", "charge-1")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			res.Body.Close()
			done <- res.StatusCode
		}()
		return done
	}
	first := charge()
	// Held by the partner: its in-flight marker is listed, with its token.
	waitDOM(t, tab, "the request in flight", `(() => { const r = [...document.querySelectorAll('#inflight tbody tr[data-resource]')].find(r => r.dataset.resource.startsWith('partner/payments/')); return r !== undefined && r.textContent.includes('9'); })()`)
	screenshot(t, tab, "partners-in-flight")
	e.openPartnerGate()
	if s := <-first; s != http.StatusCreated {
		t.Fatalf("the charge: %d; want 201", s)
	}
	// The same key again: replayed from the idempotency record, and
	// counted for the route.
	if s := <-charge(); s != http.StatusCreated {
		t.Fatalf("the charge's retry: %d; want the replayed 201", s)
	}
	waitDOM(t, tab, "one admission and one replay on the route", `(() => { const r = document.querySelector('#routes tr[data-route="payments"]'); return r !== null && r.cells[1].textContent === '1' && r.cells[2].textContent === '1'; })()`)
	waitDOM(t, tab, "nothing in flight any more", `document.querySelector('#inflight tbody tr[data-resource]') === null`)
	screenshot(t, tab, "partners")
}
