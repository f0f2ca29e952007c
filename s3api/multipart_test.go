//lint:file-ignore SA1019 manager.Uploader is deprecated for transfermanager, but it is what most programs written against aws-sdk-go-v2 use today, so the door must serve it

package s3api_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// randomBytes returns n bytes of a seeded generator.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// uploadsLeft lists the bucket's multipart uploads with minio-go, an
// independent client.
func (d *door) uploadsLeft(tb testing.TB) int {
	tb.Helper()
	n := 0
	for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, "", true) {
		if u.Err != nil {
			tb.Fatalf("list uploads: %v", u.Err)
		}
		n++
	}
	return n
}

// TestManagerUploaderInParts: aws-sdk-go-v2's manager.Uploader, with its
// defaults (checksums on, parts of 5 MiB, 5 at once), uploads 23 MiB
// through the door as a fenced multipart upload: the bytes land exactly,
// with the token recorded; an uploader with a stale token is refused at
// CreateMultipartUpload, and nothing is left behind.
func TestManagerUploaderInParts(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	body := randomBytes(23<<20, 1)
	up := manager.NewUploader(d.client(writerKey), func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	out, err := up.Upload(ctx, &s3.PutObjectInput{
		Bucket:   aws.String(d.bucket),
		Key:      aws.String("big"),
		Body:     bytes.NewReader(body),
		Metadata: map[string]string{"fence-token": "40"},
	})
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if out.UploadID == "" || len(out.CompletedParts) != 5 {
		t.Fatalf("Upload = %+v; want a multipart upload of 5 parts", out)
	}
	got, token, ok := d.stored(t, "big")
	if !ok || got != string(body) || token != "40" {
		t.Fatalf("stored %d bytes (equal %v), token %q; want the 23 MiB, token 40", len(got), got == string(body), token)
	}
	if hwm := d.mark(t, "big"); hwm != 40 {
		t.Fatalf("mark = %d; want 40", hwm)
	}
	_, err = up.Upload(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String("big"), Body: bytes.NewReader(body),
		Metadata: map[string]string{"fence-token": "39"},
	})
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}
}

// TestMultipartStaleAtCompletion: the S3 operations one by one. An
// upload whose token another writer passed after its parts were sent is
// refused at CompleteMultipartUpload (StaleFenceToken) and aborted, and
// the object keeps the other writer's bytes; parts sent after the mark
// rose are refused at once. The listings and the abort pass through.
func TestMultipartStaleAtCompletion(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	create, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "50"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	part := randomBytes(5<<20, 2)
	p1, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	parts, err := w.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId})
	if err != nil || len(parts.Parts) != 1 || aws.ToInt64(parts.Parts[0].Size) != 5<<20 {
		t.Fatalf("ListParts = %+v, %v; want the one part", parts, err)
	}
	uploads, err := w.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(d.bucket)})
	// It shows the store's id, of which the id the creator was answered
	// is the capability: the store's id, ".", and a secret.
	if err != nil || len(uploads.Uploads) != 1 || !strings.HasPrefix(aws.ToString(create.UploadId), aws.ToString(uploads.Uploads[0].UploadId)+".") {
		t.Fatalf("ListMultipartUploads = %+v, %v; want the one upload", uploads, err)
	}
	// Another writer, with a larger token, writes the object.
	if _, err := d.put(t, w, "k", 51, "bytes of 51"); err != nil {
		t.Fatal(err)
	}
	_, err = w.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag, ChecksumCRC32: p1.ChecksumCRC32}}},
	})
	resp := wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	if resp.Header.Get("X-Fence-High-Water-Mark") != "51" {
		t.Fatalf("X-Fence-High-Water-Mark = %q; want 51", resp.Header.Get("X-Fence-High-Water-Mark"))
	}
	if got, token, _ := d.stored(t, "k"); got != "bytes of 51" || token != "51" {
		t.Fatalf("object = %q, token %q; want 51's", got, token)
	}
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want the stale upload aborted", n)
	}
	// A part sent late to the upload the gateway aborted as stale is
	// refused as stale, not as an unknown upload.
	_, err = w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId, PartNumber: aws.Int32(2), Body: bytes.NewReader(part)})
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")

	// A part of an upload that went stale is refused at once, and the
	// upload aborted: nothing but the abort reaches S3.
	create, err = w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "52"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.put(t, w, "k", 53, "bytes of 53"); err != nil {
		t.Fatal(err)
	}
	d.s3.Reset()
	_, err = w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	if n := d.s3.Count(); n != 1 {
		t.Fatalf("%d S3 requests for a stale part; want 1 (the abort)", n)
	}
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}

	// Abort of a live upload; the reader may not create one.
	create, err = w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "53"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId}); err != nil {
		t.Fatalf("AbortMultipartUpload: %v", err)
	}
	_, err = d.client(readerKey).CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "60"},
	})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	_, err = w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	wantAPIError(t, err, http.StatusPreconditionRequired, "MissingFenceToken")
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}
}

// TestCompleteMalformedParts: a CompleteMultipartUpload document without
// parts, or with a part that lacks its ETag or its number, is S3's
// 400 MalformedXML, before the gateway looks at the upload; the upload
// stays, to be completed with a whole document.
func TestCompleteMalformedParts(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	create, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"),
		Metadata: map[string]string{"fence-token": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("only part")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		parts []types.CompletedPart
	}{
		{"no parts", []types.CompletedPart{}},
		{"a part without its ETag", []types.CompletedPart{{PartNumber: aws.Int32(1)}}},
		{"a part without its number", []types.CompletedPart{{ETag: part.ETag}}},
	} {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: create.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: tc.parts}})
		if err == nil {
			t.Errorf("%s: completed; want 400 MalformedXML", tc.name)
			continue
		}
		wantAPIError(t, err, http.StatusBadRequest, "MalformedXML")
	}
	if _, _, ok := d.stored(t, "mp"); ok {
		t.Fatal("an object was written")
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatalf("the whole document: %v", err)
	}
	if body, token, _ := d.stored(t, "mp"); body != "only part" || token != "3" {
		t.Errorf("stored %q, token %q; want the part, token 3", body, token)
	}
}
