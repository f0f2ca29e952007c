package s3api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
)

// bufferedBytes is the door's fencegate_body_buffer_bytes: the bytes of
// the budget of buffered bodies that its requests hold.
func (d *door) bufferedBytes(tb testing.TB) float64 {
	tb.Helper()
	rec := httptest.NewRecorder()
	d.gw.Edge().MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fencegate_body_buffer_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatal("no fencegate_body_buffer_bytes in the door's metrics")
	return 0
}

// waitForBuffered waits until the door's requests hold at least want
// bytes of the budget, and returns what they hold.
func (d *door) waitForBuffered(tb testing.TB, want float64) float64 {
	tb.Helper()
	return d.waitForBudget(tb, func(got float64) bool { return got >= want }, fmt.Sprintf("at least %v", want))
}

// waitForReleased waits until no request holds any of the budget.
func (d *door) waitForReleased(tb testing.TB) {
	tb.Helper()
	d.waitForBudget(tb, func(got float64) bool { return got == 0 }, "0 once the requests ended")
}

// waitForBudget waits until the budget in use is as ok wants (want says
// how, for the failure), and returns it. Only the wait is bounded in
// time; what the test asserts is the state.
func (d *door) waitForBudget(tb testing.TB, ok func(float64) bool, want string) float64 {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := d.bufferedBytes(tb)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("fencegate_body_buffer_bytes = %v; want %s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowRequest is a request signed as the writer, with an unsigned
// payload whose Content-Length announces more than the test has sent:
// its body is a pipe the test writes to.
type slowRequest struct {
	body   *io.PipeWriter
	answer chan *http.Response
}

func (d *door) startSlow(tb testing.TB, method, target string, header http.Header, announced int) *slowRequest {
	tb.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(method, d.url+target, pr)
	if err != nil {
		tb.Fatal(err)
	}
	req.ContentLength = int64(announced)
	for name, values := range header {
		req.Header[name] = values
	}
	signWithPayloadHash(tb, req, writerKey, d.keys[writerKey][0], "UNSIGNED-PAYLOAD")
	s := &slowRequest{body: pw, answer: make(chan *http.Response, 1)}
	go func() {
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			pr.CloseWithError(err)
			close(s.answer)
			return
		}
		s.answer <- resp
	}()
	tb.Cleanup(func() { pw.CloseWithError(io.ErrClosedPipe) })
	return s
}

// send sends n more bytes of the body, in the background: the door may
// stop reading it.
func (s *slowRequest) send(n int) {
	go func() { _, _ = s.body.Write(bytes.Repeat([]byte("x"), n)) }()
}

// wait returns the door's answer and its error code.
func (s *slowRequest) wait(tb testing.TB) (int, string) {
	tb.Helper()
	resp, ok := <-s.answer
	if !ok {
		tb.Fatal("the request failed without an answer")
	}
	defer resp.Body.Close()
	return resp.StatusCode, readS3Error(tb, resp).Code
}

// TestBodiesReadWholeInBudget: the bodies the door reads whole before it
// parses them (a CompleteMultipartUpload's XML, up to 4 MiB, and a
// DeleteObjects', up to 2 MiB) are held in the budget of buffered bodies
// as a PUT's are: a client that sends most of one and stalls holds the
// budget's bytes, the next that does not fit is refused 503 SlowDown, and
// the budget is free once the first ends. Read outside it, 128 such
// requests a client would hold memory that no limit counted.
func TestBodiesReadWholeInBudget(t *testing.T) {
	const (
		budget    = 2 << 20
		announced = 1536 << 10 // within either body's limit; two do not fit
		sent      = 1 << 20
	)
	d := newDoor(t, doorOptions{gateway: gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: budget}})
	token := http.Header{api.HeaderFenceToken: {"1"}}
	for _, tt := range []struct {
		name   string
		target string
	}{
		{"CompleteMultipartUpload", "/" + d.bucket + "/big?uploadId=upload.secret"},
		{"DeleteObjects", "/" + d.bucket + "?delete="},
	} {
		t.Run(tt.name, func(t *testing.T) {
			held := d.startSlow(t, http.MethodPost, tt.target, token, announced)
			held.send(sent)
			if got := d.waitForBuffered(t, sent); got > budget {
				t.Fatalf("fencegate_body_buffer_bytes = %v; want at most the budget %d", got, budget)
			}

			late := d.startSlow(t, http.MethodPost, tt.target, token, announced)
			late.send(announced)
			if status, code := late.wait(t); status != http.StatusServiceUnavailable || code != "SlowDown" {
				t.Fatalf("%s past the budget = %d %s; want 503 SlowDown", tt.name, status, code)
			}

			// The held one ends: a body of no XML is refused 400, and its
			// memory goes back.
			held.send(announced - sent)
			if status, code := held.wait(t); status != http.StatusBadRequest || code != "MalformedXML" {
				t.Errorf("%s of no XML = %d %s; want 400 MalformedXML", tt.name, status, code)
			}
			d.waitForReleased(t)
		})
	}
}

// TestBodiesOverTheWholeBudget: on a gateway whose budget of buffered
// bodies is smaller than a CompleteMultipartUpload's or a DeleteObjects'
// largest body, one that the whole budget cannot hold is 400
// EntityTooLarge, not 503 SlowDown, which an SDK retries, only to be
// refused again however idle the gateway.
func TestBodiesOverTheWholeBudget(t *testing.T) {
	const budget = 1 << 20
	d := newDoor(t, doorOptions{gateway: gateway.Config{BufferBytes: 512 << 10, BufferBudgetBytes: budget}})
	token := http.Header{api.HeaderFenceToken: {"1"}}
	for _, target := range []string{"/" + d.bucket + "/big?uploadId=upload.secret", "/" + d.bucket + "?delete="} {
		t.Run(target, func(t *testing.T) {
			over := d.startSlow(t, http.MethodPost, target, token, budget+1)
			over.send(budget + 1)
			if status, code := over.wait(t); status != http.StatusBadRequest || code != "EntityTooLarge" {
				t.Fatalf("a body of the budget and a byte = %d %s; want 400 EntityTooLarge", status, code)
			}
			d.waitForReleased(t)
		})
	}
}
