package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"fencegate/gateway"
)

// TestStalledPutIsAnswered: a PUT whose body stops arriving gets its
// answer, 400 saying the body stalled, once a chunk takes longer than the
// transfer chunk timeout, and nothing is stored; net/http must not be left
// to read the rest of the body, with no deadline, before it answers.
func TestStalledPutIsAnswered(t *testing.T) {
	e := newEnv(t, gateway.Config{TransferChunkTimeout: 500 * time.Millisecond})
	p := e.startSlowPut(t, "stalled", 100<<10, 10<<10)
	if err := p.conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil { // only a hang reaches it
		t.Fatal(err)
	}
	r := p.answer(t)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "stopped arriving") {
		t.Fatalf("PUT whose body stalled = %s; want 400 saying it stopped arriving", r)
	}
	if _, _, ok := e.stored(t, "stalled"); ok {
		t.Fatal("the stalled body was stored")
	}
}
