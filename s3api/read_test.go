package s3api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// TestGetAndHeadObject reads through the door with aws-sdk-go-v2: the
// whole object with its recorded token, a range, the conditional headers
// (304, 412), HEAD, a missing key (NoSuchKey, and HEAD's bodiless 404),
// and a refused parameter (versionId). partNumber: partnumber_test.go.
func TestGetAndHeadObject(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	out, err := d.put(t, w, "dir/obj.txt", 12, "0123456789")
	if err != nil {
		t.Fatal(err)
	}
	etag := aws.ToString(out.ETag)
	c := d.client(readerKey)
	get := func(in *s3.GetObjectInput) (string, *s3.GetObjectOutput, error) {
		in.Bucket, in.Key = aws.String(d.bucket), aws.String("dir/obj.txt")
		o, err := c.GetObject(ctx, in)
		if err != nil {
			return "", nil, err
		}
		defer o.Body.Close()
		b, err := io.ReadAll(o.Body)
		return string(b), o, err
	}
	body, o, err := get(&s3.GetObjectInput{})
	if err != nil || body != "0123456789" || o.Metadata["fence-token"] != "12" || aws.ToString(o.ETag) != etag {
		t.Fatalf("get = %q, meta %v, etag %s, %v; want the bytes, token 12, %s", body, o.Metadata, aws.ToString(o.ETag), err, etag)
	}
	body, o, err = get(&s3.GetObjectInput{Range: aws.String("bytes=2-4")})
	if err != nil || body != "234" || aws.ToString(o.ContentRange) != "bytes 2-4/10" {
		t.Fatalf("range get = %q (%v); want 234", body, err)
	}
	_, _, err = get(&s3.GetObjectInput{IfMatch: aws.String(`"nope"`)})
	wantAPIError(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	_, _, err = get(&s3.GetObjectInput{IfNoneMatch: aws.String(etag)})
	var respErr interface{ HTTPStatusCode() int }
	if !errors.As(err, &respErr) || respErr.HTTPStatusCode() != http.StatusNotModified {
		t.Fatalf("If-None-Match of the current ETag: %v; want 304", err)
	}
	_, _, err = get(&s3.GetObjectInput{VersionId: aws.String("v1")})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")

	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dir/obj.txt")})
	if err != nil || aws.ToInt64(head.ContentLength) != 10 || head.Metadata["fence-token"] != "12" {
		t.Fatalf("head = %v, %v", head, err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("absent")})
	var noKey *types.NoSuchKey
	if !errors.As(err, &noKey) {
		t.Fatalf("get absent: %v; want NoSuchKey", err)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("absent")})
	var notFound *types.NotFound
	if !errors.As(err, &notFound) {
		t.Fatalf("head absent: %v; want NotFound", err)
	}
	// logs may read only under logs/.
	_, err = d.client(logsKey).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dir/obj.txt")})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
}

// TestBucketReads lists through the door: ListObjectsV2 (with a
// paginator), ListObjects, ListBuckets (each identity sees the buckets it
// may read something of), HeadBucket, GetBucketLocation; and the grants
// of a listing: logs may list logs/ but not the whole bucket.
func TestBucketReads(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	for i, key := range []string{"a", "b/c", "logs/1", "logs/2"} {
		if _, err := d.put(t, w, key, 3, "x"+key); err != nil {
			t.Fatalf("put %s (%d): %v", key, i, err)
		}
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(w, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), MaxKeys: aws.Int32(3)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list v2: %v", err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if want := []string{"a", "b/c", "logs/1", "logs/2"}; !slices.Equal(keys, want) {
		t.Fatalf("ListObjectsV2 = %v; want %v", keys, want)
	}
	v1, err := w.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(d.bucket), Delimiter: aws.String("/")})
	if err != nil || len(v1.Contents) != 1 || len(v1.CommonPrefixes) != 2 {
		t.Fatalf("ListObjects with delimiter = %+v, %v; want a and 2 common prefixes", v1, err)
	}

	logs := d.client(logsKey)
	_, err = logs.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket)})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	lo, err := logs.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), Prefix: aws.String("logs/")})
	if err != nil || len(lo.Contents) != 2 {
		t.Fatalf("logs listing logs/ = %v, %v; want 2 keys", lo, err)
	}

	names := func(c *s3.Client) []string {
		out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			t.Fatalf("ListBuckets: %v", err)
		}
		var n []string
		for _, b := range out.Buckets {
			n = append(n, aws.ToString(b.Name))
		}
		return n
	}
	other := d.bucket + "-other"
	sharedS3.CreateBucket(t, other)
	if got := names(w); !slices.Contains(got, d.bucket) || !slices.Contains(got, other) {
		t.Errorf("writer's ListBuckets = %v; want both buckets", got)
	}
	if got := names(logs); !slices.Equal(got, []string{d.bucket}) {
		t.Errorf("logs' ListBuckets = %v; want only %s", got, d.bucket)
	}

	if _, err := logs.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(d.bucket)}); err != nil {
		t.Errorf("logs HeadBucket: %v", err)
	}
	_, err = logs.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(other)})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		t.Errorf("logs HeadBucket of another bucket: %v; want a refusal", err)
	}
	_, err = w.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("no-such-bucket-here")})
	var notFound *types.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("HeadBucket of a missing bucket: %v; want NotFound", err)
	}
	if _, err := w.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(d.bucket)}); err != nil {
		t.Errorf("GetBucketLocation: %v", err)
	}
	_, err = w.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("no-such-bucket-here")})
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.ErrorCode(), "NoSuchBucket") {
		t.Errorf("listing a missing bucket: %v; want NoSuchBucket", err)
	}
}

// TestEmptyObject: a zero-byte PutObject (the SDK sends it unsigned, with
// a checksum header) is fenced and stored, and reads back empty.
func TestEmptyObject(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.put(t, d.client(writerKey), "empty", 4, ""); err != nil {
		t.Fatalf("put: %v", err)
	}
	if body, token, ok := d.stored(t, "empty"); !ok || body != "" || token != "4" {
		t.Fatalf("stored %q token %q exists %v", body, token, ok)
	}
	o, err := d.client(readerKey).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("empty")})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	if b, _ := io.ReadAll(o.Body); len(b) != 0 || aws.ToInt64(o.ContentLength) != 0 {
		t.Fatalf("read back %d bytes", len(b))
	}
}

// TestListPrefixDotSegments: a listing prefix with a "." or ".." segment
// is refused: the grant check compares the prefix as written, and a
// file-backed store could resolve it to another directory.
func TestListPrefixDotSegments(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	if _, err := d.put(t, d.client(writerKey), "secret", 3, "not for logs"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.put(t, d.client(writerKey), "logs/1", 3, "x"); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"logs/../", "logs/..", "logs/./../se", "logs//../"} {
		d.s3.Reset()
		out, err := d.client(logsKey).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), Prefix: aws.String(prefix)})
		if err == nil {
			var keys []string
			for _, o := range out.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			t.Errorf("prefix %q listed %v; want a refusal", prefix, keys)
			continue
		}
		wantAPIError(t, err, http.StatusBadRequest, "InvalidArgument")
		if n := d.s3.Count(); n != 0 {
			t.Errorf("prefix %q: %d requests reached S3", prefix, n)
		}
	}
}

// TestListPrefixNeedsEscaping lists under prefixes whose characters SigV4
// escapes in its own way (a space as %20, never '+'; '+', '~', '=', '&'
// and UTF-8): the door signs the upstream listing in canonical form, so S3
// accepts the signature and answers the keys under the prefix alone.
func TestListPrefixNeedsEscaping(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	prefixes := []string{"sp ace/", "plus+sign/", "tilde~eq=amp&/", "ünï cödé/"}
	for _, p := range prefixes {
		if _, err := d.put(t, w, p+"k", 3, "x"); err != nil {
			t.Fatalf("put %q: %v", p+"k", err)
		}
	}
	for _, p := range prefixes {
		out, err := w.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket), Prefix: aws.String(p)})
		if err != nil {
			t.Fatalf("list %q: %v", p, err)
		}
		if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != p+"k" {
			t.Fatalf("list %q = %d keys; want exactly %q", p, len(out.Contents), p+"k")
		}
	}
}
