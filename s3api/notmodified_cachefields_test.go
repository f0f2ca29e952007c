package s3api_test

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"fencegate/internal/testenv"
)

// notModifiedRepeats are the fields that RFC 9110 section 15.4.5 says a
// 304 must carry when a 200 to the same request would: a cache refreshes
// its stored entry from them. (The door sends no Content-Location or
// Vary; Go's server sends Date on every answer.)
var notModifiedRepeats = []string{"Cache-Control", "Content-Location", "Date", "ETag", "Expires", "Vary"}

// objectOnlyFields are the headers of a 200 that describe the
// representation itself, which a 304 must not carry (it has no body, and
// a cache would take them for the stored body's).
var objectOnlyFields = []string{
	"Content-Length", "Content-Type", "Content-Disposition", "Content-Encoding", "Content-Language",
	"Content-Range", "Accept-Ranges", "X-Amz-Meta-Colour", "X-Amz-Mp-Parts-Count",
}

// TestNotModifiedCarriesCacheFields: a GET or HEAD that the door answers
// 304 carries the Cache-Control and Expires that its 200 carries (the
// ones the object was stored with), with the same ETag, and none of the
// object's other metadata, no Content-Length and no body; a 412 carries
// no object header either (GET: S3's XML error, HEAD: nothing).
// If-None-Match decides over If-Modified-Since, both ways.
//
// Each request also goes straight to versitygw, and the door must give the
// status it gives. versitygw's 304 carries none of ETag, Last-Modified,
// Cache-Control or Expires: the door answers as RFC 9110 (and AWS S3 and
// MinIO, which send ETag and Last-Modified, MinIO also Cache-Control and
// Expires) would have it rather than copy that.
func TestNotModifiedCarriesCacheFields(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	const body = "cache me"
	const cacheControl = "public, max-age=60"
	expires := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	put := func(key string, cached bool) string {
		in := &s3.PutObjectInput{
			Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader(body),
			Metadata:           map[string]string{"fence-token": "6", "colour": "blue"},
			ContentType:        aws.String("text/plain"),
			ContentDisposition: aws.String("inline"), ContentLanguage: aws.String("en"),
		}
		if cached {
			in.CacheControl, in.Expires = aws.String(cacheControl), aws.Time(expires)
		}
		out, err := d.client(writerKey).PutObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ETag)
	}
	etags := map[string]string{"cached": put("cached", true), "plain": put("plain", false)}

	// What landed in S3, read with an independent client: the fields the
	// 304 must repeat are the object's own.
	info, err := d.minio.StatObject(ctx, d.bucket, "cached", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Metadata.Get("Cache-Control"); got != cacheControl {
		t.Fatalf("stored Cache-Control = %q; want %q", got, cacheControl)
	}
	if !info.Expires.Equal(expires) {
		t.Fatalf("stored Expires = %v; want %v", info.Expires, expires)
	}
	// A date after the last modification of both objects that is already
	// past (S3 servers ignore dates in the future), and one before it.
	// "plain" was written after "cached", maybe in the next second: the
	// dates must hold for both.
	plain, err := d.minio.StatObject(ctx, d.bucket, "plain", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := info.LastModified
	if plain.LastModified.After(last) {
		last = plain.LastModified
	}
	time.Sleep(time.Until(last.Add(2 * time.Second)))
	after := last.Add(time.Second).UTC().Format(http.TimeFormat)
	before := info.LastModified.Add(-time.Hour).UTC().Format(http.TimeFormat)
	const other = `"00000000000000000000000000000000"`

	// send sends method with header to key, through the door or straight
	// to versitygw, and returns the answer and its body.
	send := func(t *testing.T, straight bool, method, key string, header [][2]string) (*http.Response, []byte) {
		t.Helper()
		url := d.url
		if straight {
			url = sharedS3.Endpoint()
		}
		req, err := http.NewRequest(method, url+"/"+d.bucket+"/"+key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range header {
			req.Header.Set(f[0], f[1])
		}
		var resp *http.Response
		if straight {
			signRequest(t, req, sharedS3.AccessKey, sharedS3.SecretKey, nil)
			if resp, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
		} else {
			resp = d.rawRequest(t, readerKey, req, nil)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		for _, key := range []string{"cached", "plain"} {
			etag := etags[key]
			ok, okBody := send(t, false, method, key, nil)
			if ok.StatusCode != http.StatusOK {
				t.Fatalf("%s %s = %d; want 200", method, key, ok.StatusCode)
			}
			if key == "cached" && (ok.Header.Get("Cache-Control") != cacheControl || ok.Header.Get("Expires") != expires.Format(http.TimeFormat)) {
				t.Fatalf("%s %s 200: Cache-Control %q, Expires %q; want the stored ones", method, key, ok.Header.Get("Cache-Control"), ok.Header.Get("Expires"))
			}
			if method == http.MethodGet && string(okBody) != body {
				t.Fatalf("GET %s 200 body = %q; want %q", key, okBody, body)
			}
			tests := testenv.ConditionalReads(etag, other, before, after)
			for _, tt := range tests {
				t.Run(method+" "+key+" "+tt.Name, func(t *testing.T) {
					s3Resp, _ := send(t, true, method, key, tt.Header)
					if s3Resp.StatusCode != tt.Status {
						t.Fatalf("versitygw answers %d; the test wants %d", s3Resp.StatusCode, tt.Status)
					}
					resp, got := send(t, false, method, key, tt.Header)
					h := resp.Header
					if resp.StatusCode != tt.Status {
						t.Fatalf("status %d (%s); want %d, as versitygw answers", resp.StatusCode, got, tt.Status)
					}
					switch tt.Status {
					case http.StatusOK:
						for _, name := range []string{"Cache-Control", "Expires", "ETag"} {
							if h.Get(name) != ok.Header.Get(name) {
								t.Errorf("200 %s = %q; want %q", name, h.Get(name), ok.Header.Get(name))
							}
						}
					case http.StatusNotModified:
						if len(got) != 0 {
							t.Errorf("a 304 with a body: %q", got)
						}
						for _, name := range notModifiedRepeats {
							if name == "Date" {
								continue // the time of each answer
							}
							if g, w := h.Values(name), ok.Header.Values(name); strings.Join(g, "\n") != strings.Join(w, "\n") {
								t.Errorf("304 %s = %q; want %q, as the 200 carries it", name, g, w)
							}
						}
						if h.Get("Date") == "" {
							t.Errorf("a 304 without a Date")
						}
						for _, name := range objectOnlyFields {
							if v, ok := h[http.CanonicalHeaderKey(name)]; ok {
								t.Errorf("the 304 carries %s: %q", name, v)
							}
						}
					case http.StatusPreconditionFailed:
						for _, name := range append([]string{"ETag", "Last-Modified", "Cache-Control", "Expires"}, objectOnlyFields...) {
							v, ok := h[http.CanonicalHeaderKey(name)]
							if !ok {
								continue
							}
							// GET's XML error has a type and length of its own.
							if method == http.MethodGet && name == "Content-Type" && v[0] == "application/xml" {
								continue
							}
							if method == http.MethodGet && name == "Content-Length" && v[0] == strconv.Itoa(len(got)) {
								continue
							}
							t.Errorf("the 412 carries %s: %q", name, v)
						}
						if method == http.MethodHead {
							if len(got) != 0 {
								t.Errorf("a HEAD 412 with a body: %q", got)
							}
							return
						}
						var e struct{ Code string }
						if err := xml.Unmarshal(got, &e); err != nil || e.Code != "PreconditionFailed" || strings.Contains(string(got), body) {
							t.Errorf("412 body %q (%v); want S3's PreconditionFailed error, not the object", got, err)
						}
					}
				})
			}
		}
	}
}

// TestNotModifiedCarriesCacheControlOnGCS: a 304 of an object in a GCS
// bucket carries the Cache-Control that its 200 carries (GCS keeps no
// Expires), read by the door from the generation the 304 is about, and
// none of the object's other metadata.
func TestNotModifiedCarriesCacheControlOnGCS(t *testing.T) {
	ctx := context.Background()
	g := newGCSDoor(t, "gcs304door")
	d, bucket, gcsServer := g.door, g.bucket, g.gcs

	const cacheControl = "private, max-age=30"
	out, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("cache me"),
		Metadata:     map[string]string{"fence-token": "4", "colour": "blue"},
		CacheControl: aws.String(cacheControl), ContentType: aws.String("text/plain"), ContentLanguage: aws.String("en"),
	})
	if err != nil {
		t.Fatal(err)
	}
	etag := aws.ToString(out.ETag)
	attrs, err := gcsServer.Client(t).Bucket(bucket).Object("k").Attrs(ctx)
	if err != nil || attrs.CacheControl != cacheControl {
		t.Fatalf("stored in GCS: %+v, %v; want Cache-Control %q", attrs, err, cacheControl)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method, func(t *testing.T) {
			req, err := http.NewRequest(method, d.url+"/"+bucket+"/k", nil)
			if err != nil {
				t.Fatal(err)
			}
			ok := d.rawRequest(t, writerKey, req, nil)
			if ok.StatusCode != http.StatusOK || ok.Header.Get("Cache-Control") != cacheControl {
				t.Fatalf("200: %d, Cache-Control %q; want 200, %q", ok.StatusCode, ok.Header.Get("Cache-Control"), cacheControl)
			}
			req, err = http.NewRequest(method, d.url+"/"+bucket+"/k", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("If-None-Match", etag)
			resp := d.rawRequest(t, writerKey, req, nil)
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusNotModified || len(got) != 0 {
				t.Fatalf("If-None-Match %s: %d %q; want 304 without a body", etag, resp.StatusCode, got)
			}
			if g := resp.Header.Get("Cache-Control"); g != cacheControl {
				t.Errorf("304 Cache-Control = %q; want %q, as the 200 carries it", g, cacheControl)
			}
			if g := resp.Header.Get("ETag"); g != etag {
				t.Errorf("304 ETag = %q; want %q", g, etag)
			}
			for _, name := range append([]string{"Expires"}, objectOnlyFields...) {
				if v, ok := resp.Header[http.CanonicalHeaderKey(name)]; ok {
					t.Errorf("the 304 carries %s: %q", name, v)
				}
			}
		})
	}
}
