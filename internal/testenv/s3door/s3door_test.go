package s3door_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/internal/testenv"
	"fencegate/internal/testenv/s3door"
)

const (
	writerKey    = "AKIAS3DOORWRITER"
	writerSecret = "s3door-writer-secret"
	adminKey     = "AKIAS3DOORADMIN"
	adminSecret  = "s3door-admin-secret"
)

// client is a minio-go client of the door at endpoint, signing with
// accessKey and secret.
func client(t *testing.T, endpoint, accessKey, secret string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(accessKey, secret, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDoor: the door New wires is the S3 API on a gateway that fences
// its writes in etcd and writes to versitygw, with its identities' S3
// keys, bucket listings and bucket administration: a write lands in the
// store with its token and raises the key's mark, a stale one is
// refused and lands nothing, a signature of another secret is refused,
// the bucket lists, and an admin creates a bucket.
func TestDoor(t *testing.T) {
	s3 := testenv.StartS3(t)
	const bucket = "s3door"
	s3.CreateBucket(t, bucket)
	door := s3door.New(t, s3, edge.Auth{Identities: []edge.Identity{
		{
			Name:   "writer",
			Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpRead, edge.OpWrite}}},
			S3Keys: []edge.S3Key{{AccessKeyID: writerKey, SecretAccessKey: writerSecret}},
		},
		{
			Name:   "admin",
			Grants: []edge.Grant{{Prefix: "s3/adm", Operations: []edge.Operation{edge.OpAdmin}}},
			S3Keys: []edge.S3Key{{AccessKeyID: adminKey, SecretAccessKey: adminSecret}},
		},
	}})
	srv := httptest.NewServer(door.Handler)
	t.Cleanup(srv.Close)
	writer := client(t, srv.URL, writerKey, writerSecret)
	ctx := context.Background()
	put := func(c *minio.Client, key, body string, token int) error {
		_, err := c.PutObject(ctx, bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{
			UserMetadata: map[string]string{"fence-token": fmt.Sprint(token)},
		})
		return err
	}

	if err := put(writer, "k", "first", 5); err != nil {
		t.Fatalf("PutObject with token 5: %v", err)
	}
	if err := put(writer, "k", "stale", 4); minio.ToErrorResponse(err).Code != "StaleFenceToken" {
		t.Errorf("PutObject with token 4 after 5: %v; want StaleFenceToken", err)
	}
	if body, token, ok := testenv.ReadStored(t, s3.Minio(t), bucket, "k"); !ok || !bytes.Equal(body, []byte("first")) || token != "5" {
		t.Errorf("stored %q with token %q (present %v); want %q with token 5", body, token, ok, "first")
	}
	mark, err := door.Store.HighWaterMark(ctx, api.ObjectResource(bucket, "k"))
	if err != nil || mark != 5 {
		t.Errorf("HighWaterMark = %v, %v; want 5", mark, err)
	}

	if err := put(client(t, srv.URL, writerKey, "another-secret"), "k", "forged", 9); minio.ToErrorResponse(err).Code != "SignatureDoesNotMatch" {
		t.Errorf("PutObject signed with another secret: %v; want SignatureDoesNotMatch", err)
	}

	var keys []string
	for obj := range writer.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("ListObjects: %v", obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	if len(keys) != 1 || keys[0] != "k" {
		t.Errorf("ListObjects = %q; want [k]", keys)
	}

	if err := client(t, srv.URL, adminKey, adminSecret).MakeBucket(ctx, "adm-made", minio.MakeBucketOptions{}); err != nil {
		t.Errorf("CreateBucket by the admin: %v", err)
	}
	if ok, err := s3.Minio(t).BucketExists(ctx, "adm-made"); err != nil || !ok {
		t.Errorf("the store has bucket adm-made: %v, %v; want true", ok, err)
	}
}
