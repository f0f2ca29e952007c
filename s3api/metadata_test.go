package s3api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
)

// expires is the Expires of the metadata tests, an HTTP date.
var expires = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// storedMetadata is what versitygw keeps of an object besides its bytes,
// read with minio-go (not through the door): user metadata by lower-case
// name, and the standard headers.
type storedMetadata struct {
	user                                                             map[string]string
	cacheControl, disposition, encoding, language, expires, mimeType string
}

func (d *door) storedMetadata(tb testing.TB, key string) storedMetadata {
	tb.Helper()
	info, err := d.minio.StatObject(context.Background(), d.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		tb.Fatalf("stat %s: %v", key, err)
	}
	m := storedMetadata{
		user:         map[string]string{},
		cacheControl: info.Metadata.Get("Cache-Control"),
		disposition:  info.Metadata.Get("Content-Disposition"),
		encoding:     info.Metadata.Get("Content-Encoding"),
		language:     info.Metadata.Get("Content-Language"),
		mimeType:     info.ContentType,
	}
	if !info.Expires.IsZero() { // minio-go parses Expires out of the headers
		m.expires = info.Expires.UTC().Format(http.TimeFormat)
	}
	for k, v := range info.UserMetadata {
		m.user[strings.ToLower(k)] = v
	}
	return m
}

// TestPutObjectKeepsMetadata: aws-sdk-go-v2's PutObject with user
// metadata (rclone's mtime among it) and the standard headers stores them
// all, as minio-go reads them from versitygw; HEAD and GET through the
// door answer them as S3 does, and GET returns the bytes as stored (a
// Content-Encoding: gzip object is not decoded on the way).
func TestPutObjectKeepsMetadata(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String("doc.txt.gz"), Body: strings.NewReader("not really gzip"),
		Metadata:     map[string]string{"fence-token": "5", "mtime": "1700000000.123456789", "Owner": "=?UTF-8?B?w6lsaXNl?="},
		CacheControl: aws.String("max-age=60"), ContentDisposition: aws.String(`attachment; filename="doc.txt"`),
		ContentEncoding: aws.String("gzip"), ContentLanguage: aws.String("fr"), Expires: aws.Time(expires),
		ContentType: aws.String("text/plain"),
	})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	got := d.storedMetadata(t, "doc.txt.gz")
	// minio-go decodes RFC 2047 words; the door answers them as stored.
	want := storedMetadata{
		user:         map[string]string{"fence-token": "5", "mtime": "1700000000.123456789", "owner": "élise"},
		cacheControl: "max-age=60", disposition: `attachment; filename="doc.txt"`, encoding: "gzip", language: "fr",
		expires: expires.Format(http.TimeFormat), mimeType: "text/plain",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored metadata = %+v;\nwant %+v", got, want)
	}

	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("doc.txt.gz")})
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	want.user["owner"] = "=?UTF-8?B?w6lsaXNl?="
	if fmt.Sprint(head.Metadata) != fmt.Sprint(want.user) || aws.ToString(head.CacheControl) != want.cacheControl ||
		aws.ToString(head.ContentDisposition) != want.disposition || aws.ToString(head.ContentEncoding) != want.encoding ||
		aws.ToString(head.ContentLanguage) != want.language || aws.ToString(head.ExpiresString) != want.expires {
		t.Fatalf("HEAD through the door: metadata %v, Cache-Control %q, Content-Disposition %q, Content-Encoding %q, Content-Language %q, Expires %q; want %+v",
			head.Metadata, aws.ToString(head.CacheControl), aws.ToString(head.ContentDisposition), aws.ToString(head.ContentEncoding),
			aws.ToString(head.ContentLanguage), aws.ToString(head.ExpiresString), want)
	}
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("doc.txt.gz")})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	body, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(body) != "not really gzip" || get.Metadata["mtime"] != want.user["mtime"] || aws.ToString(get.ContentEncoding) != "gzip" ||
		aws.ToString(get.CacheControl) != want.cacheControl {
		t.Fatalf("GET through the door = %q, metadata %v, Content-Encoding %q, Cache-Control %q; want the stored bytes and metadata",
			body, get.Metadata, aws.ToString(get.ContentEncoding), aws.ToString(get.CacheControl))
	}
}

// TestCopyObjectMetadataDirective: CopyObject copies the source's
// metadata and content type (x-amz-metadata-directive COPY, the default),
// or takes the request's and drops the source's (REPLACE), as S3 does;
// the token recorded is the copy's in both.
func TestCopyObjectMetadataDirective(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String("src"), Body: strings.NewReader("source"),
		Metadata:     map[string]string{"fence-token": "3", "mtime": "1600000000"},
		CacheControl: aws.String("no-cache"), ContentType: aws.String("text/csv"),
	})
	if err != nil {
		t.Fatalf("put source: %v", err)
	}
	copySource := aws.String(d.bucket + "/src")
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("copied"), CopySource: copySource,
		Metadata: map[string]string{"fence-token": "8", "ignored": "with COPY"}}); err != nil {
		t.Fatalf("copy: %v", err)
	}
	got := d.storedMetadata(t, "copied")
	if fmt.Sprint(got.user) != fmt.Sprint(map[string]string{"fence-token": "8", "mtime": "1600000000"}) || got.cacheControl != "no-cache" || got.mimeType != "text/csv" {
		t.Fatalf("COPY stored %+v; want the source's metadata, Cache-Control and content type, with token 8", got)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("replaced"), CopySource: copySource,
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"fence-token": "9", "mtime": "1700000000"},
		ContentLanguage: aws.String("de"), ContentType: aws.String("text/plain")}); err != nil {
		t.Fatalf("copy REPLACE: %v", err)
	}
	got = d.storedMetadata(t, "replaced")
	if fmt.Sprint(got.user) != fmt.Sprint(map[string]string{"fence-token": "9", "mtime": "1700000000"}) || got.cacheControl != "" || got.language != "de" || got.mimeType != "text/plain" {
		t.Fatalf("REPLACE stored %+v; want the request's metadata only", got)
	}
}

// TestMultipartKeepsMetadata: the metadata of CreateMultipartUpload is on
// the object that the upload completes.
func TestMultipartKeepsMetadata(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	key := aws.String("parts")
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: key,
		Metadata: map[string]string{"fence-token": "4", "mtime": "1650000000"}, ContentDisposition: aws.String("inline")})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("one part")})
	if err != nil {
		t.Fatalf("part: %v", err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(d.bucket), Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	got := d.storedMetadata(t, "parts")
	if fmt.Sprint(got.user) != fmt.Sprint(map[string]string{"fence-token": "4", "mtime": "1650000000"}) || got.disposition != "inline" {
		t.Fatalf("completed object's metadata = %+v; want CreateMultipartUpload's", got)
	}
}

// TestMetadataLimits: user metadata of exactly 2 KiB (names and values,
// the fence-token entry included) is stored; one byte more is 400
// MetadataTooLarge for PutObject, CopyObject REPLACE and
// CreateMultipartUpload, with no request to S3 and no mark raised. A value
// with CR/LF (which a query parameter can carry), one with bytes beyond
// ASCII, a name that is not an HTTP token and an Expires that is no date
// are 400 InvalidArgument, and nothing is stored either.
func TestMetadataLimits(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	// "fence-token" + "7" is 12 bytes, "big" 3: a value of 2033 fills 2 KiB.
	atLimit := strings.Repeat("v", 2048-12-3)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("limit"), Body: strings.NewReader("x"),
		Metadata: map[string]string{"fence-token": "7", "big": atLimit}}); err != nil {
		t.Fatalf("put of 2 KiB of metadata: %v", err)
	}
	if got := d.storedMetadata(t, "limit").user["big"]; got != atLimit {
		t.Fatalf("stored big = %d bytes; want %d", len(got), len(atLimit))
	}
	over := map[string]string{"fence-token": "7", "big": atLimit + "v"}
	refusals := []struct {
		name string
		send func() error
	}{
		{"PutObject", func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Body: strings.NewReader("x"), Metadata: over})
			return err
		}},
		{"CopyObject", func() error {
			_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), CopySource: aws.String(d.bucket + "/limit"),
				MetadataDirective: types.MetadataDirectiveReplace, Metadata: over})
			return err
		}},
		{"CreateMultipartUpload", func() error {
			_, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: over})
			return err
		}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			d.s3.Reset()
			wantAPIError(t, tc.send(), http.StatusBadRequest, "MetadataTooLarge")
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
			if hwm := d.mark(t, "k"); hwm != 0 {
				t.Errorf("mark of k = %v; want none", hwm)
			}
		})
	}

	raw := []struct {
		name   string
		query  string
		header [2]string
	}{
		{name: "CR LF in a query value", query: "x-amz-meta-evil=" + url.QueryEscape("a\r\nX-Amz-Meta-Fence-Token: 99")},
		{name: "LF in a query value", query: "x-amz-meta-evil=a%0Ab"},
		{name: "NUL in a query value", query: "x-amz-meta-evil=a%00b"},
		{name: "name not a token", query: url.QueryEscape("x-amz-meta-a b") + "=v"},
		{name: "non-ASCII value", header: [2]string{"X-Amz-Meta-Owner", "élise"}},
		{name: "non-ASCII Content-Disposition", header: [2]string{"Content-Disposition", "attachment; filename=\"é.txt\""}},
		{name: "Expires not a date", header: [2]string{"Expires", "tomorrow"}},
		{name: "same name in header and query", query: "x-amz-meta-mtime=1", header: [2]string{"X-Amz-Meta-Mtime", "2"}},
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			u := d.url + "/" + d.bucket + "/raw"
			if tc.query != "" {
				u += "?" + tc.query
			}
			req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader([]byte("raw")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Meta-Fence-Token", "7")
			if tc.header[0] != "" {
				req.Header.Set(tc.header[0], tc.header[1])
			}
			d.s3.Reset()
			resp := d.rawRequest(t, writerKey, req, []byte("raw"))
			if e := readS3Error(t, resp); resp.StatusCode != http.StatusBadRequest || e.Code != "InvalidArgument" {
				t.Fatalf("status %d %s (%s); want 400 InvalidArgument", resp.StatusCode, e.Code, e.Message)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
			if _, _, ok := d.stored(t, "raw"); ok {
				t.Errorf("the object was stored")
			}
		})
	}
	if hwm := d.mark(t, "raw"); hwm != 0 {
		t.Errorf("mark of raw = %v; want none", hwm)
	}
}
