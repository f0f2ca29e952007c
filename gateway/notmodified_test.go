package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// TestNotModifiedCarriesWhatTheOKCarries: a GET or HEAD of
// /v1/objects/... answered 304 carries each of the fields that RFC 9110
// section 15.4.5 names (Cache-Control, Content-Location, Date, ETag,
// Expires, Vary) exactly when the 200 to the same request carries it, with
// the 200's value, and none of the 200's representation headers
// (Content-Length, Content-Type, Accept-Ranges, Content-Range), no body.
// The object is stored straight in the store with Cache-Control (and, in
// S3, Expires), as the S3 API stores it: the REST API's 200 does not
// answer an object's stored metadata, so neither does its 304. A 412
// carries none of the object's headers, and its Content-Length is its
// problem body's. If-None-Match decides over If-Modified-Since, both
// ways.
func TestNotModifiedCarriesWhatTheOKCarries(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			e := newEnvOn(t, store, gateway.Config{})
			ctx := context.Background()
			const body = "cache me"
			var lastModified time.Time
			if store == api.StoreGCS {
				w := e.gcsReader.Bucket(e.bucket).Object("k").NewWriter(ctx)
				w.ContentType, w.CacheControl = "text/plain", "max-age=60"
				w.Metadata = map[string]string{api.MetadataFenceToken: "6"}
				if _, err := w.Write([]byte(body)); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				lastModified = w.Attrs().Updated
			} else {
				info, err := e.minio.PutObject(ctx, e.bucket, "k", strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{
					ContentType: "text/plain", CacheControl: "max-age=60", Expires: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
					UserMetadata: map[string]string{api.MetadataFenceToken: "6"},
				})
				if err != nil {
					t.Fatal(err)
				}
				lastModified = info.LastModified
				if lastModified.IsZero() {
					st, err := e.minio.StatObject(ctx, e.bucket, "k", minio.StatObjectOptions{})
					if err != nil {
						t.Fatal(err)
					}
					lastModified = st.LastModified
				}
			}
			// A date after the last modification that is already past (S3
			// servers ignore dates in the future), and one before it.
			time.Sleep(time.Until(lastModified.Add(2 * time.Second)))
			after := lastModified.Add(time.Second).UTC().Format(http.TimeFormat)
			before := lastModified.Add(-time.Hour).UTC().Format(http.TimeFormat)
			const other = `"00000000000000000000000000000000"`

			read := func(t *testing.T, method string, header [][2]string) result {
				t.Helper()
				req, err := http.NewRequest(method, e.objectURL("k"), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range header {
					req.Header.Set(f[0], f[1])
				}
				return send(t, req)
			}
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				ok := read(t, method, nil)
				etag := ok.header.Get("ETag")
				if ok.status != http.StatusOK || etag == "" || ok.header.Get(api.HeaderFenceToken) != "6" {
					t.Fatalf("%s = %d %v; want 200 with an ETag and token 6", method, ok.status, ok.header)
				}
				tests := testenv.ConditionalReads(etag, other, before, after)
				for _, tt := range tests {
					t.Run(method+" "+tt.Name, func(t *testing.T) {
						r := read(t, method, tt.Header)
						if r.status != tt.Status {
							t.Fatalf("%s with %v = %s; want %d", method, tt.Header, r, tt.Status)
						}
						h := r.header
						switch tt.Status {
						case http.StatusOK:
							if method == http.MethodGet && string(r.body) != body {
								t.Errorf("body = %q; want %q", r.body, body)
							}
						case http.StatusNotModified:
							if len(r.body) != 0 {
								t.Errorf("a 304 with a body: %q", r.body)
							}
							for _, name := range []string{"Cache-Control", "Content-Location", "ETag", "Expires", "Vary", "Last-Modified", api.HeaderFenceToken} {
								if g, w := h.Values(name), ok.header.Values(name); strings.Join(g, "\n") != strings.Join(w, "\n") {
									t.Errorf("304 %s = %q; want %q, as the 200 carries it", name, g, w)
								}
							}
							if h.Get("Date") == "" {
								t.Errorf("a 304 without a Date")
							}
							for _, name := range []string{"Content-Length", "Content-Type", "Accept-Ranges", "Content-Range"} {
								if v, ok := h[name]; ok {
									t.Errorf("the 304 carries %s: %q", name, v)
								}
							}
						case http.StatusPreconditionFailed:
							for _, name := range []string{"ETag", "Last-Modified", "Expires", "Accept-Ranges", "Content-Range", api.HeaderFenceToken} {
								if v, ok := h[http.CanonicalHeaderKey(name)]; ok {
									t.Errorf("the 412 carries %s: %q", name, v)
								}
							}
							if ct := h.Get("Content-Type"); ct != api.ContentTypeProblem {
								t.Errorf("412 Content-Type = %q; want %s, not the object's", ct, api.ContentTypeProblem)
							}
							if method == http.MethodHead {
								if len(r.body) != 0 || h.Get("Content-Length") != "" {
									t.Errorf("HEAD 412: body %q, Content-Length %q; want neither", r.body, h.Get("Content-Length"))
								}
								return
							}
							if cl := h.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) || strings.Contains(string(r.body), body) {
								t.Errorf("GET 412: Content-Length %q, body %q; want the problem's own, not the object", cl, r.body)
							}
							wantProblem(t, r, http.StatusPreconditionFailed, "precondition-failed")
						}
					})
				}
			}
		})
	}
}
