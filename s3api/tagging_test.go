package s3api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
)

// storedTags reads key's tags straight from versitygw with minio-go.
func (d *door) storedTags(tb testing.TB, key string) map[string]string {
	tb.Helper()
	t, err := d.minio.GetObjectTagging(context.Background(), d.bucket, key, minio.GetObjectTaggingOptions{})
	if err != nil {
		tb.Fatalf("read the tags of %s from S3: %v", key, err)
	}
	return t.ToMap()
}

// wantTags fails unless got and want hold the same tags; no tags at all
// is an empty or nil map alike.
func wantTags(tb testing.TB, what string, got, want map[string]string) {
	tb.Helper()
	if len(got) != len(want) || !maps.Equal(got, want) {
		tb.Fatalf("%s = %v; want %v", what, got, want)
	}
}

// tagSet is tags as the SDK's Tagging of PutObjectTagging.
func tagSet(tags map[string]string) *types.Tagging {
	out := &types.Tagging{TagSet: []types.Tag{}}
	for k, v := range tags {
		out.TagSet = append(out.TagSet, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

// fenced is a client option that sends token in X-Fence-Token, signed:
// the place of a tagging request's token.
func fenced(token api.Token) func(*s3.Options) {
	return withHeader(api.HeaderFenceToken, token.String())
}

// TestTaggingOnWrites: x-amz-tagging on PutObject, CreateMultipartUpload
// and CopyObject (with x-amz-tagging-directive) is stored with the
// object, as S3 stores it, and read back from versitygw.
func TestTaggingOnWrites(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("src"), Body: strings.NewReader("source"),
		Metadata: map[string]string{"fence-token": "5"}, Tagging: aws.String("team=blue&stage=raw%20data")}); err != nil {
		t.Fatalf("PutObject with tags: %v", err)
	}
	srcTags := map[string]string{"team": "blue", "stage": "raw data"}
	wantTags(t, "the tags of src", d.storedTags(t, "src"), srcTags)

	copyTo := func(key string, in s3.CopyObjectInput) error {
		in.Bucket, in.Key, in.CopySource = aws.String(d.bucket), aws.String(key), aws.String(d.bucket+"/src")
		in.Metadata = map[string]string{"fence-token": "5"}
		_, err := c.CopyObject(ctx, &in)
		return err
	}
	for _, tc := range []struct {
		name  string
		write func(key string) error
		want  map[string]string
	}{
		{"PutObject without tags", func(key string) error {
			_, err := d.put(t, c, key, 5, "no tags")
			return err
		}, nil},
		{"CreateMultipartUpload with tags", func(key string) error {
			create, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String(key),
				Metadata: map[string]string{"fence-token": "5"}, Tagging: aws.String("kind=upload")})
			if err != nil {
				return err
			}
			part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: create.UploadId,
				PartNumber: aws.Int32(1), Body: strings.NewReader("one part")})
			if err != nil {
				return err
			}
			_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: create.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
			return err
		}, map[string]string{"kind": "upload"}},
		{"CopyObject keeps the source's tags by default", func(key string) error {
			return copyTo(key, s3.CopyObjectInput{})
		}, srcTags},
		{"CopyObject with COPY ignores x-amz-tagging, as S3", func(key string) error {
			return copyTo(key, s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveCopy, Tagging: aws.String("other=1")})
		}, srcTags},
		{"CopyObject with REPLACE takes the request's tags", func(key string) error {
			return copyTo(key, s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("copied=yes")})
		}, map[string]string{"copied": "yes"}},
		{"CopyObject with REPLACE and no tags drops them", func(key string) error {
			return copyTo(key, s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			if err := tc.write(key); err != nil {
				t.Fatalf("write: %v", err)
			}
			wantTags(t, "the tags of "+key, d.storedTags(t, key), tc.want)
		})
	}
}

// TestObjectTaggingOperations: PutObjectTagging, GetObjectTagging and
// DeleteObjectTagging through the door, each write fenced with the token
// in a signed X-Fence-Token: the tags land in versitygw, the object's
// bytes, content type and metadata stay, and the object then records the
// tag writer's token, which the mark holds.
func TestObjectTaggingOperations(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Body: strings.NewReader("the bytes"),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"fence-token": "5", "owner": "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{"team": "blue", "class": "a b+c=d/e:f@g"}
	if _, err := d.client(writerKey, fenced(6)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("k"),
		Tagging: tagSet(tags)}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	wantTags(t, "stored tags", d.storedTags(t, "k"), tags)
	body, token, _ := d.stored(t, "k")
	if body != "the bytes" || token != "6" {
		t.Fatalf("S3 holds %q with token %q; want the same bytes, with the tag writer's token 6", body, token)
	}
	meta := d.storedMetadata(t, "k")
	if meta.user["owner"] != "ops" || meta.mimeType != "text/plain" {
		t.Fatalf("S3 holds metadata %v and content type %q; want the object's own", meta.user, meta.mimeType)
	}
	head, err := d.minio.StatObject(ctx, d.bucket, "k", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if `"`+head.ETag+`"` != aws.ToString(put.ETag) {
		t.Fatalf("ETag after the tag write = %q; want the object's %s", head.ETag, aws.ToString(put.ETag))
	}
	if hwm := d.mark(t, "k"); hwm != 6 {
		t.Fatalf("mark = %s; want 6", hwm)
	}

	got, err := d.client(readerKey).GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("GetObjectTagging: %v", err)
	}
	read := map[string]string{}
	for _, tag := range got.TagSet {
		read[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	wantTags(t, "GetObjectTagging", read, tags)

	if _, err := d.client(writerKey, fenced(7)).DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("k")}); err != nil {
		t.Fatalf("DeleteObjectTagging: %v", err)
	}
	wantTags(t, "stored tags after DeleteObjectTagging", d.storedTags(t, "k"), nil)
	if body, token, _ := d.stored(t, "k"); body != "the bytes" || token != "7" {
		t.Fatalf("S3 holds %q with token %q; want the same bytes with token 7", body, token)
	}
	got, err = d.client(readerKey).GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	if err != nil || len(got.TagSet) != 0 {
		t.Fatalf("GetObjectTagging after the delete = %v, %v; want no tags", got, err)
	}
}

// TestObjectTaggingRefusals: tagging writes that are refused change
// nothing: no PUT reaches S3, the tags, bytes and mark stay. The table
// holds the fence's refusals, the grants, where the token may be, and S3's
// rules for tags (at most 10 on an object, keys of 1 to 128 bytes, values
// of at most 256, no key twice, S3's characters), in the XML body of
// PutObjectTagging and in x-amz-tagging.
func TestObjectTaggingRefusals(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	eleven := map[string]string{}
	for i := range 11 {
		eleven[fmt.Sprintf("k%d", i)] = "v"
	}
	ten := map[string]string{}
	for i := range 10 {
		ten[fmt.Sprintf("k%d", i)] = "v"
	}
	putTagging := func(opts []func(*s3.Options), tags map[string]string, tagging *types.Tagging) func(key string) error {
		return func(key string) error {
			if tagging == nil {
				tagging = tagSet(tags)
			}
			_, err := d.client(writerKey, opts...).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Tagging: tagging})
			return err
		}
	}
	putObject := func(tagging string) func(key string) error {
		return func(key string) error {
			_, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader("new"),
				Metadata: map[string]string{"fence-token": "9"}, Tagging: aws.String(tagging)})
			return err
		}
	}
	dup := &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("a"), Value: aws.String("2")}}}
	for _, tc := range []struct {
		name       string
		write      func(key string) error
		wantStatus int
		wantCode   string // "" when the write lands
	}{
		{"ten tags", putTagging([]func(*s3.Options){fenced(9)}, ten, nil), 200, ""},
		{"stale token", putTagging([]func(*s3.Options){fenced(4)}, map[string]string{"a": "1"}, nil), 409, "StaleFenceToken"},
		{"no token", putTagging(nil, map[string]string{"a": "1"}, nil), 428, "MissingFenceToken"},
		{"token as metadata", putTagging([]func(*s3.Options){withHeader("X-Amz-Meta-Fence-Token", "9")}, map[string]string{"a": "1"}, nil), 400, "InvalidArgument"},
		{"read grant only", func(key string) error {
			_, err := d.client(readerKey, fenced(9)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Tagging: tagSet(map[string]string{"a": "1"})})
			return err
		}, 403, "AccessDenied"},
		{"eleven tags", putTagging([]func(*s3.Options){fenced(9)}, eleven, nil), 400, "BadRequest"},
		{"a key of 129 bytes", putTagging([]func(*s3.Options){fenced(9)}, map[string]string{strings.Repeat("k", 129): "v"}, nil), 400, "InvalidTag"},
		{"an empty key", putTagging([]func(*s3.Options){fenced(9)}, map[string]string{"": "v"}, nil), 400, "InvalidTag"},
		{"a value of 257 bytes", putTagging([]func(*s3.Options){fenced(9)}, map[string]string{"k": strings.Repeat("v", 257)}, nil), 400, "InvalidTag"},
		{"a key twice", putTagging([]func(*s3.Options){fenced(9)}, nil, dup), 400, "InvalidTag"},
		{"a character S3 refuses", putTagging([]func(*s3.Options){fenced(9)}, map[string]string{"k": "a*b"}, nil), 400, "InvalidTag"},
		{"DeleteObjectTagging stale", func(key string) error {
			_, err := d.client(writerKey, fenced(4)).DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
			return err
		}, 409, "StaleFenceToken"},
		{"x-amz-tagging with eleven tags", putObject("k0=v&k1=v&k2=v&k3=v&k4=v&k5=v&k6=v&k7=v&k8=v&k9=v&k10=v"), 400, "BadRequest"},
		{"x-amz-tagging with a key twice", putObject("a=1&a=2"), 400, "InvalidArgument"},
		{"x-amz-tagging with a long value", putObject("a=" + strings.Repeat("v", 257)), 400, "InvalidTag"},
		{"x-amz-tagging with a bad escape", putObject("a=%zz"), 400, "InvalidArgument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			if _, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader("old"),
				Metadata: map[string]string{"fence-token": "5"}, Tagging: aws.String("old=1")}); err != nil {
				t.Fatal(err)
			}
			d.s3.Reset()
			err := tc.write(key)
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("write: %v", err)
				}
				return
			}
			wantAPIError(t, err, tc.wantStatus, tc.wantCode)
			if n := d.s3.CountMethod(http.MethodPut); n != 0 {
				t.Errorf("%d PUTs reached S3; want none", n)
			}
			wantTags(t, "stored tags", d.storedTags(t, key), map[string]string{"old": "1"})
			if body, token, _ := d.stored(t, key); body != "old" || token != "5" {
				t.Errorf("S3 holds %q with token %q; want the old bytes and token 5", body, token)
			}
			if hwm := d.mark(t, key); hwm != 5 {
				t.Errorf("mark = %s; want 5", hwm)
			}
		})
	}
}

// TestObjectTaggingStoreAnswers: what versitygw answers a tagging request
// for a key it does not hold reaches the client with S3's code.
func TestObjectTaggingStoreAnswers(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	_, err := d.client(readerKey).GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("absent")})
	wantAPIError(t, err, http.StatusNotFound, "NoSuchKey")
	_, err = d.client(writerKey, fenced(5)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("absent"),
		Tagging: tagSet(map[string]string{"a": "1"})})
	wantAPIError(t, err, http.StatusNotFound, "NoSuchKey")
	if _, _, ok := d.stored(t, "absent"); ok {
		t.Fatal("a tag write of an absent key created it")
	}
}

// TestObjectTaggingStaleHolderOvertaken: a stale holder's tag write that
// passed its fence check and paused does not land after a newer holder's
// write: the newer holder writes new bytes and tags meanwhile, the stale
// write's conditional rewrite fails, and it is answered 409 with the
// newer holder's bytes and tags in S3.
func TestObjectTaggingStaleHolderOvertaken(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	hooks := &gateway.TestHooks{AfterFenceCheck: func(ctx context.Context, resource api.Resource, token api.Token) {
		if token == 6 {
			close(reached)
			<-release
		}
	}}
	d := newDoor(t, doorOptions{gateway: gateway.Config{TestHooks: hooks}})
	ctx := context.Background()
	if _, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Body: strings.NewReader("v5"),
		Metadata: map[string]string{"fence-token": "5"}, Tagging: aws.String("by=5")}); err != nil {
		t.Fatal(err)
	}
	stale := make(chan error, 1)
	go func() {
		_, err := d.client(writerKey, fenced(6)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(d.bucket), Key: aws.String("k"),
			Tagging: tagSet(map[string]string{"by": "6"})})
		stale <- err
	}()
	<-reached
	if _, err := d.client(writerKey).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Body: bytes.NewReader([]byte("v7")),
		Metadata: map[string]string{"fence-token": "7"}, Tagging: aws.String("by=7")}); err != nil {
		t.Fatalf("the newer holder's write: %v", err)
	}
	close(release)
	wantAPIError(t, <-stale, http.StatusConflict, "StaleFenceToken")
	wantTags(t, "stored tags", d.storedTags(t, "k"), map[string]string{"by": "7"})
	if body, token, _ := d.stored(t, "k"); body != "v7" || token != "7" {
		t.Fatalf("S3 holds %q with token %q; want the newer holder's v7 and 7", body, token)
	}
}

// TestObjectTaggingGCS: objects in GCS buckets have no tags: tagging
// requests and x-amz-tagging are 501, and nothing reaches GCS or etcd.
func TestObjectTaggingGCS(t *testing.T) {
	g := newGCSDoor(t, "tags")
	ctx := context.Background()
	c := g.client(writerKey)
	if _, err := g.put(t, c, "k", 5, "v5"); err != nil {
		t.Fatal(err)
	}
	g.proxy.Reset()
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(g.bucket), Key: aws.String("k"), Body: strings.NewReader("v6"),
		Metadata: map[string]string{"fence-token": "6"}, Tagging: aws.String("a=1")})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	_, err = g.client(writerKey, fenced(6)).PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(g.bucket), Key: aws.String("k"),
		Tagging: tagSet(map[string]string{"a": "1"})})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	_, err = c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(g.bucket), Key: aws.String("k")})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	_, err = g.client(writerKey, fenced(6)).DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(g.bucket), Key: aws.String("k")})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	if n := g.proxy.Count(); n != 0 {
		t.Fatalf("%d requests reached GCS; want none", n)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(g.bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(b) != "v5" {
		t.Fatalf("GCS holds %q; want v5", b)
	}
}
