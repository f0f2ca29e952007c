// Package console is fencegate's live console: one HTML page, one script
// and one style sheet, embedded in the binary, which a browser loads from
// the gateway under /ui/ and which draws what the gateway decides, from
// the gateway's own API (the event feed, the listings, /metrics, the lock
// API). Nothing is built and nothing is fetched from elsewhere: it works
// on a machine without a network.
//
// The files hold no data. The gateway serves them without authentication
// (gateway.WithConsole); the page asks for an API key, keeps it in the
// tab's memory, and sends it as a bearer header on every request (or
// lets the browser present its client certificate), so it shows only
// what that identity may see.
package console

import (
	"embed"
	"net/http"
	"strings"
)

//go:embed static/index.html static/app.js static/style.css
var files embed.FS

// contentSecurityPolicy lets the page load its own script and style
// sheet and talk to its own origin, and nothing else: no inline script,
// no other origin, no frames, no forms.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// assets maps each path below /ui/ to its file and content type.
var assets = map[string]struct{ file, contentType string }{
	"":           {"static/index.html", "text/html; charset=utf-8"},
	"index.html": {"static/index.html", "text/html; charset=utf-8"},
	"app.js":     {"static/app.js", "text/javascript; charset=utf-8"},
	"style.css":  {"static/style.css", "text/css; charset=utf-8"},
}

// Handler serves the console's files at /ui/ (the page), /ui/app.js and
// /ui/style.css, to GET and HEAD, with a strict Content-Security-Policy
// (this origin only), Cache-Control no-store and nosniff. Other paths
// are 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/ui/")
		asset, known := assets[name]
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !ok || !known {
			http.NotFound(w, r)
			return
		}
		body, err := files.ReadFile(asset.file)
		if err != nil { // the files are embedded: cannot happen
			http.Error(w, "console file missing", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", asset.contentType)
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}
