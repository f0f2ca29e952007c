package s3api_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// newAdminBucketName returns a bucket name that the harness's admin
// identity administers (adminBuckets), new to the shared versitygw, and
// removes that bucket, emptied, when the test ends.
func newAdminBucketName(tb testing.TB, mc *minio.Client) string {
	tb.Helper()
	name := fmt.Sprintf("%s%d-%d", adminBuckets, time.Now().UnixNano()%1e9, bucketSeq.Add(1))
	tb.Cleanup(func() {
		ctx := context.Background()
		if ok, _ := mc.BucketExists(ctx, name); !ok {
			return
		}
		for obj := range mc.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
			_ = mc.RemoveObject(ctx, name, obj.Key, minio.RemoveObjectOptions{})
		}
		_ = mc.RemoveBucket(ctx, name)
	})
	return name
}

// bucketExists reports whether bucket exists in versitygw, as minio-go
// (not the door) sees it.
func bucketExists(tb testing.TB, mc *minio.Client, bucket string) bool {
	tb.Helper()
	ok, err := mc.BucketExists(context.Background(), bucket)
	if err != nil {
		tb.Fatalf("BucketExists(%q): %v", bucket, err)
	}
	return ok
}

// TestBucketAdministration: an identity with an admin grant on a bucket
// creates and deletes it through the door with aws-sdk-go-v2, and gets
// S3's own answers from the store: BucketAlreadyOwnedByYou for a bucket
// it has, BucketNotEmpty for a bucket that holds an object (which stays),
// NoSuchBucket for one that is gone.
func TestBucketAdministration(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	admin := d.client(adminKey)
	name := newAdminBucketName(t, d.minio)

	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket(%q) = %v; want success", name, err)
	}
	if !bucketExists(t, d.minio, name) {
		t.Fatalf("bucket %q was not created", name)
	}
	_, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	wantStoreCode(t, "create again", err, http.StatusConflict, "BucketAlreadyOwnedByYou",
		"Your previous request to create the named bucket succeeded and you already own it.")

	if _, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("k"),
		Body: strings.NewReader("x"), Metadata: map[string]string{"fence-token": "5"}}); err != nil {
		t.Fatalf("PutObject = %v", err)
	}
	_, err = admin.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	wantStoreCode(t, "delete a bucket that holds an object", err, http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
	if !bucketExists(t, d.minio, name) {
		t.Fatalf("a bucket that held an object was deleted")
	}

	if _, err := admin.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String("k")},
		withHeader("X-Fence-Token", "5")); err != nil {
		t.Fatalf("DeleteObject = %v", err)
	}
	if _, err := admin.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("DeleteBucket(%q) = %v; want success", name, err)
	}
	if bucketExists(t, d.minio, name) {
		t.Fatalf("bucket %q still exists", name)
	}
	_, err = admin.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	wantStoreCode(t, "delete a bucket that is gone", err, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
}

// TestBucketAdministrationNeedsAdmin: CreateBucket and DeleteBucket by an
// identity without an admin grant on the whole bucket (read and write on
// every S3 object, read only, admin of a part of the bucket) are refused
// 403 AccessDenied before anything reaches S3: nothing is created or
// deleted. The refusal is audited as a refused write of s3/BUCKET/.
func TestBucketAdministrationNeedsAdmin(t *testing.T) {
	var logs syncBuffer
	d := newDoor(t, doorOptions{gateway: gateway.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	ctx := context.Background()
	absent := newAdminBucketName(t, d.minio)
	empty := newAdminBucketName(t, d.minio)
	if err := d.minio.MakeBucket(ctx, empty, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, key, bucket string
		create            bool
	}{
		{name: "writer creates", key: writerKey, bucket: absent, create: true},
		{name: "reader creates", key: readerKey, bucket: absent, create: true},
		{name: "writer deletes", key: writerKey, bucket: empty},
		{name: "reader deletes", key: readerKey, bucket: empty},
		{name: "logs deletes", key: logsKey, bucket: d.bucket},
		{name: "admin of logs/ deletes the bucket", key: adminKey, bucket: d.bucket},
		{name: "admin of logs/ creates the bucket", key: adminKey, bucket: d.bucket, create: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			c := d.client(tt.key)
			var err error
			if tt.create {
				_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(tt.bucket)})
			} else {
				_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(tt.bucket)})
			}
			wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
		})
	}
	if bucketExists(t, d.minio, absent) {
		t.Errorf("bucket %q was created", absent)
	}
	if !bucketExists(t, d.minio, empty) || !bucketExists(t, d.minio, d.bucket) {
		t.Errorf("a bucket was deleted")
	}
	d.settle()
	out := logs.String()
	for _, want := range []string{
		`msg="write refused" resource=s3/` + absent + `/ problem_type=`,
		`msg="write refused" resource=s3/` + empty + `/ problem_type=`,
		`identity=reader api=s3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestCreateBucketRefusesWhatItCannotHonour: a CreateBucket whose headers
// or configuration ask for what the gateway does not honour (public ACLs,
// grants, object lock, object ownership that keeps ACLs, a directory
// bucket, another region) is refused with a reason, not dropped, and
// nothing reaches S3; a configuration that does not parse, or is too
// large, is refused as S3 refuses it. What the gateway honours anyway
// (private, no object lock, ACLs disabled, the door's own region) is
// accepted, and the bucket is created.
func TestCreateBucketRefusesWhatItCannotHonour(t *testing.T) {
	d := newDoor(t, doorOptions{})
	config := func(inner string) string {
		return `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + inner + `</CreateBucketConfiguration>`
	}
	tests := []struct {
		name   string
		header map[string]string
		body   string
		status int
		code   string
	}{
		{name: "public-read", header: map[string]string{"X-Amz-Acl": "public-read"}, status: 501, code: "NotImplemented"},
		{name: "public-read-write", header: map[string]string{"X-Amz-Acl": "public-read-write"}, status: 501, code: "NotImplemented"},
		{name: "authenticated-read", header: map[string]string{"X-Amz-Acl": "authenticated-read"}, status: 501, code: "NotImplemented"},
		{name: "grant read", header: map[string]string{"X-Amz-Grant-Read": `uri="http://acs.amazonaws.com/groups/global/AllUsers"`}, status: 501, code: "NotImplemented"},
		{name: "grant full control", header: map[string]string{"X-Amz-Grant-Full-Control": `id="abc"`}, status: 501, code: "NotImplemented"},
		{name: "grant write", header: map[string]string{"X-Amz-Grant-Write": `id="abc"`}, status: 501, code: "NotImplemented"},
		{name: "grant read acp", header: map[string]string{"X-Amz-Grant-Read-Acp": `id="abc"`}, status: 501, code: "NotImplemented"},
		{name: "grant write acp", header: map[string]string{"X-Amz-Grant-Write-Acp": `id="abc"`}, status: 501, code: "NotImplemented"},
		{name: "object lock", header: map[string]string{"X-Amz-Bucket-Object-Lock-Enabled": "true"}, status: 501, code: "NotImplemented"},
		{name: "object lock TRUE", header: map[string]string{"X-Amz-Bucket-Object-Lock-Enabled": "TRUE"}, status: 501, code: "NotImplemented"},
		{name: "object lock garbage", header: map[string]string{"X-Amz-Bucket-Object-Lock-Enabled": "yes"}, status: 400, code: "InvalidArgument"},
		{name: "ownership ObjectWriter", header: map[string]string{"X-Amz-Object-Ownership": "ObjectWriter"}, status: 501, code: "NotImplemented"},
		{name: "ownership BucketOwnerPreferred", header: map[string]string{"X-Amz-Object-Ownership": "BucketOwnerPreferred"}, status: 501, code: "NotImplemented"},
		{name: "ownership garbage", header: map[string]string{"X-Amz-Object-Ownership": "Everyone"}, status: 400, code: "InvalidArgument"},
		{name: "another region", body: config(`<LocationConstraint>eu-west-1</LocationConstraint>`), status: 400, code: "InvalidLocationConstraint"},
		{name: "two regions", body: config(`<LocationConstraint>us-east-1</LocationConstraint><LocationConstraint>us-east-1</LocationConstraint>`), status: 400, code: "MalformedXML"},
		{name: "directory bucket", body: config(`<Location><Name>use1-az4</Name><Type>AvailabilityZone</Type></Location><Bucket><DataRedundancy>SingleAvailabilityZone</DataRedundancy><Type>Directory</Type></Bucket>`), status: 501, code: "NotImplemented"},
		{name: "tags", body: config(`<Tags><Tag><Key>a</Key><Value>b</Value></Tag></Tags>`), status: 501, code: "NotImplemented"},
		{name: "unknown element", body: config(`<Region>us-east-1</Region>`), status: 400, code: "MalformedXML"},
		{name: "a document after it", body: config(``) + `<CreateBucketConfiguration/>`, status: 400, code: "MalformedXML"},
		{name: "not xml", body: "<CreateBucketConfiguration>", status: 400, code: "MalformedXML"},
		{name: "another document", body: `<Delete><Object><Key>k</Key></Object></Delete>`, status: 400, code: "MalformedXML"},
		{name: "too large", body: config(`<LocationConstraint>us-east-1</LocationConstraint>` + strings.Repeat(" ", 70<<10)), status: 400, code: "EntityTooLarge"},
		{name: "private", header: map[string]string{"X-Amz-Acl": "private"}, status: 200},
		{name: "no object lock", header: map[string]string{"X-Amz-Bucket-Object-Lock-Enabled": "false"}, status: 200},
		{name: "ownership BucketOwnerEnforced", header: map[string]string{"X-Amz-Object-Ownership": "BucketOwnerEnforced"}, status: 200},
		{name: "the door's region", body: config(`<LocationConstraint>us-east-1</LocationConstraint>`), status: 200},
		{name: "empty configuration", body: config(``), status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			bucket := newAdminBucketName(t, d.minio)
			req, err := http.NewRequest(http.MethodPut, d.url+"/"+bucket, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range tt.header {
				req.Header.Set(name, value)
			}
			resp := d.rawRequest(t, adminKey, req, []byte(tt.body))
			if tt.status == http.StatusOK {
				if resp.StatusCode != http.StatusOK {
					e := readS3Error(t, resp)
					t.Fatalf("got %d %s (%s); want 200", resp.StatusCode, e.Code, e.Message)
				}
				if !bucketExists(t, d.minio, bucket) {
					t.Fatalf("bucket %q was not created", bucket)
				}
				return
			}
			e := readS3Error(t, resp)
			if resp.StatusCode != tt.status || e.Code != tt.code {
				t.Errorf("got %d %s (%s); want %d %s", resp.StatusCode, e.Code, e.Message, tt.status, tt.code)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
			if bucketExists(t, d.minio, bucket) {
				t.Errorf("bucket %q was created", bucket)
			}
		})
	}
}

// TestDeleteBucketRefusesWhatItCannotHonour: a DeleteBucket with a
// condition the gateway cannot check (the expected owner's account) is
// refused, not dropped, and the bucket stays.
func TestDeleteBucketRefusesWhatItCannotHonour(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	bucket := newAdminBucketName(t, d.minio)
	if err := d.minio.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	d.s3.Reset()
	_, err := d.client(adminKey).DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket), ExpectedBucketOwner: aws.String("111122223333")})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	if n := d.s3.Count(); n != 0 {
		t.Errorf("%d requests reached S3; want 0", n)
	}
	if !bucketExists(t, d.minio, bucket) {
		t.Fatalf("bucket %q was deleted", bucket)
	}
}

// TestRecreatedBucketKeepsMarks: a bucket deleted and created again does
// not let an old token write: the high-water marks of its objects are
// per resource and stay in etcd, so the key written with token 10, then
// deleted with it, refuses token 9 in the new bucket (409, nothing
// stored), and takes 10 again.
func TestRecreatedBucketKeepsMarks(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	admin := d.client(adminKey)
	bucket := newAdminBucketName(t, d.minio)
	put := func(token api.Token, body string) error {
		_, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"),
			Body: strings.NewReader(body), Metadata: map[string]string{"fence-token": token.String()}})
		return err
	}
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if err := put(10, "ten"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, withHeader("X-Fence-Token", "10")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	hwm, err := d.store.HighWaterMark(ctx, api.ObjectResource(bucket, "k"))
	if err != nil || hwm != 10 {
		t.Fatalf("mark of s3/%s/k in etcd = %v, %v; want 10", bucket, hwm, err)
	}
	resp := wantAPIError(t, put(9, "nine"), http.StatusConflict, "StaleFenceToken")
	if got := resp.Header.Get("X-Fence-High-Water-Mark"); got != "10" {
		t.Errorf("X-Fence-High-Water-Mark = %q; want 10", got)
	}
	if _, _, ok := testenv.ReadStored(t, d.minio, bucket, "k"); ok {
		t.Fatalf("the stale write landed in the new bucket")
	}
	if err := put(10, "ten again"); err != nil {
		t.Fatalf("PutObject with the mark's own token = %v; want success", err)
	}
	if body, token, _ := testenv.ReadStored(t, d.minio, bucket, "k"); string(body) != "ten again" || token != "10" {
		t.Fatalf("stored %q with token %q; want %q with 10", body, token, "ten again")
	}
}

// TestBucketAdministrationOfGCSBucket: a bucket the gateway keeps in GCS
// is not created or deleted through the S3 API, even by an operator
// (admin of everything): 501, and nothing reaches GCS.
func TestBucketAdministrationOfGCSBucket(t *testing.T) {
	g := newGCSDoorWith(t, "gcsadm", gcsDoorOptions{auth: func(string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{{Name: "writer", Grants: []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpAdmin}}}}},
			APIKeys:    []edge.APIKey{{SHA256: sha256.Sum256([]byte("rest-writer")), Identity: "writer"}},
		}
	}})
	ctx := context.Background()
	c := g.client(writerKey)
	g.proxy.Reset()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(g.bucket)})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(g.bucket)})
	wantAPIError(t, err, http.StatusNotImplemented, "NotImplemented")
	if n := g.proxy.Count(); n != 0 {
		t.Errorf("%d requests reached GCS; want 0", n)
	}
}
