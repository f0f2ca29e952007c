package gcs_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"fencegate/api"
)

// TestTicketNotImplemented: a GCS bucket answers a ticket request with
// api.ErrNotImplemented and sends nothing to the store; a request that
// does not validate is still api.ErrInvalidRequest.
func TestTicketNotImplemented(t *testing.T) {
	c, rec, _ := newBackend(t)
	before := len(rec.sent())
	tk, err := c.PresignPut(t.Context(), api.TicketRequest{Path: path, Token: 3, Size: 5})
	if !errors.Is(err, api.ErrNotImplemented) || tk.URL != "" {
		t.Fatalf("PresignPut = %+v, %v; want ErrNotImplemented", tk, err)
	}
	if sent := rec.sent()[before:]; len(sent) != 0 {
		t.Fatalf("PresignPut sent %v to the store; want nothing", sent)
	}
	if _, err := c.PresignPut(t.Context(), api.TicketRequest{Path: path, Token: 0, Size: 5}); !errors.Is(err, api.ErrInvalidRequest) {
		t.Fatalf("PresignPut without a token = %v; want ErrInvalidRequest", err)
	}
}

// TestFakeGCSSignedURLsEnforceNothing is why GCS buckets take no tickets
// (backends/gcs/ticket.go): V4 signed URLs made by the official client
// library for a PUT that signs x-goog-if-generation-match and
// x-goog-meta-fence-token, with a key the emulator has never seen, are
// taken by fake-gcs-server whatever their signature, their expiry or
// their condition, and the client's bytes land each time. Were any of
// these refused, this test would fail, and a GCS presigner could be built
// and tested as the S3 one is.
func TestFakeGCSSignedURLsEnforceNothing(t *testing.T) {
	_, _, emulator := newBackend(t)
	reader := emulator.Client(t)
	ctx := t.Context()
	const name = "signed/k"
	obj := reader.Bucket("bkt").Object(name)
	w := obj.NewWriter(ctx)
	io.WriteString(w, "newer bytes")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	current := w.Attrs().Generation

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	privateKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	sign := func(generation int64, expires time.Time) string {
		u, err := storage.SignedURL("bkt", name, &storage.SignedURLOptions{
			GoogleAccessID: "ticket-test@fencegate.iam.gserviceaccount.com",
			PrivateKey:     privateKey,
			Method:         http.MethodPut,
			Expires:        expires,
			Scheme:         storage.SigningSchemeV4,
			Headers:        []string{"x-goog-if-generation-match:" + strconv.FormatInt(generation, 10), "x-goog-meta-fence-token:3"},
			Hostname:       emulator.Host(),
			Insecure:       true,
		})
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := parsed.Query().Get("X-Goog-SignedHeaders"), "host;x-goog-if-generation-match;x-goog-meta-fence-token"; got != want {
			t.Fatalf("signed URL signs %q; want %q", got, want)
		}
		return u
	}
	tests := []struct {
		name       string
		url        func() string
		generation int64
	}{
		{"condition: generation 0 (must not exist) on an existing object", func() string { return sign(0, time.Now().Add(time.Minute)) }, 0},
		{"condition: an older generation", func() string { return sign(current-1, time.Now().Add(time.Minute)) }, current - 1},
		{"signature: replaced by zeros", func() string {
			u, _ := url.Parse(sign(current+1000, time.Now().Add(time.Minute)))
			q := u.Query()
			q.Set("X-Goog-Signature", strings.Repeat("0", 512))
			u.RawQuery = q.Encode()
			return u.String()
		}, current + 1000},
		{"expiry: signed two days ago for one second", func() string {
			u, _ := url.Parse(sign(current+2000, time.Now().Add(time.Minute)))
			q := u.Query()
			q.Set("X-Goog-Date", time.Now().Add(-48*time.Hour).UTC().Format("20060102T150405Z"))
			q.Set("X-Goog-Expires", "1")
			u.RawQuery = q.Encode()
			return u.String()
		}, current + 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "stale bytes: " + tt.name
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, tt.url(), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Goog-If-Generation-Match", strconv.FormatInt(tt.generation, 10))
			req.Header.Set("X-Goog-Meta-Fence-Token", "3")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("signed PUT = %d; fake-gcs-server now refuses it: tickets for GCS can be tested (see backends/gcs/ticket.go)", resp.StatusCode)
			}
			r, err := obj.NewReader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Fatalf("read back %q, %v; want the signed PUT's bytes %q", got, err, body)
			}
		})
	}
}
