package gcs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"fencegate/api"
)

// TestPutKeepsMetadata: a Put's user metadata and standard headers are on
// the GCS object (Metadata, CacheControl, ContentDisposition,
// ContentLanguage) and come back on Head and Get; a fence-token entry
// does not replace the token; Expires, which GCS does not keep, and
// Content-Encoding, which GCS would serve decoded, are refused with
// nothing sent.
func TestPutKeepsMetadata(t *testing.T) {
	c, rec, _ := newBackend(t)
	ctx := context.Background()
	meta := api.ObjectMetadata{
		User:               map[string]string{"mtime": "1700000000.5", api.MetadataFenceToken: "999"},
		CacheControl:       "no-cache",
		ContentDisposition: "inline",
		ContentLanguage:    "en",
	}
	body := "stored as sent"
	if _, err := c.Put(ctx, api.PutObjectInput{Path: path, Body: strings.NewReader(body), Size: int64(len(body)), Token: 5, Metadata: meta, ContentType: "text/plain"}); err != nil {
		t.Fatalf("put: %v", err)
	}
	want := meta
	want.User = map[string]string{"mtime": "1700000000.5"}
	head, err := c.Head(ctx, api.GetObjectInput{Path: path})
	if err != nil || fmt.Sprint(head.Metadata) != fmt.Sprint(want) || head.Token != 5 {
		t.Fatalf("Head = %+v, %v; want metadata %+v, token 5", head, err, want)
	}
	get, err := c.Get(ctx, api.GetObjectInput{Path: path})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(got) != body || fmt.Sprint(get.Metadata) != fmt.Sprint(want) || get.Token != 5 {
		t.Fatalf("Get = %q, metadata %+v, token %v; want %q, %+v, 5", got, get.Metadata, get.Token, body, want)
	}

	for _, refused := range []api.ObjectMetadata{{Expires: "Tue, 06 May 2031 07:08:09 GMT"}, {ContentEncoding: "gzip"}} {
		before := len(rec.sent())
		_, err = c.Put(ctx, api.PutObjectInput{Path: path, Body: strings.NewReader("x"), Size: 1, Token: 6, Replaces: api.ObjectVersion{Exists: true, ETag: head.ETag}, Metadata: refused})
		if !errors.Is(err, api.ErrInvalidRequest) || len(rec.sent()) != before {
			t.Fatalf("put with %+v = %v, %d requests; want api.ErrInvalidRequest and none", refused, err, len(rec.sent())-before)
		}
	}
}
