package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// TestPartReadsOnRealS3 reads each part of an object uploaded in three
// parts through both paths (Get, and Head, which the signed path sends
// itself): the part's bytes, its ContentRange, the object's PartsCount
// and token; a part past the last is api.ErrRangeNotSatisfiable.
func TestPartReadsOnRealS3(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "part-reads")
	sizes := []int{5 << 20, 5 << 20, 1000}
	body := make([]byte, sizes[0]+sizes[1]+sizes[2])
	_, _ = rand.NewChaCha8([32]byte{3}).Read(body)
	core := minio.Core{Client: server.Minio(t)}
	id, err := core.NewMultipartUpload(ctx, "part-reads", "mp", minio.PutObjectOptions{UserMetadata: map[string]string{api.MetadataFenceToken: "17"}})
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	var done []minio.CompletePart
	for i, rest := 0, body; i < len(sizes); i++ {
		part := rest[:sizes[i]]
		rest = rest[sizes[i]:]
		p, err := core.PutObjectPart(ctx, "part-reads", "mp", id, i+1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
		done = append(done, minio.CompletePart{PartNumber: i + 1, ETag: p.ETag})
	}
	if _, err := core.CompleteMultipartUpload(ctx, "part-reads", "mp", id, done, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	p := api.ObjectPath{Bucket: "part-reads", Key: "mp"}
	for _, path := range paths(t, server.Endpoint()) {
		t.Run(path.name, func(t *testing.T) {
			c := path.client
			from := 0
			for i, part := range parts {
				in := api.GetObjectInput{Path: p, PartNumber: int32(i + 1)}
				wantRange := fmt.Sprintf("bytes %d-%d/%d", from, from+len(part)-1, len(body))
				from += len(part)
				obj, err := c.Get(ctx, in)
				if err != nil {
					t.Fatalf("Get part %d: %v", i+1, err)
				}
				got, err := io.ReadAll(obj.Body)
				obj.Body.Close()
				if err != nil || !bytes.Equal(got, part) || obj.Size != int64(len(part)) || obj.ContentRange != wantRange || obj.PartsCount != 3 || obj.Token != 17 {
					t.Fatalf("Get part %d = %d bytes (equal %v), Size %d, ContentRange %q, PartsCount %d, token %d, %v; want the part, %q, 3, 17",
						i+1, len(got), bytes.Equal(got, part), obj.Size, obj.ContentRange, obj.PartsCount, obj.Token, err, wantRange)
				}
				head, err := c.Head(ctx, in)
				if err != nil || head.Size != int64(len(part)) || head.ContentRange != wantRange || head.PartsCount != 3 || head.Token != 17 {
					t.Fatalf("Head part %d = %+v, %v; want Size %d, ContentRange %q, PartsCount 3, token 17", i+1, head, err, len(part), wantRange)
				}
			}
			whole, err := c.Head(ctx, api.GetObjectInput{Path: p})
			if err != nil || whole.Size != int64(len(body)) || whole.ContentRange != "" {
				t.Fatalf("Head without a part = %+v, %v; want the whole object's size, no ContentRange", whole, err)
			}
			past := api.GetObjectInput{Path: p, PartNumber: 4}
			if _, err := c.Get(ctx, past); !errors.Is(err, api.ErrRangeNotSatisfiable) {
				t.Fatalf("Get part 4 = %v; want %v", err, api.ErrRangeNotSatisfiable)
			}
			if _, err := c.Head(ctx, past); !errors.Is(err, api.ErrRangeNotSatisfiable) {
				t.Fatalf("Head part 4 = %v; want %v", err, api.ErrRangeNotSatisfiable)
			}
		})
	}
}
