package sigv4_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"fencegate/s3api/sigv4"
)

// TestFailedBodyNeverReachesUpstreamWhole shows the intended use of
// Result.Body: a front door streams it into an upstream PUT with a fixed
// Content-Length. A body that fails verification fails that upload short of
// its last byte, so the upstream (like S3) stores nothing; a good body
// arrives whole.
func TestFailedBodyNeverReachesUpstreamWhole(t *testing.T) {
	// What the upstream stored from each request: the body, or nil.
	stored := make(chan []byte, 10)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength {
			stored <- nil
			w.WriteHeader(http.StatusBadRequest) // S3: IncompleteBody, nothing stored
			return
		}
		stored <- b
	}))
	defer upstream.Close()

	v, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Verify(r.Context(), r)
		var refusal *sigv4.Error
		if errors.As(err, &refusal) {
			w.WriteHeader(refusal.Status)
			return
		}
		up, _ := http.NewRequestWithContext(r.Context(), http.MethodPut, upstream.URL+r.URL.Path, res.Body)
		up.ContentLength = res.DecodedContentLength
		resp, err := upstream.Client().Do(up)
		if err != nil {
			// The transport saw the body's *sigv4.Error before the last byte.
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}))
	defer front.Close()

	payload := testPayload(100_000)
	flip := func(b []byte) []byte {
		b = bytes.Clone(b)
		b[bytes.LastIndex(b, payload[len(payload)-10:])] ^= 1
		return b
	}
	cases := []struct {
		name     string
		req      *http.Request
		stored   bool
		wantCode int
	}{
		{"good payload hash", request{target: "/b/k", body: payload}.build(t, front.URL), true, 200},
		{"wrong payload hash", request{target: "/b/k", body: payload, payloadHash: hexSHA256(payload[1:])}.build(t, front.URL), false, 400},
		{"good signed chunks", chunked{payload: payload, chunkSize: 16384}.build(t, front.URL, nil), true, 200},
		{"last chunk corrupted", chunked{payload: payload, chunkSize: 16384}.build(t, front.URL, flip), false, 400},
		{"good trailer", minioTrailer(t, front.URL, payload, crc32Base64(payload), false, nil), true, 200},
		{"last byte corrupted, trailer checksum", minioTrailer(t, front.URL, payload, crc32Base64(payload), false, flip), false, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := front.Client().Do(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Errorf("status %d; want %d", resp.StatusCode, tc.wantCode)
			}
			// Wait for the upstream handler: it may finish after the front door answered.
			got := <-stored
			if tc.stored != (got != nil) || (got != nil && !bytes.Equal(got, payload)) {
				t.Errorf("upstream stored %d bytes; want stored=%v", len(got), tc.stored)
			}
		})
	}
}
