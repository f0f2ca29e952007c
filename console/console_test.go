package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fencegate/console"
)

// TestHandlerServesFilesStrictly checks each file's content type and the
// headers that keep the page to its own origin, and that nothing else is
// served.
func TestHandlerServesFilesStrictly(t *testing.T) {
	tests := []struct {
		method, path string
		wantStatus   int
		wantType     string
		wantBody     string
	}{
		{"GET", "/ui/", 200, "text/html; charset=utf-8", "<!doctype html>"},
		{"GET", "/ui/index.html", 200, "text/html; charset=utf-8", "<!doctype html>"},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", "'use strict';"},
		{"GET", "/ui/style.css", 200, "text/css; charset=utf-8", ":root"},
		{"HEAD", "/ui/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/ui/static/app.js", 404, "", ""},
		{"GET", "/ui/../go.mod", 404, "", ""},
		{"POST", "/ui/", 405, "", ""},
	}
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d; want %d", tt.method, tt.path, res.StatusCode, tt.wantStatus)
			}
			for name, want := range map[string]string{
				"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'",
				"Cache-Control":           "no-store",
				"X-Content-Type-Options":  "nosniff",
			} {
				if got := res.Header.Get(name); !strings.HasPrefix(got, want) {
					t.Errorf("%s = %q; want it to start with %q", name, got, want)
				}
			}
			if tt.wantType != "" && res.Header.Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type = %q; want %q", res.Header.Get("Content-Type"), tt.wantType)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body starts %q; want it to hold %q", string(body[:min(len(body), 40)]), tt.wantBody)
			}
		})
	}
}

// TestFilesFetchNothingFromElsewhere checks that the page names no other
// origin: no URL with a scheme or a protocol-relative one, no @import, no
// web font. The Content-Security-Policy would block them; this keeps them
// from being written.
func TestFilesFetchNothingFromElsewhere(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		text := strings.ReplaceAll(string(body), "http://www.w3.org/2000/svg", "") // the SVG namespace, an identifier
		for _, bad := range []string{"http://", "https://", "src=\"//", "href=\"//", "@import", "@font-face", "url("} {
			if strings.Contains(text, bad) {
				t.Errorf("%s holds %q: the console must fetch nothing from elsewhere", path, bad)
			}
		}
	}
}
