package s3api_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"fencegate/gateway"
)

// TestStalledPutObjectIsAnswered: a PutObject whose body stops arriving
// is answered 400 once a chunk takes longer than the transfer chunk
// timeout, and nothing is stored. The door waits for no more of a body it
// will not use: net/http would otherwise read up to 256 KiB more of it,
// with no deadline, before answering, and a client that sends nothing
// more would hold the connection and its goroutine for ever.
func TestStalledPutObjectIsAnswered(t *testing.T) {
	d := newDoor(t, doorOptions{gateway: gateway.Config{TransferChunkTimeout: 500 * time.Millisecond}})
	const announced, sent = 100 << 10, 10 << 10
	req := signedRequest{
		method:      http.MethodPut,
		target:      "/" + d.bucket + "/stalled",
		header:      http.Header{"X-Amz-Meta-Fence-Token": {"1"}, "Content-Length": {"102400"}},
		body:        bytes.Repeat([]byte("x"), announced),
		payloadHash: "UNSIGNED-PAYLOAD",
	}.build(t, d, writerKey)

	conn, err := tls.Dial("tcp", strings.TrimPrefix(d.url, "https://"), d.srv.Client().Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The request's head and the first bytes of its body, then nothing.
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		t.Fatal(err)
	}
	head, _, _ := bytes.Cut(wire.Bytes(), []byte("\r\n\r\n"))
	if _, err := conn.Write(append(append(head, "\r\n\r\n"...), bytes.Repeat([]byte("x"), sent)...)); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil { // only a hang reaches it
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("answer to a PutObject whose body stalled: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PutObject whose body stalled = %d %s; want 400", resp.StatusCode, body)
	}
	if _, _, ok := d.stored(t, "stalled"); ok {
		t.Fatal("the stalled body was stored")
	}
}
