package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
)

// TestConditionalAndRangeReads sends GET and HEAD with Range and the
// conditional headers through the gateway to a real S3 server, and checks
// that S3's answer (206, 304, 412, 416) reaches the client with the
// object's recorded token still in X-Fence-Token.
func TestConditionalAndRangeReads(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	const body = "0123456789"
	if r := e.put(t, "obj", 7, body); r.status != http.StatusCreated {
		t.Fatalf("put = %s; want 201", r)
	}
	head := do(t, http.MethodHead, e.objectURL("obj"), nil, nil)
	etag, lastModified := head.header.Get("ETag"), head.header.Get("Last-Modified")
	if head.status != http.StatusOK || etag == "" || lastModified == "" {
		t.Fatalf("HEAD = %d %v; want 200 with ETag and Last-Modified", head.status, head.header)
	}
	// A date after the object's last modification that is already past:
	// S3 servers ignore dates in the future (versitygw does, as RFC 2616
	// told them to), so "not modified since" needs one in the past.
	modified, err := http.ParseTime(lastModified)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(modified.Add(2 * time.Second)))
	after := modified.Add(time.Second).UTC().Format(http.TimeFormat)
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-24 * time.Hour).UTC().Format(http.TimeFormat)
	const wrongETag = `"00000000000000000000000000000000"`

	tests := []struct {
		name         string
		method       string
		header       http.Header
		status       int
		body         string // for 200 and 206
		contentRange string
		slug         string // problem type, for 412 and 416
	}{
		{name: "plain GET", method: http.MethodGet, status: 200, body: body},
		{name: "Range bytes=2-5", method: http.MethodGet, header: http.Header{"Range": {"bytes=2-5"}},
			status: 206, body: "2345", contentRange: "bytes 2-5/10"},
		{name: "open range", method: http.MethodGet, header: http.Header{"Range": {"bytes=7-"}},
			status: 206, body: "789", contentRange: "bytes 7-9/10"},
		{name: "suffix range", method: http.MethodGet, header: http.Header{"Range": {"bytes=-3"}},
			status: 206, body: "789", contentRange: "bytes 7-9/10"},
		{name: "last-pos past the end", method: http.MethodGet, header: http.Header{"Range": {"bytes=8-99999999999999999999999"}},
			status: 206, body: "89", contentRange: "bytes 8-9/10"},
		{name: "unsatisfiable range", method: http.MethodGet, header: http.Header{"Range": {"bytes=20-30"}},
			status: 416, slug: "range-not-satisfiable"},
		{name: "huge first-pos", method: http.MethodGet, header: http.Header{"Range": {"bytes=99999999999999999999999-"}},
			status: 416, slug: "range-not-satisfiable"},
		{name: "huge suffix", method: http.MethodGet, header: http.Header{"Range": {"bytes=-99999999999999999999999"}},
			status: 206, body: body, contentRange: "bytes 0-9/10"},
		{name: "signed positions ignored", method: http.MethodGet, header: http.Header{"Range": {"bytes=+2-5"}},
			status: 200, body: body},
		{name: "malformed range ignored", method: http.MethodGet, header: http.Header{"Range": {"bytes=5-2"}},
			status: 200, body: body},
		{name: "other unit ignored", method: http.MethodGet, header: http.Header{"Range": {"items=0-1"}},
			status: 200, body: body},
		{name: "multiple ranges ignored", method: http.MethodGet, header: http.Header{"Range": {"bytes=0-1,4-5"}},
			status: 200, body: body},
		{name: "several Range fields ignored", method: http.MethodGet, header: http.Header{"Range": {"bytes=0-1", "bytes=4-5"}},
			status: 200, body: body},
		{name: "Range on HEAD ignored", method: http.MethodHead, header: http.Header{"Range": {"bytes=2-5"}},
			status: 200},
		{name: "If-Range ignores the range", method: http.MethodGet, header: http.Header{"Range": {"bytes=2-5"}, "If-Range": {etag}},
			status: 200, body: body},
		{name: "If-None-Match current ETag", method: http.MethodGet, header: http.Header{"If-None-Match": {etag}},
			status: 304},
		{name: "If-None-Match other ETag", method: http.MethodGet, header: http.Header{"If-None-Match": {wrongETag}},
			status: 200, body: body},
		{name: "If-None-Match *", method: http.MethodGet, header: http.Header{"If-None-Match": {"*"}},
			status: 304},
		{name: "If-Match current ETag", method: http.MethodGet, header: http.Header{"If-Match": {etag}},
			status: 200, body: body},
		{name: "If-Match wrong ETag", method: http.MethodGet, header: http.Header{"If-Match": {wrongETag}},
			status: 412, slug: "precondition-failed"},
		{name: "If-Match malformed", method: http.MethodGet, header: http.Header{"If-Match": {"no-quotes"}},
			status: 400, slug: "invalid-request"},
		{name: "If-Modified-Since after the last modification", method: http.MethodGet, header: http.Header{"If-Modified-Since": {after}},
			status: 304},
		{name: "If-Modified-Since in the future, ignored by S3", method: http.MethodGet, header: http.Header{"If-Modified-Since": {future}},
			status: 200, body: body},
		{name: "If-None-Match wins over If-Modified-Since", method: http.MethodGet, header: http.Header{"If-None-Match": {wrongETag}, "If-Modified-Since": {after}},
			status: 200, body: body},
		{name: "If-None-Match list refused (S3 compares one tag)", method: http.MethodGet, header: http.Header{"If-None-Match": {wrongETag + ", " + etag}},
			status: 400, slug: "invalid-request"},
		{name: "If-Match in two fields refused", method: http.MethodGet, header: http.Header{"If-Match": {etag, wrongETag}},
			status: 400, slug: "invalid-request"},
		{name: "If-Match weak tag never matches", method: http.MethodGet, header: http.Header{"If-Match": {"W/" + etag}},
			status: 412, slug: "precondition-failed"},
		{name: "If-Modified-Since past", method: http.MethodGet, header: http.Header{"If-Modified-Since": {past}},
			status: 200, body: body},
		{name: "If-Modified-Since not a date, ignored", method: http.MethodGet, header: http.Header{"If-Modified-Since": {"yesterday"}},
			status: 200, body: body},
		{name: "If-Unmodified-Since past", method: http.MethodGet, header: http.Header{"If-Unmodified-Since": {past}},
			status: 412, slug: "precondition-failed"},
		{name: "If-Unmodified-Since future", method: http.MethodGet, header: http.Header{"If-Unmodified-Since": {future}},
			status: 200, body: body},
		{name: "If-Match wins over If-Unmodified-Since", method: http.MethodGet, header: http.Header{"If-Match": {etag}, "If-Unmodified-Since": {past}},
			status: 200, body: body},
		{name: "range and If-Match", method: http.MethodGet, header: http.Header{"If-Match": {etag}, "Range": {"bytes=0-0"}},
			status: 206, body: "0", contentRange: "bytes 0-0/10"},
		{name: "HEAD If-None-Match current ETag", method: http.MethodHead, header: http.Header{"If-None-Match": {etag}},
			status: 304},
		{name: "HEAD If-Match wrong ETag", method: http.MethodHead, header: http.Header{"If-Match": {wrongETag}},
			status: 412},
		{name: "HEAD If-Modified-Since after the last modification", method: http.MethodHead, header: http.Header{"If-Modified-Since": {after}},
			status: 304},
		{name: "If-None-Match malformed", method: http.MethodGet, header: http.Header{"If-None-Match": {"\"a\" \"b\""}},
			status: 400, slug: "invalid-request"},
		{name: "If-Match * with a tag", method: http.MethodGet, header: http.Header{"If-Match": {"*, " + etag}},
			status: 400, slug: "invalid-request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, e.objectURL("obj"), nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tt.header {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			r := send(t, req)
			if r.status != tt.status {
				t.Fatalf("%s with %v = %s; want %d", tt.method, tt.header, r, tt.status)
			}
			if tt.slug != "" && tt.method == http.MethodGet {
				wantProblem(t, r, tt.status, tt.slug)
			}
			if got := r.header.Get("Content-Range"); got != tt.contentRange {
				t.Errorf("Content-Range = %q; want %q", got, tt.contentRange)
			}
			switch tt.status {
			case 200, 206, 304:
				if got := r.header.Get(api.HeaderFenceToken); got != "7" {
					t.Errorf("%s = %q; want 7", api.HeaderFenceToken, got)
				}
				if got := r.header.Get("ETag"); got != etag {
					t.Errorf("ETag = %q; want %q", got, etag)
				}
				if got := r.header.Get("Last-Modified"); got != lastModified {
					t.Errorf("Last-Modified = %q; want %q", got, lastModified)
				}
			}
			if tt.status == 200 || tt.status == 206 {
				if got := r.header.Get("Accept-Ranges"); got != "bytes" {
					t.Errorf("Accept-Ranges = %q; want bytes", got)
				}
			}
			if tt.method == http.MethodGet && (tt.status == 200 || tt.status == 206) && string(r.body) != tt.body {
				t.Errorf("body = %q; want %q", r.body, tt.body)
			}
			if tt.status == 304 && len(r.body) != 0 {
				t.Errorf("304 body = %q; want none", r.body)
			}
		})
	}
}
