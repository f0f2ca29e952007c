package s3_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// TestMetadataOnBothPaths: a Put's metadata (user metadata and the
// standard headers) is sent alike on the signed path and through the SDK,
// lands in versitygw as minio-go reads it, and comes back on Head and Get
// of either path; a fence-token entry in the user metadata does not
// replace the token.
func TestMetadataOnBothPaths(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "meta")
	rec := newWireRecorder(t, server.Endpoint())
	meta := api.ObjectMetadata{
		User:               map[string]string{"mtime": "1700000000.5", "owner": "ann", api.MetadataFenceToken: "999"},
		CacheControl:       "max-age=60",
		ContentDisposition: `attachment; filename="a.txt"`,
		ContentEncoding:    "gzip",
		ContentLanguage:    "en",
		Expires:            "Tue, 06 May 2031 07:08:09 GMT",
	}
	wantUser := map[string]string{"mtime": "1700000000.5", "owner": "ann"}
	headers := []string{"X-Amz-Meta-Mtime", "X-Amz-Meta-Owner", "X-Amz-Meta-Fence-Token", "Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}
	var sent [][]string
	for _, path := range paths(t, rec.srv.URL) {
		p := api.ObjectPath{Bucket: "meta", Key: path.name}
		if _, err := path.client.Put(ctx, api.PutObjectInput{Path: p, Body: strings.NewReader("body"), Size: 4, Token: 5, Metadata: meta}); err != nil {
			t.Fatalf("%s: put: %v", path.name, err)
		}
		var values []string
		for _, h := range headers {
			values = append(values, rec.last(t).Header.Get(h))
		}
		sent = append(sent, values)
		info, err := server.Minio(t).StatObject(ctx, p.Bucket, p.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.UserMetadata["Mtime"] != "1700000000.5" || info.UserMetadata["Owner"] != "ann" || info.UserMetadata["Fence-Token"] != "5" ||
			info.Metadata.Get("Cache-Control") != meta.CacheControl || info.Metadata.Get("Content-Encoding") != "gzip" ||
			info.Metadata.Get("Content-Disposition") != meta.ContentDisposition || info.Metadata.Get("Content-Language") != "en" ||
			info.Expires.UTC().Format(http.TimeFormat) != meta.Expires {
			t.Fatalf("%s: stored %v %v expires %v; want %+v with fence-token 5", path.name, info.UserMetadata, info.Metadata, info.Expires, meta)
		}
		want := meta
		want.User = wantUser
		head, err := path.client.Head(ctx, api.GetObjectInput{Path: p})
		if err != nil || fmt.Sprint(head.Metadata) != fmt.Sprint(want) || head.Token != 5 {
			t.Fatalf("%s: Head = %+v, %v; want metadata %+v and token 5", path.name, head, err, want)
		}
		get, err := path.client.Get(ctx, api.GetObjectInput{Path: p})
		if err != nil {
			t.Fatalf("%s: get: %v", path.name, err)
		}
		body, _ := io.ReadAll(get.Body)
		get.Body.Close()
		if string(body) != "body" || fmt.Sprint(get.Metadata) != fmt.Sprint(want) {
			t.Fatalf("%s: Get = %q with metadata %+v; want the stored bytes and %+v", path.name, body, get.Metadata, want)
		}
	}
	if fmt.Sprint(sent[0]) != fmt.Sprint(sent[1]) {
		t.Errorf("the signed path sent %q; the SDK %q (%v)", sent[0], sent[1], headers)
	}
}
