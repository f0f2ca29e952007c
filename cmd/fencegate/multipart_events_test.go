package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"fencegate/api"
)

// TestServeTakesMultipartAndEventsFromFile: serve with the config file's
// multipart and events sections behaves as they say, against a real etcd
// and S3 server: a REST PUT just over multipart.threshold is uploaded in
// parts of multipart.part_size (S3's ETag of a two-part object, counted
// in /metrics), one just under it in one PUT, and with
// events.max_subscribers 1 a second subscriber of the event feed is
// refused 503 gateway-busy while the first stays subscribed.
func TestServeTakesMultipartAndEventsFromFile(t *testing.T) {
	st := startStack(t, "mpconf")
	addr := freeAddr(t)
	base := "http://" + addr
	path := writeConfig(t, `
multipart:
  threshold: 6MiB
  part_size: 5MiB
  upload_ttl: 1h
events:
  max_subscribers: 1
  buffer: 8
`)
	r := startRun(t, st.serveArgs(addr, "--config", path)...)
	r.waitReady(t, base)
	client := &http.Client{Timeout: 60 * time.Second}

	put := func(key string, n int) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, base+"/v1/objects/mpconf/"+key, strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderFenceToken, "3")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("ETag")
	}
	if status, etag := put("big", 7<<20); status != http.StatusCreated || !strings.HasSuffix(etag, `-2"`) {
		t.Errorf("PUT of 7 MiB = %d, ETag %s; want 201 and a two-part ETag (over the file's 6MiB threshold, parts of 5MiB)", status, etag)
	}
	if status, etag := put("small", 6<<20); status != http.StatusCreated || strings.Contains(etag, "-") {
		t.Errorf("PUT of 6 MiB = %d, ETag %s; want 201 and a single PUT's ETag (not over the threshold)", status, etag)
	}
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"fencegate_multipart_uploads_created_total 1\n", "fencegate_multipart_uploads_completed_total 1\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no line %q", strings.TrimSpace(want))
		}
	}

	// The first subscriber is answered 200 and stays.
	first, err := http.Get(base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if line, err := bufio.NewReader(first.Body).ReadString('\n'); first.StatusCode != http.StatusOK || err != nil || line != ": subscribed\n" {
		t.Fatalf("first GET /v1/events = %d, %q, %v; want 200 and the stream", first.StatusCode, line, err)
	}
	second, err := client.Get(base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	var problem api.Problem
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if err := json.Unmarshal(body, &problem); second.StatusCode != http.StatusServiceUnavailable || err != nil || !strings.HasSuffix(problem.Type, "gateway-busy") ||
		!strings.Contains(problem.Detail, fmt.Sprintf("limit is %d", 1)) {
		t.Errorf("second GET /v1/events = %d %s; want 503 gateway-busy naming the limit of 1", second.StatusCode, body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}
