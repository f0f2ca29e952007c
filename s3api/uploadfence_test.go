package s3api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
)

// listedUploadID returns the id of key's one upload in progress as
// ListMultipartUploads shows it to c.
func (d *door) listedUploadID(tb testing.TB, c *s3.Client, key string) string {
	tb.Helper()
	out, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(d.bucket), Prefix: aws.String(key)})
	if err != nil || len(out.Uploads) != 1 {
		tb.Fatalf("ListMultipartUploads(%q) = %+v, %v; want one upload", key, out, err)
	}
	return aws.ToString(out.Uploads[0].UploadId)
}

// createUpload starts an upload of key with token through c and returns
// the id CreateMultipartUpload answered.
func (d *door) createUpload(tb testing.TB, c *s3.Client, key string, token api.Token) string {
	tb.Helper()
	out, err := c.CreateMultipartUpload(context.Background(), &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), Metadata: map[string]string{"fence-token": token.String()},
	})
	if err != nil {
		tb.Fatalf("CreateMultipartUpload(%s, %d): %v", key, token, err)
	}
	return aws.ToString(out.UploadId)
}

// uploadPart sends part number of key's upload id through c.
func (d *door) uploadPart(c *s3.Client, key, id string, number int32, body []byte) (types.CompletedPart, error) {
	out, err := c.UploadPart(context.Background(), &s3.UploadPartInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: aws.String(id), PartNumber: aws.Int32(number), Body: bytes.NewReader(body),
	})
	if err != nil {
		return types.CompletedPart{}, err
	}
	return types.CompletedPart{PartNumber: aws.Int32(number), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}, nil
}

// completeUpload completes key's upload id of parts through c.
func (d *door) completeUpload(c *s3.Client, key, id string, parts ...types.CompletedPart) error {
	_, err := c.CompleteMultipartUpload(context.Background(), &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}

// abortUpload aborts key's upload id through c.
func (d *door) abortUpload(c *s3.Client, key, id string) error {
	_, err := c.AbortMultipartUpload(context.Background(), &s3.AbortMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: aws.String(id)})
	return err
}

// TestAbortOfAnotherKeysUpload: the logs identity may write only under
// logs/. An abort of logs/mine naming the upload of secret (by the id
// listed to readers of the bucket, or even by the id its creator was
// answered), with or without a token, is NoSuchUpload and unbinds
// nothing: the owner's completion still lands, with its bytes and token.
func TestAbortOfAnotherKeysUpload(t *testing.T) {
	d := newDoor(t, doorOptions{})
	w := d.client(writerKey)
	created := d.createUpload(t, w, "secret", 5)
	part := randomBytes(5<<20, 3)
	p1, err := d.uploadPart(w, "secret", created, 1, part)
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	listed := d.listedUploadID(t, d.client(readerKey), "secret")
	for _, tt := range []struct {
		name, id string
		token    string // X-Fence-Token, "" for none
	}{
		{"listed id", listed, ""},
		{"listed id with a large token", listed, "100"},
		{"the creator's id", created, ""},
		{"the creator's id with the upload's token", created, "5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := d.client(logsKey)
			if tt.token != "" {
				c = d.client(logsKey, withHeader(api.HeaderFenceToken, tt.token))
			}
			wantAPIError(t, d.abortUpload(c, "logs/mine", tt.id), http.StatusNotFound, "NoSuchUpload")
		})
	}
	if err := d.completeUpload(w, "secret", created, p1); err != nil {
		t.Fatalf("the owner's CompleteMultipartUpload after the aborts of logs/mine: %v; want it to land", err)
	}
	if got, token, ok := d.stored(t, "secret"); !ok || got != string(part) || token != "5" {
		t.Fatalf("secret = %d bytes (its part: %v), token %q; want the owner's part, token 5", len(got), got == string(part), token)
	}
}

// TestUploadFencedThroughout: the holder of token 20 creates an upload of
// k (the mark was 10, the stale holder's) and sends a part with the id
// CreateMultipartUpload answered it, with no token, as every S3 client
// does. Requests that name the upload by the id ListMultipartUploads
// shows need the upload's token; a stale holder's (10) is refused 409, no
// token 428, another token 400; a token that differs from the upload's
// is refused on the creator's id too. None of them changes the upload:
// the holder then completes it with its two parts, and the object read
// back is exactly those, with token 20. A newer holder may abort it by
// the listed id with its larger token.
func TestUploadFencedThroughout(t *testing.T) {
	d := newDoor(t, doorOptions{})
	const key = "k"
	w := d.client(writerKey)
	if _, err := d.put(t, w, key, 10, "bytes of 10"); err != nil {
		t.Fatal(err)
	}
	created := d.createUpload(t, w, key, 20)
	part1, part2 := randomBytes(5<<20, 4), []byte("the holder's last part")
	p1, err := d.uploadPart(w, key, created, 1, part1)
	if err != nil {
		t.Fatalf("UploadPart with the created id and no token: %v", err)
	}
	listed := d.listedUploadID(t, w, key)
	if listed == created {
		t.Errorf("ListMultipartUploads shows %q, the id CreateMultipartUpload answered its creator; want the store's id", listed)
	}
	stranger := []byte("a part not of the holder")

	type op func(c *s3.Client, id string) error
	part := func(c *s3.Client, id string) error { _, err := d.uploadPart(c, key, id, 3, stranger); return err }
	complete := func(c *s3.Client, id string) error { return d.completeUpload(c, key, id, p1) }
	abort := func(c *s3.Client, id string) error { return d.abortUpload(c, key, id) }
	tests := []struct {
		name   string
		op     op
		id     string
		token  string // X-Fence-Token, "" for none
		status int
		code   string
	}{
		{"stale part by listed id", part, listed, "10", http.StatusConflict, "StaleFenceToken"},
		{"stale completion by listed id", complete, listed, "10", http.StatusConflict, "StaleFenceToken"},
		{"stale abort by listed id", abort, listed, "10", http.StatusConflict, "StaleFenceToken"},
		{"tokenless part by listed id", part, listed, "", http.StatusPreconditionRequired, "MissingFenceToken"},
		{"tokenless completion by listed id", complete, listed, "", http.StatusPreconditionRequired, "MissingFenceToken"},
		{"tokenless abort by listed id", abort, listed, "", http.StatusPreconditionRequired, "MissingFenceToken"},
		{"larger token on a part by listed id", part, listed, "25", http.StatusBadRequest, "InvalidRequest"},
		{"larger token on a completion by listed id", complete, listed, "25", http.StatusBadRequest, "InvalidRequest"},
		{"stale token on a part by created id", part, created, "10", http.StatusConflict, "StaleFenceToken"},
		{"stale token on a completion by created id", complete, created, "10", http.StatusConflict, "StaleFenceToken"},
		{"stale token on an abort by created id", abort, created, "10", http.StatusConflict, "StaleFenceToken"},
		{"larger token on a part by created id", part, created, "25", http.StatusBadRequest, "InvalidRequest"},
		{"larger token on a completion by created id", complete, created, "25", http.StatusBadRequest, "InvalidRequest"},
		{"created id with another secret", part, listed + ".AAAAAAAAAAAAAAAAAAAAAAAAAA", "", http.StatusNotFound, "NoSuchUpload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := w
			if tt.token != "" {
				c = d.client(writerKey, withHeader(api.HeaderFenceToken, tt.token))
			}
			wantAPIError(t, tt.op(c, tt.id), tt.status, tt.code)
		})
	}

	// The listed id with the upload's own token acts as its creator.
	p2, err := d.uploadPart(d.client(writerKey, withHeader(api.HeaderFenceToken, "20")), key, listed, 2, part2)
	if err != nil {
		t.Fatalf("UploadPart by listed id with the upload's token: %v", err)
	}
	if err := d.completeUpload(w, key, created, p1, p2); err != nil {
		t.Fatalf("CompleteMultipartUpload by created id, no token: %v", err)
	}
	got, token, ok := d.stored(t, key)
	if want := string(part1) + string(part2); !ok || got != want || token != "20" {
		t.Fatalf("object = %d bytes (the holder's two parts: %v), token %q; want exactly the two parts, token 20", len(got), got == want, token)
	}

	// A newer holder clears an older holder's upload by the listed id.
	d.createUpload(t, w, key, 30)
	listed = d.listedUploadID(t, w, key)
	if err := d.abortUpload(d.client(writerKey, withHeader(api.HeaderFenceToken, "40")), key, listed); err != nil {
		t.Fatalf("AbortMultipartUpload by listed id with a larger token: %v", err)
	}
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}
	if got, _, _ := d.stored(t, key); got != string(part1)+string(part2) {
		t.Fatalf("object changed to %d bytes; want the holder's", len(got))
	}
}

// TestListMultipartUploadsPrefixSegments: a ListMultipartUploads prefix
// with a "." or ".." segment is refused as a ListObjects prefix is: the
// logs identity's grant on logs/ does not reach logs/../secret.
func TestListMultipartUploadsPrefixSegments(t *testing.T) {
	d := newDoor(t, doorOptions{})
	d.createUpload(t, d.client(writerKey), "secret", 3)
	for _, prefix := range []string{"logs/../secret", "logs/..", "logs/./x", "logs/../"} {
		t.Run(prefix, func(t *testing.T) {
			req := signedRequest{method: "GET", target: "/" + d.bucket + "?uploads&prefix=" + url.QueryEscape(prefix)}.build(t, d, logsKey)
			status, e := d.send(t, req)
			if status != http.StatusBadRequest || e.Code != "InvalidArgument" {
				t.Fatalf("ListMultipartUploads prefix %q = %d %s; want 400 InvalidArgument", prefix, status, e.Code)
			}
			if !strings.Contains(e.Message, "..") && !strings.Contains(e.Message, `"."`) {
				t.Errorf("message %q does not say which segment", e.Message)
			}
		})
	}
}
