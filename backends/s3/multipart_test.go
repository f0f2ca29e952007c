package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
)

// upload creates an upload of p for token and sends body as its only part;
// it returns the upload's id and the part to complete it with.
func upload(tb testing.TB, c *s3.Client, p api.ObjectPath, token api.Token, body string) (string, []api.Part) {
	tb.Helper()
	ctx := context.Background()
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: token, ContentType: "text/plain"})
	if err != nil || id == "" {
		tb.Fatalf("CreateUpload = %q, %v", id, err)
	}
	etag, err := c.UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: 1, Body: strings.NewReader(body), Size: int64(len(body))})
	if err != nil || etag == "" {
		tb.Fatalf("UploadPart = %q, %v", etag, err)
	}
	return id, []api.Part{{Number: 1, ETag: etag}}
}

// TestConditionalCompleteOnRealS3 shows that the S3 server (versitygw)
// enforces If-Match and If-None-Match: * on CompleteMultipartUpload, which
// fenced multipart relies on: a completion whose condition no longer
// holds is refused (412) and changes nothing, and the upload stays, so
// that it can be aborted.
func TestConditionalCompleteOnRealS3(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mpcond")
	c := newClient(t, server.Endpoint(), 0)
	mc := server.Minio(t)
	p := api.ObjectPath{Bucket: "mpcond", Key: "obj"}

	// Two uploads of an absent key, both observing "absent".
	idA, partsA := upload(t, c, p, 5, "bytes of A")
	idB, partsB := upload(t, c, p, 6, "bytes of B")
	etagA, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idA, Parts: partsA})
	if err != nil || etagA == "" {
		t.Fatalf("CompleteUpload(A, If-None-Match: *) = %q, %v", etagA, err)
	}
	_, err = c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idB, Parts: partsB})
	if !errors.Is(err, api.ErrConcurrentModification) {
		t.Fatalf("CompleteUpload(B, If-None-Match: *) over an existing object = %v; want ErrConcurrentModification (412)", err)
	}
	assertObject(t, mc, p, "bytes of A", "5")

	// Both observe A's version; C completes first, D's If-Match is stale.
	seen := api.ObjectVersion{Exists: true, ETag: etagA}
	idC, partsC := upload(t, c, p, 7, "bytes of C")
	idD, partsD := upload(t, c, p, 8, "bytes of D")
	etagC, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idC, Parts: partsC, Replaces: seen})
	if err != nil {
		t.Fatalf("CompleteUpload(C, If-Match A) = %v", err)
	}
	_, err = c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idD, Parts: partsD, Replaces: seen})
	if !errors.Is(err, api.ErrConcurrentModification) {
		t.Fatalf("CompleteUpload(D, stale If-Match) = %v; want ErrConcurrentModification (412)", err)
	}
	assertObject(t, mc, p, "bytes of C", "7")

	// The refused uploads are still there, to be aborted.
	for _, id := range []string{idB, idD} {
		if _, err := c.ListParts(ctx, p, id, 0, 0); err != nil {
			t.Fatalf("ListParts(%s) after a refused completion = %v; want the upload still there", id, err)
		}
		if err := c.AbortUpload(ctx, p, id); err != nil {
			t.Fatalf("AbortUpload(%s) = %v", id, err)
		}
		if _, err := c.ListParts(ctx, p, id, 0, 0); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("ListParts(%s) after abort = %v; want ErrNotFound", id, err)
		}
	}

	// If-Match the current version completes.
	idE, partsE := upload(t, c, p, 9, "bytes of E")
	if _, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idE, Parts: partsE, Replaces: api.ObjectVersion{Exists: true, ETag: etagC}}); err != nil {
		t.Fatalf("CompleteUpload(E, If-Match C) = %v", err)
	}
	assertObject(t, mc, p, "bytes of E", "9")

	// A version without an ETag has no condition: nothing is sent.
	idF, partsF := upload(t, c, p, 10, "bytes of F")
	_, err = c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: idF, Parts: partsF, Replaces: api.ObjectVersion{Exists: true}})
	if !errors.Is(err, api.ErrUpstream) {
		t.Fatalf("CompleteUpload(F, no ETag) = %v; want ErrUpstream, nothing sent", err)
	}
	assertObject(t, mc, p, "bytes of E", "9")
	if _, err := c.ListParts(ctx, p, idF, 0, 0); err != nil {
		t.Fatalf("ListParts(F) = %v; want the upload untouched", err)
	}
}

// TestConcurrentConditionalCompletes completes 20 uploads at once, all
// with If-Match the same version: exactly one wins, and the object holds
// its bytes.
func TestConcurrentConditionalCompletes(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mprace")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "mprace", Key: "obj"}
	etag0, err := put(ctx, c, p, "first", 1, api.ObjectVersion{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	ids := make([]string, n)
	parts := make([][]api.Part, n)
	for i := range n {
		ids[i], parts[i] = upload(t, c, p, api.Token(i+2), fmt.Sprintf("bytes of upload %02d", i))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		others  []error
	)
	for i := range n {
		wg.Go(func() {
			_, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: ids[i], Parts: parts[i], Replaces: api.ObjectVersion{Exists: true, ETag: etag0}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.Is(err, api.ErrConcurrentModification):
				others = append(others, err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 || len(others) != 0 {
		t.Fatalf("winners %v, other errors %v; want exactly one winner and only lost races", winners, others)
	}
	assertObject(t, server.Minio(t), p, fmt.Sprintf("bytes of upload %02d", winners[0]), fmt.Sprint(winners[0]+2))
	for i := range n {
		if i != winners[0] {
			if err := c.AbortUpload(ctx, p, ids[i]); err != nil {
				t.Errorf("AbortUpload(%d) = %v", i, err)
			}
		}
	}
}

// TestMultipartListings lists an upload's parts and a bucket's uploads.
func TestMultipartListings(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mplist")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "mplist", Key: "dir/obj"}
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 3})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), api.MinPartSize)
	for n := int32(1); n <= 3; n++ {
		if _, err := c.UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: n, Body: bytes.NewReader(big), Size: int64(len(big))}); err != nil {
			t.Fatalf("UploadPart(%d) = %v", n, err)
		}
	}
	page, err := c.ListParts(ctx, p, id, 0, 2)
	if err != nil || len(page.Parts) != 2 || !page.Truncated || page.NextMarker != 2 || page.Parts[0].Size != api.MinPartSize {
		t.Fatalf("ListParts(max 2) = %+v, %v; want parts 1 and 2, truncated at 2", page, err)
	}
	page, err = c.ListParts(ctx, p, id, page.NextMarker, 0)
	if err != nil || len(page.Parts) != 1 || page.Parts[0].Number != 3 || page.Truncated {
		t.Fatalf("ListParts(from 2) = %+v, %v; want part 3", page, err)
	}
	list, err := c.ListUploads(ctx, api.ListUploadsInput{Bucket: "mplist", Prefix: "dir/"})
	if err != nil || len(list.Uploads) != 1 || list.Uploads[0].UploadID != id || list.Uploads[0].Key != p.Key {
		t.Fatalf("ListUploads = %+v, %v; want the one upload", list, err)
	}
	// UploadPartCopy of a range of an existing object.
	src := api.ObjectPath{Bucket: "mplist", Key: "src"}
	if _, err := put(ctx, c, src, "0123456789", 1, api.ObjectVersion{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyPart(ctx, api.CopyPartInput{Path: p, UploadID: id, Number: 4, Source: src, SourceRange: "bytes=2-5"}); err != nil {
		t.Fatalf("CopyPart = %v", err)
	}
	page, err = c.ListParts(ctx, p, id, 3, 0)
	if err != nil || len(page.Parts) != 1 || page.Parts[0].Size != 4 {
		t.Fatalf("ListParts(from 3) = %+v, %v; want the copied part of 4 bytes", page, err)
	}
	if err := c.AbortUpload(ctx, p, id); err != nil {
		t.Fatal(err)
	}
	if err := c.AbortUpload(ctx, p, "no-such-upload"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("AbortUpload(unknown) = %v; want ErrNotFound", err)
	}
}

// assertObject reads p back with minio-go: its bytes and recorded token.
func assertObject(tb testing.TB, mc *minio.Client, p api.ObjectPath, body, token string) {
	tb.Helper()
	obj, err := mc.GetObject(context.Background(), p.Bucket, p.Key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil {
		tb.Fatalf("read %s: %v", p.Key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if string(got) != body || info.UserMetadata["Fence-Token"] != token {
		tb.Fatalf("object %s = %q, fence-token %q; want %q, %q", p.Key, got, info.UserMetadata["Fence-Token"], body, token)
	}
}
