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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
)

// TestDeleteObjectFenced: a stale delete is refused (409
// StaleFenceToken, the object stays); a current one deletes and leaves
// the mark; a delete of an absent key is 204; a missing token 428.
func TestDeleteObjectFenced(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	if _, err := d.put(t, w, "k", 20, "twenty"); err != nil {
		t.Fatal(err)
	}
	del := func(token string) error {
		_, err := d.client(writerKey, withHeader("X-Amz-Meta-Fence-Token", token)).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
		return err
	}
	wantAPIError(t, del("19"), http.StatusConflict, "StaleFenceToken")
	if body, _, ok := d.stored(t, "k"); !ok || body != "twenty" {
		t.Fatalf("after a stale delete S3 holds %q (exists %v)", body, ok)
	}
	_, err := w.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	wantAPIError(t, err, http.StatusPreconditionRequired, "MissingFenceToken")
	_, err = d.client(readerKey, withHeader("X-Amz-Meta-Fence-Token", "21")).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	if err := del("21"); err != nil {
		t.Fatalf("delete 21: %v", err)
	}
	if _, _, ok := d.stored(t, "k"); ok {
		t.Fatalf("the object is still there")
	}
	if hwm := d.mark(t, "k"); hwm != 21 {
		t.Fatalf("mark = %d; want the tombstone 21", hwm)
	}
	if err := del("21"); err != nil {
		t.Fatalf("delete of an absent key: %v", err)
	}
	// The tombstone refuses a stale re-create.
	_, err = d.put(t, w, "k", 20, "late")
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
}

// TestDeleteObjectsPerKey: DeleteObjects fences each key on its own with
// the request's token: keys whose mark is above it get their own
// StaleFenceToken error, the others are deleted, and keys the identity
// may not delete get AccessDenied.
func TestDeleteObjectsPerKey(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	for key, token := range map[string]api.Token{"low": 5, "high": 50, "logs/x": 5, "other": 5} {
		if _, err := d.put(t, w, key, token, key); err != nil {
			t.Fatal(err)
		}
	}
	out, err := d.client(writerKey, withHeader("X-Amz-Meta-Fence-Token", "10")).DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(d.bucket),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("low")}, {Key: aws.String("high")}, {Key: aws.String("absent")}, {Key: aws.String("a/../b")}}},
	})
	if err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	deleted := map[string]bool{}
	for _, o := range out.Deleted {
		deleted[aws.ToString(o.Key)] = true
	}
	errs := map[string]string{}
	for _, e := range out.Errors {
		errs[aws.ToString(e.Key)] = aws.ToString(e.Code)
	}
	if !deleted["low"] || !deleted["absent"] || errs["high"] != "StaleFenceToken" || errs["a/../b"] != "InvalidArgument" || len(deleted) != 2 {
		t.Fatalf("deleted %v, errors %v; want low and absent deleted, high StaleFenceToken, a/../b InvalidArgument", deleted, errs)
	}
	if _, _, ok := d.stored(t, "low"); ok {
		t.Errorf("low is still there")
	}
	if body, _, ok := d.stored(t, "high"); !ok || body != "high" {
		t.Errorf("high = %q (exists %v); want it kept", body, ok)
	}
	// logs may delete only under logs/: per key.
	out, err = d.client(logsKey, withHeader("X-Amz-Meta-Fence-Token", "10")).DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(d.bucket),
		Delete: &types.Delete{Quiet: aws.Bool(true), Objects: []types.ObjectIdentifier{{Key: aws.String("logs/x")}, {Key: aws.String("other")}}},
	})
	if err != nil {
		t.Fatalf("DeleteObjects as logs: %v", err)
	}
	if len(out.Deleted) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "other" || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("quiet DeleteObjects as logs = deleted %v errors %+v; want only other's AccessDenied", out.Deleted, out.Errors)
	}
	if _, _, ok := d.stored(t, "other"); !ok {
		t.Errorf("other was deleted by an identity without the grant")
	}
	if hwm := d.mark(t, "other"); hwm != 5 {
		t.Errorf("other's mark = %d; want 5", hwm)
	}
}

// TestDeleteObjectsBounds: over 1000 keys, a body over the bound, and
// malformed XML are refused whole, and nothing is deleted.
func TestDeleteObjectsBounds(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.put(t, d.client(writerKey), "keep", 1, "keep"); err != nil {
		t.Fatal(err)
	}
	post := func(body []byte) (*http.Response, s3ErrorBody) {
		req, _ := http.NewRequest(http.MethodPost, d.url+"/"+d.bucket+"?delete", bytes.NewReader(body))
		req.Header.Set("X-Amz-Meta-Fence-Token", "9")
		resp := d.rawRequest(t, writerKey, req, body)
		return resp, readS3Error(t, resp)
	}
	var many strings.Builder
	many.WriteString("<Delete>")
	for i := range 1001 {
		fmt.Fprintf(&many, "<Object><Key>keep%d</Key></Object>", i)
	}
	many.WriteString("<Object><Key>keep</Key></Object></Delete>")
	if resp, e := post([]byte(many.String())); resp.StatusCode != 400 || e.Code != "MalformedXML" {
		t.Errorf("1002 keys: %d %s; want 400 MalformedXML", resp.StatusCode, e.Code)
	}
	huge := []byte("<Delete><Object><Key>keep</Key></Object>" + strings.Repeat("<!-- padding -->", 200_000) + "</Delete>")
	if resp, e := post(huge); resp.StatusCode != 400 || e.Code != "EntityTooLarge" {
		t.Errorf("a 3 MB body: %d %s; want 400 EntityTooLarge", resp.StatusCode, e.Code)
	}
	if resp, e := post([]byte("<Delete><Object><Key>keep</Key></Object>")); resp.StatusCode != 400 || e.Code != "MalformedXML" {
		t.Errorf("malformed XML: %d %s; want 400 MalformedXML", resp.StatusCode, e.Code)
	}
	if _, _, ok := d.stored(t, "keep"); !ok {
		t.Fatalf("keep was deleted")
	}
	if hwm := d.mark(t, "keep"); hwm != 1 {
		t.Fatalf("keep's mark = %d; want 1", hwm)
	}
}

// TestCopyObject: the destination is fenced with the request's token
// (stale: 409, nothing copied), the source needs read, a URL-encoded
// source key is decoded, and a versionId is refused.
func TestCopyObject(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	w := d.client(writerKey)
	if _, err := d.put(t, w, "src dir/a+b.txt", 3, "source bytes"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.put(t, w, "logs/dst", 40, "dst of 40"); err != nil {
		t.Fatal(err)
	}
	source := d.bucket + "/" + url.PathEscape("src dir/a+b.txt")
	copyAs := func(c *s3.Client, token, src, dst string) error {
		_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(dst), CopySource: aws.String(src),
			Metadata: map[string]string{"fence-token": token}, MetadataDirective: types.MetadataDirectiveReplace})
		return err
	}
	if err := copyAs(w, "41", source, "logs/dst"); err != nil {
		t.Fatalf("copy 41: %v", err)
	}
	if body, token, _ := d.stored(t, "logs/dst"); body != "source bytes" || token != "41" {
		t.Fatalf("dst = %q token %q; want the source's bytes with token 41", body, token)
	}
	wantAPIError(t, copyAs(w, "40", source, "logs/dst"), http.StatusConflict, "StaleFenceToken")
	// logs may write logs/dst but not read the source.
	wantAPIError(t, copyAs(d.client(logsKey), "42", source, "logs/dst"), http.StatusForbidden, "AccessDenied")
	wantAPIError(t, copyAs(w, "42", source+"?versionId=abc", "logs/dst"), http.StatusNotImplemented, "NotImplemented")
	wantAPIError(t, copyAs(w, "42", d.bucket+"/absent", "logs/dst"), http.StatusNotFound, "NoSuchKey")
	wantAPIError(t, copyAs(w, "42", d.bucket+"/a/../b", "logs/dst"), http.StatusBadRequest, "InvalidArgument")
	if body, token, _ := d.stored(t, "logs/dst"); body != "source bytes" || token != "41" {
		t.Fatalf("after the refusals dst = %q token %q; want token 41's copy", body, token)
	}
	// A copy with no token.
	_, err := w.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("logs/dst"), CopySource: aws.String(source)})
	wantAPIError(t, err, http.StatusPreconditionRequired, "MissingFenceToken")
	got, err := w.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("logs/dst")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(b) != "source bytes" {
		t.Fatalf("read back %q", b)
	}
}
