package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// partSizes are the parts of the multipart objects of these tests: two
// of S3's smallest non-final size and a short last one.
var partSizes = []int{5 << 20, 5 << 20, 1000}

// partsOf returns the parts of a multipart object's bytes, by partSizes.
func partsOf(body []byte) [][]byte {
	var parts [][]byte
	for _, n := range partSizes {
		parts, body = append(parts, body[:n]), body[n:]
	}
	return parts
}

// contentRangeOf is the Content-Range of part i (from 0) of an object cut
// by partSizes.
func contentRangeOf(i int) string {
	from, total := 0, 0
	for j, n := range partSizes {
		if j < i {
			from += n
		}
		total += n
	}
	return fmt.Sprintf("bytes %d-%d/%d", from, from+partSizes[i]-1, total)
}

// TestStoreServesPartNumber checks the store itself, not the door:
// versitygw v1.8.0 answers GET and HEAD with partNumber as S3 does (the
// part's bytes, 206 with its Content-Range and x-amz-mp-parts-count; the
// whole object for partNumber=1 of an object not uploaded in parts; 416
// InvalidPartNumber past the last part), which is what the door passes
// through.
func TestStoreServesPartNumber(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	core := minio.Core{Client: d.minio}
	body := randomBytes(5<<20+5<<20+1000, 7)
	id, err := core.NewMultipartUpload(ctx, d.bucket, "mp", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var done []minio.CompletePart
	for i, part := range partsOf(body) {
		p, err := core.PutObjectPart(ctx, d.bucket, "mp", id, i+1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		done = append(done, minio.CompletePart{PartNumber: i + 1, ETag: p.ETag})
	}
	if _, err := core.CompleteMultipartUpload(ctx, d.bucket, "mp", id, done, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, part := range partsOf(body) {
		opts := minio.GetObjectOptions{PartNumber: i + 1}
		rc, _, h, err := core.GetObject(ctx, d.bucket, "mp", opts)
		if err != nil {
			t.Fatalf("store GET partNumber=%d: %v", i+1, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, part) || h.Get("Content-Range") != contentRangeOf(i) || h.Get("X-Amz-Mp-Parts-Count") != "3" {
			t.Fatalf("store GET partNumber=%d: %d bytes (equal %v), Content-Range %q, parts count %q, %v; want part %d, %q, 3",
				i+1, len(got), bytes.Equal(got, part), h.Get("Content-Range"), h.Get("X-Amz-Mp-Parts-Count"), err, i+1, contentRangeOf(i))
		}
	}
	_, _, _, err = core.GetObject(ctx, d.bucket, "mp", minio.GetObjectOptions{PartNumber: 4})
	if e := minio.ToErrorResponse(err); e.StatusCode != http.StatusRequestedRangeNotSatisfiable || e.Code != "InvalidPartNumber" {
		t.Fatalf("store GET partNumber=4: %v (%d %s); want 416 InvalidPartNumber", err, e.StatusCode, e.Code)
	}
	store := s3.New(s3.Options{
		Region: sharedS3.Region, BaseEndpoint: aws.String(sharedS3.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(sharedS3.AccessKey, sharedS3.SecretKey, ""),
	})
	head, err := store.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), PartNumber: aws.Int32(1)})
	if err != nil {
		t.Fatalf("store HEAD partNumber=1: %v", err)
	}
	if aws.ToInt64(head.ContentLength) != int64(partSizes[0]) || aws.ToInt32(head.PartsCount) != 3 || aws.ToString(head.ContentRange) != contentRangeOf(0) {
		t.Fatalf("store HEAD partNumber=1 = Content-Length %d, PartsCount %d, Content-Range %q; want %d, 3, %q",
			aws.ToInt64(head.ContentLength), aws.ToInt32(head.PartsCount), aws.ToString(head.ContentRange), partSizes[0], contentRangeOf(0))
	}
}

// putInParts writes key through the door as a fenced multipart upload of
// the parts of body (partSizes) with token, and returns the object's ETag.
func (d *door) putInParts(tb testing.TB, c *s3.Client, key string, token int, body []byte) string {
	tb.Helper()
	ctx := context.Background()
	create, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), Metadata: map[string]string{"fence-token": strconv.Itoa(token)},
	})
	if err != nil {
		tb.Fatalf("CreateMultipartUpload: %v", err)
	}
	var done []types.CompletedPart
	for i, part := range partsOf(body) {
		n := aws.Int32(int32(i + 1))
		p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: create.UploadId, PartNumber: n, Body: bytes.NewReader(part)})
		if err != nil {
			tb.Fatalf("UploadPart %d: %v", i+1, err)
		}
		done = append(done, types.CompletedPart{PartNumber: n, ETag: p.ETag, ChecksumCRC32: p.ChecksumCRC32})
	}
	out, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	})
	if err != nil {
		tb.Fatalf("CompleteMultipartUpload: %v", err)
	}
	return aws.ToString(out.ETag)
}

// statusOf records the HTTP status of each answer to an SDK client's
// calls in *status.
func statusOf(status *int) func(*s3.Options) {
	record := middleware.DeserializeMiddlewareFunc("recordStatus", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
			*status = resp.StatusCode
		}
		return out, md, err
	})
	return s3.WithAPIOptions(func(stack *middleware.Stack) error {
		return stack.Deserialize.Add(record, middleware.After)
	})
}

// wantStatus fails unless err is an answer with status (a HEAD's error
// has no code to compare).
func wantStatus(tb testing.TB, err error, status int) {
	tb.Helper()
	var respErr *smithyhttp.ResponseError
	if !errors.As(err, &respErr) || respErr.HTTPStatusCode() != status {
		tb.Fatalf("err = %v; want an answer with status %d", err, status)
	}
}

// TestGetObjectPartNumber reads the parts of a multipart object through
// the door with aws-sdk-go-v2, as download managers and aws-cli do: each
// part's bytes (206, its Content-Range, x-amz-mp-parts-count 3, the
// object's ETag and token), HEAD of part 1 giving the count, a part past
// the last one (416 InvalidPartNumber, in S3's XML), partNumber=1 of an
// object written in one PUT (its bytes), and the read grant.
func TestGetObjectPartNumber(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	body := randomBytes(5<<20+5<<20+1000, 8)
	etag := d.putInParts(t, d.client(writerKey), "dir/mp", 21, body)
	var status int
	c := d.client(readerKey, statusOf(&status))
	get := func(key string, n int32) ([]byte, *s3.GetObjectOutput, error) {
		o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key), PartNumber: aws.Int32(n)})
		if err != nil {
			return nil, nil, err
		}
		defer o.Body.Close()
		b, err := io.ReadAll(o.Body)
		return b, o, err
	}
	for i, part := range partsOf(body) {
		got, o, err := get("dir/mp", int32(i+1))
		if err != nil {
			t.Fatalf("GetObject PartNumber %d: %v", i+1, err)
		}
		if !bytes.Equal(got, part) || status != http.StatusPartialContent || aws.ToString(o.ContentRange) != contentRangeOf(i) ||
			aws.ToInt32(o.PartsCount) != 3 || aws.ToInt64(o.ContentLength) != int64(len(part)) || aws.ToString(o.ETag) != etag || o.Metadata["fence-token"] != "21" {
			t.Fatalf("GetObject PartNumber %d = %d bytes (equal %v), status %d, Content-Range %q, PartsCount %d, Content-Length %d, ETag %s, token %q; want part %d, 206, %q, 3, %d, %s, 21",
				i+1, len(got), bytes.Equal(got, part), status, aws.ToString(o.ContentRange), aws.ToInt32(o.PartsCount), aws.ToInt64(o.ContentLength),
				aws.ToString(o.ETag), o.Metadata["fence-token"], i+1, contentRangeOf(i), len(part), etag)
		}
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dir/mp"), PartNumber: aws.Int32(1)})
	if err != nil || aws.ToInt32(head.PartsCount) != 3 || aws.ToInt64(head.ContentLength) != int64(partSizes[0]) ||
		aws.ToString(head.ContentRange) != contentRangeOf(0) || status != http.StatusPartialContent {
		t.Fatalf("HeadObject PartNumber 1 = PartsCount %d, Content-Length %d, Content-Range %q, status %d, %v; want 3, %d, %q, 206",
			aws.ToInt32(head.PartsCount), aws.ToInt64(head.ContentLength), aws.ToString(head.ContentRange), status, err, partSizes[0], contentRangeOf(0))
	}
	_, _, err = get("dir/mp", 4)
	wantAPIError(t, err, http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber")
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dir/mp"), PartNumber: aws.Int32(4)})
	wantStatus(t, err, http.StatusRequestedRangeNotSatisfiable)

	// An object written in one PUT is its own part 1, and has no other.
	if _, err := d.put(t, d.client(writerKey), "dir/one", 22, "0123456789"); err != nil {
		t.Fatal(err)
	}
	got, o, err := get("dir/one", 1)
	if err != nil || string(got) != "0123456789" || o.Metadata["fence-token"] != "22" {
		t.Fatalf("GetObject PartNumber 1 of a single PUT = %q, %v; want the whole object", got, err)
	}
	_, _, err = get("dir/one", 2)
	wantAPIError(t, err, http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber")

	// The read grant is the object's, as for any read; nothing reaches S3.
	d.s3.Reset()
	_, err = d.client(logsKey).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dir/mp"), PartNumber: aws.Int32(1)})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	if n := d.s3.Count(); n != 0 {
		t.Fatalf("%d S3 requests for a forbidden read; want none", n)
	}
}

// TestPartNumberRefused: a partNumber the door cannot read unambiguously
// as one number from 1 to 10000 is refused (400 InvalidArgument), and
// partNumber with a Range is S3's 400 InvalidRequest; none of these
// reaches S3. versitygw itself would read "+1", "01" and a number that
// wraps around 32 bits (4294967297) as part 1.
func TestPartNumberRefused(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.put(t, d.client(writerKey), "obj", 5, "0123456789"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query string
		header      http.Header
		status      int
		code        string
	}{
		{"zero", "partNumber=0", nil, 400, "InvalidArgument"},
		{"past 10000", "partNumber=10001", nil, 400, "InvalidArgument"},
		{"negative", "partNumber=-1", nil, 400, "InvalidArgument"},
		{"plus sign", "partNumber=%2B1", nil, 400, "InvalidArgument"},
		{"leading zero", "partNumber=01", nil, 400, "InvalidArgument"},
		{"leading space", "partNumber=%201", nil, 400, "InvalidArgument"},
		{"trailing space", "partNumber=1%20", nil, 400, "InvalidArgument"},
		{"empty", "partNumber=", nil, 400, "InvalidArgument"},
		{"no value", "partNumber", nil, 400, "InvalidArgument"},
		{"hex", "partNumber=0x1", nil, 400, "InvalidArgument"},
		{"decimal point", "partNumber=1.0", nil, 400, "InvalidArgument"},
		{"exponent", "partNumber=1e3", nil, 400, "InvalidArgument"},
		{"NUL", "partNumber=1%00", nil, 400, "InvalidArgument"},
		{"wraps 32 bits", "partNumber=4294967297", nil, 400, "InvalidArgument"},
		{"huge", "partNumber=99999999999999999999999999", nil, 400, "InvalidArgument"},
		{"repeated", "partNumber=1&partNumber=2", nil, 400, "InvalidArgument"},
		{"repeated, same", "partNumber=1&partNumber=1", nil, 400, "InvalidArgument"},
		{"bad escape", "partNumber=%zz", nil, 400, "InvalidArgument"},
		{"semicolon", "partNumber=2;x=1", nil, 400, "InvalidArgument"},
		{"with Range", "partNumber=1", http.Header{"Range": {"bytes=0-1"}}, 400, "InvalidRequest"},
		{"with an invalid Range", "partNumber=1", http.Header{"Range": {"lines=0-1"}}, 400, "InvalidRequest"},
		{"with versionId", "partNumber=1&versionId=v1", nil, 501, "NotImplemented"},
	}
	for _, tt := range tests {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			t.Run(tt.name+"/"+method, func(t *testing.T) {
				req, err := http.NewRequest(method, d.url+"/"+d.bucket+"/obj?"+tt.query, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tt.header {
					req.Header[k] = v
				}
				// The SDK's signer rewrites the query as it parsed it,
				// without the pairs it could not parse: send it as
				// written (the signature, over the parsed query, holds).
				signRequest(t, req, readerKey, d.keys[readerKey][0], nil)
				req.URL.RawQuery = tt.query
				d.s3.Reset()
				resp, err := d.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tt.status {
					t.Fatalf("%s ?%s = %d %s; want %d %s", method, tt.query, resp.StatusCode, body, tt.status, tt.code)
				}
				if method == http.MethodGet && !bytes.Contains(body, []byte("<Code>"+tt.code+"</Code>")) {
					t.Fatalf("%s ?%s = %s; want code %s", method, tt.query, body, tt.code)
				}
				if n := d.s3.Count(); n != 0 {
					t.Fatalf("%s ?%s: %d S3 requests; want none", method, tt.query, n)
				}
			})
		}
	}
}

// TestPartNumberAfterOverwrite: parts are the current version's. An
// object uploaded in parts and then replaced by a single PUT has only
// part 1, the new bytes; one written in a PUT and replaced by an upload
// in parts has the new parts.
func TestPartNumberAfterOverwrite(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	d.putInParts(t, w, "k", 30, randomBytes(5<<20+5<<20+1000, 9))
	if _, err := d.put(t, w, "k", 31, "0123456789"); err != nil {
		t.Fatal(err)
	}
	c := d.client(readerKey)
	o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), PartNumber: aws.Int32(1)})
	if err != nil {
		t.Fatalf("part 1 after a PUT: %v", err)
	}
	got, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if string(got) != "0123456789" || aws.ToInt32(o.PartsCount) > 1 || o.Metadata["fence-token"] != "31" {
		t.Fatalf("part 1 after a PUT = %q (%d bytes), PartsCount %d, token %q; want the PUT's bytes, token 31", api.Truncate(string(got), 20), len(got), aws.ToInt32(o.PartsCount), o.Metadata["fence-token"])
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), PartNumber: aws.Int32(2)})
	wantAPIError(t, err, http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber")

	body := randomBytes(5<<20+5<<20+1000, 10)
	d.putInParts(t, w, "k", 32, body)
	o, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), PartNumber: aws.Int32(3)})
	if err != nil {
		t.Fatalf("part 3 after an upload in parts: %v", err)
	}
	got, _ = io.ReadAll(o.Body)
	o.Body.Close()
	if !bytes.Equal(got, partsOf(body)[2]) || aws.ToInt32(o.PartsCount) != 3 || o.Metadata["fence-token"] != "32" {
		t.Fatalf("part 3 after an upload in parts = %d bytes, PartsCount %d, token %q; want the new part 3, 3, token 32", len(got), aws.ToInt32(o.PartsCount), o.Metadata["fence-token"])
	}
}

// TestPartNumberOnGCSBucket: objects in GCS have no parts, and the GCS
// backend would answer the whole object to a read of part 2; the door
// refuses partNumber on a GCS bucket (501) before anything reaches GCS,
// and serves the bucket's plain reads.
func TestPartNumberOnGCSBucket(t *testing.T) {
	ctx := context.Background()
	g := newGCSDoor(t, "gcsdoor")
	d, bucket, gcsProxy := g.door, g.bucket, g.proxy
	c := d.client(writerKey)
	if _, err := d.put(t, c, "k", 3, "0123456789"); err != nil {
		t.Fatal(err)
	}
	gcsProxy.Reset()
	for _, n := range []int32{1, 2} {
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), PartNumber: aws.Int32(n)})
		wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), PartNumber: aws.Int32(n)})
		wantStatus(t, err, http.StatusNotImplemented)
	}
	if n := gcsProxy.Count(); n != 0 {
		t.Fatalf("%d GCS requests for partNumber reads; want none", n)
	}
	o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("plain read of the GCS bucket: %v", err)
	}
	got, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if string(got) != "0123456789" {
		t.Fatalf("plain read of the GCS bucket = %q; want the object", got)
	}
}
