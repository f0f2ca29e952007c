// Command partnerdemo is a tiny stand-in for a partner API (a payments
// service), for trying fencegate's partner routes by hand: it is the
// upstream of the worked example in docs/partners.md.
//
//	go run ./internal/partnerdemo                # listens on 127.0.0.1:9090
//	go run ./internal/partnerdemo --delay 2s     # slow: shows serialization
//
// It answers POST /v1/accounts/{account}/charges with 201 and a JSON
// charge, and prints one line per request it receives, with the
// X-Fence-Token and Idempotency-Key that fencegate sent, so that a reader
// can see which requests reached it (and which fencegate refused or
// replayed without calling it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "`host:port` to serve on")
	delay := flag.Duration("delay", 0, "how long each charge takes")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.Printf("partnerdemo: payments API on http://%s (POST /v1/accounts/{account}/charges)", *listen)
	srv := &http.Server{Addr: *listen, Handler: newHandler(*delay, os.Stdout), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// charge is the answer to a charge request.
type charge struct {
	ID             string          `json:"id"`
	Account        string          `json:"account"`
	Request        json.RawMessage `json:"request,omitempty"`
	FenceToken     string          `json:"fence_token"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// newHandler returns the demo API; it writes one line per request to out.
func newHandler(delay time.Duration, out io.Writer) http.Handler {
	var charges atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts/{account}/charges", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		c := charge{
			ID:             fmt.Sprintf("ch_%d", charges.Add(1)),
			Account:        r.PathValue("account"),
			FenceToken:     r.Header.Get("X-Fence-Token"),
			IdempotencyKey: r.Header.Get("Idempotency-Key"),
		}
		if json.Valid(body) {
			c.Request = body
		}
		fmt.Fprintf(out, "%s charge %s for account %s: token %s, key %q, api key %q, body %s\n",
			time.Now().Format("15:04:05.000"), c.ID, c.Account, c.FenceToken, c.IdempotencyKey,
			mask(r.Header.Get("X-Api-Key")), strings.TrimSpace(string(body)))
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/charges/"+c.ID)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	})
	return mux
}

// mask shows only the first characters of a secret.
func mask(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:4] + "..."
}
