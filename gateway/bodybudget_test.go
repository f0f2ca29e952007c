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
)

const (
	metricBufferBytes    = "fencegate_body_buffer_bytes"
	metricBufferRefusals = "fencegate_body_buffer_refusals_total"
)

// slowPut is a PUT sent by hand on its own connection: its headers
// announce a body of announced bytes, and the test sends what it chooses
// of it, when it chooses.
type slowPut struct {
	conn net.Conn
	key  string
}

// startSlowPut sends the headers of a PUT of key with token 1 and a
// Content-Length of announced bytes, and then sent bytes of its body.
func (e *env) startSlowPut(tb testing.TB, key string, announced, sent int) *slowPut {
	tb.Helper()
	return e.startSlow(tb, http.MethodPut, "/v1/objects/"+e.bucket+"/"+key, key, announced, sent)
}

// startSlow sends the headers of a request of method to path with token
// 1 and a Content-Length of announced bytes, and then sent bytes of its
// body; key names it in failures.
func (e *env) startSlow(tb testing.TB, method, path, key string, announced, sent int) *slowPut {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: fencegate\r\n%s: 1\r\nContent-Length: %d\r\n\r\n", method, path, api.HeaderFenceToken, announced)
	if _, err := conn.Write([]byte(head)); err != nil {
		tb.Fatal(err)
	}
	p := &slowPut{conn: conn, key: key}
	p.send(tb, sent)
	return p
}

// send sends n more bytes of the body.
func (p *slowPut) send(tb testing.TB, n int) {
	tb.Helper()
	if _, err := p.conn.Write(bytes.Repeat([]byte("x"), n)); err != nil {
		tb.Fatalf("sending %d bytes of %s: %v", n, p.key, err)
	}
}

// answer reads the gateway's answer.
func (p *slowPut) answer(tb testing.TB) result {
	tb.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(p.conn), nil)
	if err != nil {
		tb.Fatalf("answer to the request of %s: %v", p.key, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: body}
}

// waitForBuffered waits until the gateway reports at least want bytes of
// its body budget in use: the server has read what the clients sent. It
// returns the value seen. Only the wait is bounded in time; what the test
// asserts is the state.
func (e *env) waitForBuffered(tb testing.TB, want float64) float64 {
	tb.Helper()
	return waitForBufferedAt(tb, e.url, want)
}

// waitForBufferedAt is waitForBuffered of the gateway at gatewayURL.
func waitForBufferedAt(tb testing.TB, gatewayURL string, want float64) float64 {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metricValue(tb, gatewayURL, metricBufferBytes)
		if got >= want {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s = %v; never reached %v", metricBufferBytes, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBodyBufferFilledAsBytesArrive: a body that announces the whole
// buffer and sends 10 bytes holds one chunk of the budget, not its
// Content-Length.
func TestBodyBufferFilledAsBytesArrive(t *testing.T) {
	const buffer = 8 << 20
	e := newEnv(t, gateway.Config{BufferBytes: buffer})
	p := e.startSlowPut(t, "stalled", buffer, 10)
	got := e.waitForBuffered(t, 10)
	if got > 64<<10 {
		t.Errorf("%s = %v with 10 bytes of an 8 MiB body sent; want at most one 64 KiB chunk", metricBufferBytes, got)
	}
	p.conn.Close()
	e.waitForReleased(t)
}

// waitForReleased waits until no body holds any of the budget.
func (e *env) waitForReleased(tb testing.TB) {
	tb.Helper()
	waitForReleasedAt(tb, e.url)
}

// waitForReleasedAt is waitForReleased of the gateway at gatewayURL.
func waitForReleasedAt(tb testing.TB, gatewayURL string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metricValue(tb, gatewayURL, metricBufferBytes)
		if got == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s = %v after every request ended; want 0", metricBufferBytes, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBodyBufferBudget: slow clients that announce bodies the buffer
// takes, and send most of them, fill the budget of buffered bodies and
// never more; the next such body is refused 503 gateway-busy with
// Retry-After before anything is written, a small PUT still fits, and
// once the slow ones finish, the budget is free again.
func TestBodyBufferBudget(t *testing.T) {
	const (
		budget    = 1 << 20
		announced = 300 << 10 // three fit in the budget, four do not
		sent      = 250 << 10 // four 64 KiB chunks each
	)
	e := newEnv(t, gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: budget})

	var slow []*slowPut
	for i := range 3 {
		slow = append(slow, e.startSlowPut(t, fmt.Sprintf("slow-%d", i), announced, sent))
	}
	if got := e.waitForBuffered(t, 3*sent); got > budget {
		t.Fatalf("%s = %v; want at most the budget %d", metricBufferBytes, got, budget)
	}

	// A fourth: its whole body is sent, from another goroutine, since the
	// gateway stops reading it.
	late := e.startSlowPut(t, "late", announced, 0)
	go func() { _, _ = late.conn.Write(bytes.Repeat([]byte("x"), announced)) }()
	refused := late.answer(t)
	if refused.status != http.StatusServiceUnavailable || !strings.Contains(string(refused.body), api.ProblemTypePrefix+"gateway-busy") {
		t.Fatalf("PUT past the budget = %s; want 503 gateway-busy", refused)
	}
	if refused.header.Get("Retry-After") == "" {
		t.Errorf("503 gateway-busy without Retry-After: %v", refused.header)
	}
	if _, _, ok := e.stored(t, "late"); ok {
		t.Errorf("the refused body was written to S3")
	}
	families := e.scrape(t)
	if got := sample(families, metricBufferRefusals, nil); got != 1 {
		t.Errorf("%s = %v; want 1", metricBufferRefusals, got)
	}
	if got := sample(families, metricBufferBytes, nil); got > budget {
		t.Errorf("%s = %v after the refusal; want at most the budget %d", metricBufferBytes, got, budget)
	}

	// A small, well-behaved PUT fits in what is left.
	if r := e.put(t, "small", 1, "hello"); r.status != http.StatusCreated {
		t.Fatalf("small PUT while the slow ones hold the budget = %s; want 201", r)
	}

	// The slow ones finish; each is written and gives its memory back.
	for _, p := range slow {
		p.send(t, announced-sent)
		if r := p.answer(t); r.status != http.StatusCreated {
			t.Errorf("slow PUT of %s = %s; want 201", p.key, r)
		}
		if body, _, ok := e.stored(t, p.key); !ok || len(body) != announced {
			t.Errorf("S3 holds %d bytes of %s (present %v); want %d", len(body), p.key, ok, announced)
		}
	}
	e.waitForReleased(t)
	if r := e.put(t, "late", 1, strings.Repeat("y", announced)); r.status != http.StatusCreated {
		t.Fatalf("PUT of the refused body once the budget is free = %s; want 201", r)
	}
}

// TestBodyBufferChunkedAndStreamed: bodies of unknown length are still
// buffered whole, and bodies over the buffer still stream, with the
// budget given back after each.
func TestBodyBufferChunkedAndStreamed(t *testing.T) {
	e := newEnv(t, gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: 1 << 20})
	tests := []struct {
		name    string
		size    int
		chunked bool
	}{
		{"chunked small", 10, true},
		{"chunked of several chunks", 300 << 10, true},
		{"length, several chunks", 300 << 10, false},
		{"length, the whole buffer", 512 << 10, false},
		{"length over the buffer streams", 2 << 20, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			want := strings.Repeat(string(rune('a'+i)), tt.size)
			var body io.Reader = strings.NewReader(want)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: the client sends it chunked
			}
			req, err := http.NewRequest(http.MethodPut, e.objectURL(key), body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(api.HeaderFenceToken, "1")
			if r := send(t, req); r.status != http.StatusCreated {
				t.Fatalf("PUT = %s; want 201", r)
			}
			if got, _, ok := e.stored(t, key); !ok || got != want {
				t.Errorf("S3 holds %d bytes (present %v); want the %d sent", len(got), ok, len(want))
			}
			e.waitForReleased(t)
		})
	}
}

// TestCompletionBodyInBudget: an upload's completion is read whole into
// memory, up to 2 MiB, so it is held in the budget of buffered bodies
// like a PUT's: a client that sends most of a large completion and
// stalls holds the budget's bytes, the next completion that does not fit
// is refused 503 gateway-busy, and the budget is free once the first one
// ends. Read outside the budget, 128 such completions a client would
// hold 256 MiB that no limit counted.
func TestCompletionBodyInBudget(t *testing.T) {
	const (
		budget    = 2 << 20
		announced = 1536 << 10 // within a completion's 2 MiB; two do not fit
		sent      = 1 << 20
	)
	e := newEnv(t, gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: budget})
	path := "/v1/uploads/" + e.bucket + "/big"
	held := e.startSlow(t, http.MethodPost, path, "held completion", announced, sent)
	if got := e.waitForBuffered(t, sent); got > budget {
		t.Fatalf("%s = %v; want at most the budget %d", metricBufferBytes, got, budget)
	}

	late := e.startSlow(t, http.MethodPost, path, "late completion", announced, 0)
	go func() { _, _ = late.conn.Write(bytes.Repeat([]byte("x"), announced)) }()
	refused := late.answer(t)
	if refused.status != http.StatusServiceUnavailable || !strings.Contains(string(refused.body), api.ProblemTypePrefix+"gateway-busy") {
		t.Fatalf("completion past the budget = %s; want 503 gateway-busy", refused)
	}

	// The held one ends: a completion of no JSON is refused 400, and its
	// memory goes back.
	held.send(t, announced-sent)
	if r := held.answer(t); r.status != http.StatusBadRequest {
		t.Errorf("completion that is not JSON = %s; want 400", r)
	}
	e.waitForReleased(t)
}

// TestCompletionBodyBounded: a completion's body over 2 MiB is 413
// whether its Content-Length says so or it comes chunked, with no
// length; one at the limit is read and refused for what it says (400:
// {} names no upload).
func TestCompletionBodyBounded(t *testing.T) {
	const limit = 2 << 20
	e := newEnv(t, gateway.Config{})
	atLimit := strings.Repeat(" ", limit-2) + "{}"
	for _, tt := range []struct {
		name    string
		body    string
		chunked bool
		want    int
	}{
		{"at the limit", atLimit, false, http.StatusBadRequest},
		{"at the limit, chunked", atLimit, true, http.StatusBadRequest},
		{"over the limit", " " + atLimit, false, http.StatusRequestEntityTooLarge},
		{"over the limit, chunked", " " + atLimit, true, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.postCompletion(t, tt.body, tt.chunked); r.status != tt.want {
				t.Fatalf("completion of %d bytes = %s; want %d", len(tt.body), r, tt.want)
			}
			e.waitForReleased(t)
		})
	}
}

// postCompletion sends body as a completion of the object "big" with
// token 1: with its Content-Length, or chunked, without one.
func (e *env) postCompletion(tb testing.TB, body string, chunked bool) result {
	tb.Helper()
	var from io.Reader = strings.NewReader(body)
	if chunked {
		from = io.MultiReader(from) // hides the length: the client sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/uploads/"+e.bucket+"/big", from)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, "1")
	return send(tb, req)
}

// TestCompletionBodyOverTheWholeBudget: on a gateway whose budget of
// buffered bodies is smaller than the largest completion, a completion
// that could never fit, even alone, is 413 saying so, with or without a
// Content-Length; not 503, which tells a client to retry what would be
// refused forever. One that fits is read (400: it is not JSON), and no
// memory stays held.
func TestCompletionBodyOverTheWholeBudget(t *testing.T) {
	const budget = 1 << 20
	e := newEnv(t, gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: budget})
	for _, tt := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"the whole budget", budget, false, http.StatusBadRequest},
		{"the whole budget, chunked", budget, true, http.StatusBadRequest},
		{"over the whole budget", budget + 1, false, http.StatusRequestEntityTooLarge},
		{"over the whole budget, chunked", budget + 1, true, http.StatusRequestEntityTooLarge},
		{"1.5 MiB, chunked", 1536 << 10, true, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.postCompletion(t, strings.Repeat("x", tt.size), tt.chunked)
			if r.status != tt.want {
				t.Fatalf("completion of %d bytes = %s; want %d", tt.size, r, tt.want)
			}
			if tt.want == http.StatusRequestEntityTooLarge && !strings.Contains(string(r.body), "buffer_budget_bytes") {
				t.Errorf("refusal %s; want it to name buffer_budget_bytes", r)
			}
			e.waitForReleased(t)
		})
	}
}

// TestChunkedPutOverABufferThatIsTheWholeBudget: with the buffer as large
// as the whole budget (which the config allows), a chunked PUT over the
// buffer is 411 length-required, as it is under a larger budget: not 503
// (busy), nor 413 about the budget; and one of the buffer's size is
// written.
func TestChunkedPutOverABufferThatIsTheWholeBudget(t *testing.T) {
	const buffer = 256 << 10
	e := newEnv(t, gateway.Config{BufferBytes: buffer, BufferBudgetBytes: buffer})
	for _, tt := range []struct {
		size int
		want int
	}{
		{buffer + 1, http.StatusLengthRequired},
		{buffer, http.StatusCreated},
	} {
		req, err := http.NewRequest(http.MethodPut, e.objectURL(fmt.Sprintf("chunked-%d", tt.size)), io.MultiReader(strings.NewReader(strings.Repeat("x", tt.size))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderFenceToken, "1")
		if r := send(t, req); r.status != tt.want {
			t.Errorf("chunked PUT of %d bytes, buffer and budget %d = %s; want %d", tt.size, buffer, r, tt.want)
		}
		e.waitForReleased(t)
	}
}
