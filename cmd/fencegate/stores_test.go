package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/storage"

	"fencegate/internal/testenv"
)

// TestServeFencesAGCSBucket runs serve with a config file that maps the
// bucket ledgers to a GCS server (fake-gcs-server) and leaves every other
// bucket in S3. A write with token 5 lands in GCS with its token, a stale
// token 4 gets 409 and leaves it, a GET answers the bytes and the token,
// the mark is gcs/ledgers/KEY, and /readyz probes GCS. The same key in an
// S3 bucket is another resource, with a mark of its own.
func TestServeFencesAGCSBucket(t *testing.T) {
	st := startStack(t, "plain")
	gcs := testenv.StartGCS(t)
	gcs.CreateBucket(t, "ledgers")
	file := writeConfig(t, fmt.Sprintf("buckets:\n  - name: ledgers\n    store: gcs\n    endpoint: %s\n", gcs.Endpoint()))
	addr := freeAddr(t)
	base := "http://" + addr
	r := startRun(t, st.serveArgs(addr, "--config", file)...)
	r.waitReady(t, base)

	send := func(method, path, token, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("X-Fence-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp, string(got)
	}
	if resp, body := send(http.MethodGet, "/readyz", "", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"gcs":"ok"`) {
		t.Errorf("/readyz: %d %s; want 200 with a gcs probe that is ok", resp.StatusCode, body)
	}
	if resp, body := send(http.MethodPut, "/v1/objects/ledgers/day-1", "5", "five"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT token 5: %d %s; want 201", resp.StatusCode, body)
	}
	if resp, body := send(http.MethodPut, "/v1/objects/ledgers/day-1", "4", "four"); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "stale-token") {
		t.Fatalf("PUT token 4 after 5: %d %s; want 409 stale-token", resp.StatusCode, body)
	}
	resp, body := send(http.MethodGet, "/v1/objects/ledgers/day-1", "", "")
	if resp.StatusCode != http.StatusOK || body != "five" || resp.Header.Get("X-Fence-Token") != "5" {
		t.Errorf("GET: %d %q, X-Fence-Token %q; want 200 \"five\", 5", resp.StatusCode, body, resp.Header.Get("X-Fence-Token"))
	}
	if _, body := send(http.MethodGet, "/v1/fences/gcs/ledgers/day-1", "", ""); !strings.Contains(body, `"high_water_mark":5`) {
		t.Errorf("fence of gcs/ledgers/day-1: %s; want high_water_mark 5", body)
	}

	// GCS holds token 5's bytes and token, read with a client the gateway
	// does not use.
	obj := gcs.Client(t).Bucket("ledgers").Object("day-1")
	attrs, err := obj.Attrs(t.Context())
	if err != nil {
		t.Fatalf("GCS attrs of ledgers/day-1: %v", err)
	}
	if attrs.Metadata["fence-token"] != "5" {
		t.Errorf("GCS metadata fence-token = %q; want 5", attrs.Metadata["fence-token"])
	}
	if got := readGCS(t, obj); got != "five" {
		t.Errorf("GCS holds %q; want \"five\"", got)
	}

	// An S3 bucket beside it: the same key is another resource.
	if resp, body := send(http.MethodPut, "/v1/objects/plain/day-1", "1", "one"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT token 1 to the S3 bucket: %d %s; want 201", resp.StatusCode, body)
	}
	if _, body := send(http.MethodGet, "/v1/fences/s3/plain/day-1", "", ""); !strings.Contains(body, `"high_water_mark":1`) {
		t.Errorf("fence of s3/plain/day-1: %s; want high_water_mark 1", body)
	}

	// Tickets: the S3 backend signs them for the S3 bucket; the GCS
	// bucket's are 501, with no mark raised.
	if resp, body := send(http.MethodPost, "/v1/tickets/plain/day-2", "2", `{"size":3}`); resp.StatusCode != http.StatusCreated || !strings.Contains(body, "X-Amz-Signature") {
		t.Errorf("ticket for the S3 bucket: %d %s; want 201 with a presigned URL", resp.StatusCode, body)
	}
	if resp, body := send(http.MethodPost, "/v1/tickets/ledgers/day-2", "2", `{"size":3}`); resp.StatusCode != http.StatusNotImplemented || !strings.Contains(body, "not-implemented") {
		t.Errorf("ticket for the GCS bucket: %d %s; want 501 not-implemented", resp.StatusCode, body)
	}
	if _, body := send(http.MethodGet, "/v1/fences/gcs/ledgers/day-2", "", ""); !strings.Contains(body, `"high_water_mark":0`) {
		t.Errorf("fence of gcs/ledgers/day-2 after a refused ticket: %s; want none", body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}

// readGCS returns the bytes of obj.
func readGCS(t *testing.T, obj *storage.ObjectHandle) string {
	t.Helper()
	rd, err := obj.NewReader(t.Context())
	if err != nil {
		t.Fatalf("GCS read: %v", err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("GCS read: %v", err)
	}
	return string(b)
}
