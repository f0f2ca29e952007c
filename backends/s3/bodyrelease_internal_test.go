package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedBody hands out its first chunk, then blocks its next Read until
// the gate opens: the transport is then inside Read when the store's
// early answer arrives.
type gatedBody struct {
	first   []byte
	blocked chan struct{} // closed when a Read blocks on the gate
	gate    chan struct{}
	reading atomic.Int32 // Reads in progress
	reads   atomic.Int32
}

func (b *gatedBody) Read(p []byte) (int, error) {
	b.reading.Add(1)
	defer b.reading.Add(-1)
	if b.reads.Add(1) == 1 {
		return copy(p, b.first), nil
	}
	close(b.blocked)
	<-b.gate
	return 0, errors.New("the gated body ends")
}

// TestSendReturnsOnlyOnceTheTransportLetGoOfTheBody: a store may answer
// before it has read a request's body (a refusal), and net/http's
// transport may still be reading the body, in a goroutine of its own,
// when Do returns. The caller owns the body (the door drains a refused
// part's body from the client, or retries): send must not return while
// the transport can still read it. The store here answers 412 at once
// without reading; the body blocks its second Read. send must not
// return before that Read has ended and the transport has closed the
// body (it returned at once before, with the transport inside Read).
func TestSendReturnsOnlyOnceTheTransportLetGoOfTheBody(t *testing.T) {
	// The store answers, without reading the body, once the transport is
	// inside the body's second Read, and keeps the connection until the
	// test ends: the transport is still sending the body when the whole
	// answer has arrived.
	body := &gatedBody{first: bytes.Repeat([]byte("x"), 16<<10), blocked: make(chan struct{}), gate: make(chan struct{})}
	answered, hold := make(chan struct{}), make(chan struct{})
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-body.blocked
		// A whole answer, of a stated length: the client has read all of
		// it while the handler still holds the connection.
		const answer = "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>"
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusPreconditionFailed)
		io.WriteString(w, answer)
		w.(http.Flusher).Flush()
		close(answered)
		<-hold
	}))
	defer store.Close()
	c, err := New(context.Background(), Config{Endpoint: store.URL, UsePathStyle: true, AccessKeyID: "id", SecretAccessKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ep := c.signed.endpoint(ctx, "bucket")
	var release sync.Once
	open := func() { release.Do(func() { close(body.gate) }) }
	defer close(hold) // before the store closes, which waits for its handler
	defer open()
	req, err := c.signed.newRequest(ctx, ep, http.MethodPut, "key", "x-id=PutObject", body, 8<<20, func(http.Header) {})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	go func() {
		_, err := c.signed.send(req, "PutObject")
		returned <- err
	}()
	<-answered
	select {
	case err := <-returned:
		t.Fatalf("send returned (%v) while the transport was inside the body's Read (%d in progress)", err, body.reading.Load())
	case <-time.After(500 * time.Millisecond):
		// send is still waiting, as it must: let the body go on.
	}
	open()
	if err := <-returned; err == nil {
		t.Fatal("send of a refused PUT = nil; want the store's 412")
	}
	if n := body.reading.Load(); n != 0 {
		t.Errorf("send returned with %d Reads of the body in progress", n)
	}
}
