package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCharge(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(newHandler(0, &out))
	defer srv.Close()
	for i, want := range []string{"ch_1", "ch_2"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/accounts/a1/charges", strings.NewReader(`{"amount":5}`))
		req.Header.Set("X-Fence-Token", "7")
		req.Header.Set("Idempotency-Key", "fg-abc")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var c charge
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated || c.ID != want || c.Account != "a1" || c.FenceToken != "7" || c.IdempotencyKey != "fg-abc" || string(c.Request) != `{"amount":5}` {
			t.Fatalf("charge %d = %d %+v, %v; want 201 %s", i+1, resp.StatusCode, c, err, want)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("printed %d lines; want one per request:\n%s", n, out.String())
	}
	resp, err := http.Get(srv.URL + "/v1/accounts/a1/charges")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET = %d; want 405", resp.StatusCode)
	}
}
