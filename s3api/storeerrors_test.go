package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// upstreamText are words of the text of an error that aws-sdk-go-v2 (the
// gateway's client of S3) reports, which names the store's request and
// host ids: none of it may reach the door's clients.
var upstreamText = []string{"operation error", "https response error", "RequestID", "HostID", "api error", "StatusCode"}

// wantStoreCode fails unless err is the S3 error code with status, and its
// message is S3's own for that code, without the upstream client's text.
func wantStoreCode(t *testing.T, what string, err error, status int, code, message string) {
	t.Helper()
	wantAPIError(t, err, status, code)
	var apiErr smithy.APIError
	errors.As(err, &apiErr)
	for _, word := range upstreamText {
		if strings.Contains(apiErr.ErrorMessage(), word) {
			t.Errorf("%s: message %q holds the upstream client's text (%q)", what, apiErr.ErrorMessage(), word)
		}
	}
	if message != "" && apiErr.ErrorMessage() != message {
		t.Errorf("%s: message %q; want S3's %q", what, apiErr.ErrorMessage(), message)
	}
}

// TestStoreErrorCodesKept: errors that versitygw answers a request the
// door passed on reach aws-sdk-go-v2 with S3's code and status, and S3's
// message for the code rather than the gateway's client's text (with the
// store's request id): a completion naming a part by a wrong ETag is 400
// InvalidPart, one with a part under 5 MiB before the last 400
// EntityTooSmall,
// and a PUT to a bucket that does not exist 404 NoSuchBucket.
func TestStoreErrorCodesKept(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	create, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "5"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	// Parts of 5 MiB, 1 KiB and 1 KiB: 1 and 3 make an object, 1, 2 and
	// 3 do not (2 is under 5 MiB and not the last).
	var parts []types.CompletedPart
	for n, size := range map[int32]int{1: 5 << 20, 2: 1 << 10, 3: 1 << 10} {
		out, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(randomBytes(size, byte(n)))})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	complete := func(parts []types.CompletedPart) error {
		_, err := w.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		return err
	}
	wrong := []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"0123456789abcdef0123456789abcdef"`)}, parts[2]}
	wantStoreCode(t, "completion with a wrong ETag", complete(wrong), http.StatusBadRequest, "InvalidPart",
		"One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.")
	wantStoreCode(t, "completion with a first part of 1 KiB", complete(parts), http.StatusBadRequest, "EntityTooSmall",
		"Your proposed upload is smaller than the minimum allowed object size.")
	if _, _, ok := d.stored(t, "k"); ok {
		t.Errorf("versitygw holds k after two refused completions")
	}

	_, err = w.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket + "-missing"), Key: aws.String("k"), Body: strings.NewReader("x"),
		Metadata: map[string]string{"fence-token": "5"},
	})
	wantStoreCode(t, "PUT to a missing bucket", err, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
	_, err = w.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket + "-missing"), Key: aws.String("k")})
	wantStoreCode(t, "GET from a missing bucket", err, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")

	// The body itself, as sent.
	req, err := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"-missing/k", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Meta-Fence-Token", "5")
	resp := d.rawRequest(t, writerKey, req, []byte("x"))
	body := readS3Error(t, resp)
	if resp.StatusCode != http.StatusNotFound || body.Code != "NoSuchBucket" {
		t.Errorf("raw PUT to a missing bucket: %d %s; want 404 NoSuchBucket", resp.StatusCode, body.Code)
	}
	for _, word := range upstreamText {
		if strings.Contains(body.Message, word) || strings.Contains(body.Resource, word) {
			t.Errorf("raw PUT to a missing bucket: body %+v holds the upstream client's text (%q)", body, word)
		}
	}
}

// TestRepeatedCompletion: a CompleteMultipartUpload sent again after it
// landed (its answer lost, say) is answered as S3 answers it: 200 with
// the same ETag, and nothing reaches S3. Sent again after a newer holder
// wrote the key, it is answered the same, and writes nothing: the object
// keeps the newer holder's bytes. A repeat naming other parts is
// NoSuchUpload.
func TestRepeatedCompletion(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	create, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "70"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	part := randomBytes(5<<20, 3)
	var parts []types.CompletedPart
	for n := int32(1); n <= 2; n++ {
		out, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(part)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
	}
	complete := func(parts []types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
		return w.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
	}
	first, err := complete(parts)
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	d.s3.Reset()
	again, err := complete(parts)
	if err != nil || aws.ToString(again.ETag) != aws.ToString(first.ETag) {
		t.Fatalf("CompleteMultipartUpload again = %v, %v; want 200 with ETag %s", again, err, aws.ToString(first.ETag))
	}
	if n := d.s3.CountMethod(http.MethodPost); n != 0 {
		t.Errorf("%d completions reached S3 for the repeat; want none", n)
	}

	if _, err := d.put(t, w, "k", 71, "bytes of 71"); err != nil {
		t.Fatal(err)
	}
	d.s3.Reset()
	stale, err := complete(parts)
	if err != nil || aws.ToString(stale.ETag) != aws.ToString(first.ETag) {
		t.Fatalf("CompleteMultipartUpload again after token 71 wrote = %v, %v; want the first answer, ETag %s", stale, err, aws.ToString(first.ETag))
	}
	if n := d.s3.CountMethod(http.MethodPost) + d.s3.CountMethod(http.MethodPut); n != 0 {
		t.Errorf("%d writes reached S3 for the repeat after token 71 wrote; want none", n)
	}
	if got, token, _ := d.stored(t, "k"); got != "bytes of 71" || token != "71" {
		t.Errorf("object = %d bytes, token %q; want 71's", len(got), token)
	}
	_, err = complete(parts[:1])
	wantAPIError(t, err, http.StatusNotFound, "NoSuchUpload")
}

// TestAbortAfterStaleAbort: once the gateway aborted an upload whose
// token went stale (a part refused 409), the client's own abort is 204,
// as the AWS SDK for JavaScript's Upload sends it before it reports the
// 409; a further part, and the completion, are 409 StaleFenceToken.
func TestAbortAfterStaleAbort(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	create, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), Metadata: map[string]string{"fence-token": "80"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	part := randomBytes(5<<20, 4)
	p1, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	if err != nil {
		t.Fatalf("UploadPart 1: %v", err)
	}
	if _, err := d.put(t, w, "k", 81, "bytes of 81"); err != nil {
		t.Fatal(err)
	}
	uploadPart := func(n int32) error {
		_, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(part)})
		return err
	}
	wantAPIError(t, uploadPart(2), http.StatusConflict, "StaleFenceToken")
	if n := d.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want the stale upload aborted", n)
	}
	if _, err := w.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId}); err != nil {
		t.Errorf("AbortMultipartUpload of the upload the gateway aborted: %v; want 204", err)
	}
	wantAPIError(t, uploadPart(3), http.StatusConflict, "StaleFenceToken")
	_, err = w.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("k"), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag}}},
	})
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	if got, token, _ := d.stored(t, "k"); got != "bytes of 81" || token != "81" {
		t.Errorf("object = %q, token %q; want 81's", got, token)
	}
}

// tokenTransport adds X-Amz-Meta-Fence-Token to the aborts minio-go sends
// and signs them again, as minio-go has no way to add a header to
// RemoveIncompleteUpload: an abort by the store's id carries a token.
type tokenTransport struct {
	tb     testing.TB
	base   http.RoundTripper
	token  string
	secret string
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete && req.URL.Query().Has("uploadId") {
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
		req.Header.Set("X-Amz-Meta-Fence-Token", t.token)
		signRequest(t.tb, req, writerKey, t.secret, nil)
	}
	return t.base.RoundTrip(req)
}

// TestMinioIncompleteUploads: minio-go's ListIncompleteUploads (which
// always sends delimiter, empty when recursive) lists an incomplete
// upload through the door, and its RemoveIncompleteUpload removes it,
// its abort carrying the upload's token: versitygw then holds none.
// Without a token the abort by the store's id is 428 MissingFenceToken.
func TestMinioIncompleteUploads(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	for _, key := range []string{"dir/a", "dir/sub/b"} {
		if _, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: aws.String(d.bucket), Key: aws.String(key), Metadata: map[string]string{"fence-token": "9"},
		}); err != nil {
			t.Fatalf("CreateMultipartUpload %s: %v", key, err)
		}
	}
	newMinio := func(base http.RoundTripper) *minio.Client {
		c, err := minio.New(strings.TrimPrefix(d.url, "https://"), &minio.Options{
			Creds: credentials.NewStaticV4(writerKey, d.keys[writerKey][0], ""), Secure: true, Region: "us-east-1",
			BucketLookup: minio.BucketLookupPath, Transport: base,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mc := newMinio(d.srv.Client().Transport)
	list := func(prefix string, recursive bool) []string {
		var keys []string
		for u := range mc.ListIncompleteUploads(ctx, d.bucket, prefix, recursive) {
			if u.Err != nil {
				t.Fatalf("ListIncompleteUploads(%q, recursive %v): %v", prefix, recursive, u.Err)
			}
			keys = append(keys, u.Key)
		}
		return keys
	}
	if got := strings.Join(list("dir/", true), " "); got != "dir/a dir/sub/b" {
		t.Errorf("ListIncompleteUploads(dir/, recursive) = %q; want both uploads", got)
	}
	if got := strings.Join(list("dir/", false), " "); got != "dir/a dir/sub/" {
		t.Errorf("ListIncompleteUploads(dir/, not recursive) = %q; want dir/a and the prefix dir/sub/", got)
	}
	err := mc.RemoveIncompleteUpload(ctx, d.bucket, "dir/a")
	if resp := minio.ToErrorResponse(err); resp.StatusCode != http.StatusPreconditionRequired || resp.Code != "MissingFenceToken" {
		t.Errorf("RemoveIncompleteUpload without a token = %v; want 428 MissingFenceToken", err)
	}
	withToken := newMinio(&tokenTransport{tb: t, base: d.srv.Client().Transport, token: "9", secret: d.keys[writerKey][0]})
	if err := withToken.RemoveIncompleteUpload(ctx, d.bucket, "dir/a"); err != nil {
		t.Fatalf("RemoveIncompleteUpload with the upload's token: %v", err)
	}
	var left []string
	for u := range d.minio.ListIncompleteUploads(ctx, d.bucket, "dir/", true) {
		left = append(left, u.Key)
	}
	if got := strings.Join(left, " "); got != "dir/sub/b" {
		t.Errorf("versitygw holds uploads %q; want only dir/sub/b's", got)
	}
}
