package s3api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
)

// notModifiedHeaders are the headers a 304 of the door may carry: what
// AWS answers (ETag, Last-Modified, its request id), the door's own ids
// and the recorded token, and the two that RFC 9110 section 15.4.5 lets
// a 304 repeat (Cache-Control, Expires). Anything else is the 200's
// (Content-Type, Content-Length, user metadata) or the upstream's.
var notModifiedHeaders = map[string]bool{
	"Etag": true, "Last-Modified": true, "Date": true, "X-Amz-Request-Id": true, "X-Request-Id": true,
	"X-Fence-Token": true, "X-Amz-Meta-Fence-Token": true, "Cache-Control": true, "Expires": true,
}

// TestConditionalReadNotModified: a conditional GET or HEAD through the
// door that S3 answers 304 gets a 304 with the object's ETag and
// Last-Modified (as AWS answers it), its recorded token, no body, and
// no header of the upstream's answer or of a 200: for If-None-Match,
// which versitygw answers 304 itself, and for If-Modified-Since, whose
// 304 versitygw sends without any of those headers.
func TestConditionalReadNotModified(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	out, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String("cached"), Body: strings.NewReader("cache me"),
		Metadata:     map[string]string{"fence-token": "6", "mtime": "1600000000"},
		CacheControl: aws.String("max-age=60"), ContentType: aws.String("text/plain"),
	})
	if err != nil {
		t.Fatal(err)
	}
	etag := aws.ToString(out.ETag)
	info, err := d.minio.StatObject(ctx, d.bucket, "cached", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastModified := info.LastModified.UTC().Format(http.TimeFormat)
	// "Not modified since" needs a date after the last modification that
	// is already past: S3 servers ignore dates in the future, and
	// versitygw compares the second of the last modification with its
	// fraction.
	time.Sleep(time.Until(info.LastModified.Add(2 * time.Second)))
	after := info.LastModified.Add(time.Second).UTC().Format(http.TimeFormat)

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		for _, cond := range [][2]string{{"If-None-Match", etag}, {"If-None-Match", "*"}, {"If-Modified-Since", after}} {
			t.Run(method+" "+cond[0]+" "+cond[1], func(t *testing.T) {
				req, err := http.NewRequest(method, d.url+"/"+d.bucket+"/cached", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set(cond[0], cond[1])
				resp := d.rawRequest(t, readerKey, req, nil)
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusNotModified {
					t.Fatalf("status %d (%s); want 304", resp.StatusCode, body)
				}
				if len(body) != 0 {
					t.Errorf("a 304 with a body of %d bytes: %q", len(body), body)
				}
				h := resp.Header
				if got := h.Get("ETag"); got != etag {
					t.Errorf("ETag = %q; want %q", got, etag)
				}
				if got := h.Get("Last-Modified"); got != lastModified {
					t.Errorf("Last-Modified = %q; want %q, as S3 recorded it", got, lastModified)
				}
				if got := h.Get("X-Fence-Token"); got != "6" {
					t.Errorf("X-Fence-Token = %q; want 6, the token the version was written with", got)
				}
				if id := h.Get("X-Amz-Request-Id"); id == "" || id != h.Get("X-Request-Id") {
					t.Errorf("X-Amz-Request-Id = %q, X-Request-Id = %q; want the door's own id in both", id, h.Get("X-Request-Id"))
				}
				for name := range h {
					if !notModifiedHeaders[name] {
						t.Errorf("the 304 carries %s: %q", name, h.Values(name))
					}
				}
			})
		}
	}
}
