package s3api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestEverythingElseIsRefused sends a table of S3 requests the door does
// not implement (ACLs, policies, bucket tagging, tags of a version,
// versioning, object lock, multipart, ...), each signed and carrying a
// token: each is answered 501 NotImplemented, nothing reaches S3, the
// object is unchanged and no mark is raised.
func TestEverythingElseIsRefused(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.minio.PutObject(context.Background(), d.bucket, "key", strings.NewReader("original"), -1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	b := "/" + d.bucket
	tests := []struct {
		method, target string
		header         map[string]string
	}{
		{method: "POST", target: b},                             // browser POST upload
		{method: "PUT", target: b + "?acl"},                     // PutBucketAcl
		{method: "GET", target: b + "?acl"},                     // GetBucketAcl
		{method: "PUT", target: b + "?policy"},                  // PutBucketPolicy
		{method: "GET", target: b + "?policy"},                  // GetBucketPolicy
		{method: "PUT", target: b + "?tagging"},                 // PutBucketTagging
		{method: "PUT", target: b + "?versioning"},              // PutBucketVersioning
		{method: "GET", target: b + "?versions"},                // ListObjectVersions
		{method: "PUT", target: b + "?lifecycle"},               // PutBucketLifecycle
		{method: "PUT", target: b + "?cors"},                    // PutBucketCors
		{method: "PUT", target: b + "?object-lock"},             // PutObjectLockConfiguration
		{method: "PUT", target: b + "?notification"},            // PutBucketNotification
		{method: "PUT", target: b + "?replication"},             // PutBucketReplication
		{method: "PUT", target: b + "?encryption"},              // PutBucketEncryption
		{method: "PUT", target: b + "?website"},                 // PutBucketWebsite
		{method: "GET", target: b + "?list-type=2&unknown=1"},   // a listing with an unknown parameter
		{method: "PUT", target: b + "/key?acl"},                 // PutObjectAcl
		{method: "PUT", target: b + "/key?tagging&versionId=1"}, // PutObjectTagging of a version
		{method: "PUT", target: b + "/key?retention"},           // PutObjectRetention
		{method: "PUT", target: b + "/key?legal-hold"},          // PutObjectLegalHold
		{method: "PUT", target: b + "/key?versionId=1"},         // a PUT with a version
		{method: "GET", target: b + "/key?acl"},                 // GetObjectAcl
		{method: "GET", target: b + "/key?tagging&versionId=1"}, // GetObjectTagging of a version
		{method: "GET", target: b + "/key?attributes"},          // GetObjectAttributes
		{method: "GET", target: b + "/key?response-content-type=text/html"},
		{method: "DELETE", target: b + "/key?tagging&versionId=1"}, // DeleteObjectTagging of a version
		{method: "DELETE", target: b + "/key?versionId=1"},         // DeleteObject of a version
		{method: "POST", target: b + "/key?restore"},               // RestoreObject
		{method: "POST", target: b + "/key?select&select-type=2"},  // SelectObjectContent
		{method: "POST", target: b + "/key?uploads&unknown=1"},     // CreateMultipartUpload with an unknown parameter
		{method: "PUT", target: b + "/key?uploadId=u"},             // UploadPart without a part number
		{method: "GET", target: b + "/key?uploads"},                // no such operation
		{method: "POST", target: b + "/key?uploads", header: map[string]string{"X-Amz-Acl": "public-read"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"If-None-Match": `"abc"`}}, // S3 takes only * on a write
		{method: "POST", target: b + "/key?uploads", header: map[string]string{"If-None-Match": "*"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Expected-Bucket-Owner": "111122223333"}},
		{method: "GET", target: b + "/key", header: map[string]string{"X-Amz-Expected-Bucket-Owner": "111122223333"}},
		{method: "DELETE", target: b + "/key", header: map[string]string{"X-Amz-Expected-Bucket-Owner": "111122223333"}},
		{method: "GET", target: b + "?list-type=2", header: map[string]string{"X-Amz-Expected-Bucket-Owner": "111122223333"}},
		{method: "PUT", target: b + "/copy", header: map[string]string{"X-Amz-Copy-Source": b + "/key", "X-Amz-Source-Expected-Bucket-Owner": "111122223333"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"If-Match": `"abc"`, "X-Amz-Copy-Source": d.bucket + "/key"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Acl": "public-read"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Acl": "private, public-read"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Acl": "bucket-owner-full-control"}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Object-Lock-Mode": "GOVERNANCE"}},
		{method: "DELETE", target: b + "/key", header: map[string]string{"X-Amz-Tagging": "a=b"}}, // tags of no object
		{method: "DELETE", target: b + "/key", header: map[string]string{"If-Match": `"abc"`}},
		{method: "PUT", target: b + "/key", header: map[string]string{"X-Amz-Copy-Source": d.bucket + "/key", "X-Amz-Copy-Source-Range": "bytes=0-1"}},
		{method: "PATCH", target: b + "/key"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.TrimPrefix(tt.target, b), func(t *testing.T) {
			d.s3.Reset()
			body := []byte("refused bytes")
			if tt.method == "GET" || tt.method == "DELETE" {
				body = nil
			}
			req, err := http.NewRequest(tt.method, d.url+tt.target, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Meta-Fence-Token", "7")
			for name, value := range tt.header {
				req.Header.Set(name, value)
			}
			resp := d.rawRequest(t, writerKey, req, body)
			e := readS3Error(t, resp)
			if resp.StatusCode != http.StatusNotImplemented || e.Code != "NotImplemented" {
				t.Errorf("got %d %s (%s); want 501 NotImplemented", resp.StatusCode, e.Code, e.Message)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3; want 0", n)
			}
			if hwm := d.mark(t, "key"); hwm != 0 {
				t.Errorf("mark raised to %d", hwm)
			}
		})
	}
	if body, token, _ := d.stored(t, "key"); body != "original" || token != "" {
		t.Fatalf("the object is %q with token %q; want it untouched", body, token)
	}
}

// TestAddressingAttacks: keys with dot segments (plain or encoded) and
// empty segments are refused; %2F in a key is a '/', as on S3, and the
// mark is the decoded key's; bucket names S3 would not create are
// refused; without Config.Domain the Host header never picks a bucket.
func TestAddressingAttacks(t *testing.T) {
	d := newDoor(t, doorOptions{})
	put := func(t *testing.T, target, host string) (*http.Response, s3ErrorBody) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, d.url+target, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		} else {
			// Send the target as written (an absolute-form target,
			// whose host the server takes over the Host header).
			req.URL.Opaque = "//" + req.URL.Host + strings.SplitN(target, "?", 2)[0]
		}
		req.Header.Set("X-Amz-Meta-Fence-Token", "3")
		resp := d.rawRequest(t, writerKey, req, []byte("x"))
		if resp.StatusCode == http.StatusOK {
			return resp, s3ErrorBody{}
		}
		return resp, readS3Error(t, resp)
	}
	b := "/" + d.bucket
	refused := []struct {
		target, code string
	}{
		{b + "/a/../b", "InvalidArgument"},
		{b + "/a/%2E%2E/b", "InvalidArgument"},
		{b + "/../" + d.bucket + "/b", "InvalidArgument"},
		{b + "/a//b", "InvalidArgument"},
		{b + "/a/./b", "InvalidArgument"},
		{b + "/a%00b", "InvalidArgument"},
		{b + "/" + strings.Repeat("k", 1025), "KeyTooLongError"},
		{"/UPPER/key", "InvalidBucketName"},
		{"/ab/key", "InvalidBucketName"},
		{"/bad..name/key", "InvalidBucketName"},
		{"/-bucket/key", "InvalidBucketName"},
		{"/%2E%2E/key", "InvalidBucketName"},
	}
	for _, tt := range refused {
		t.Run(tt.target, func(t *testing.T) {
			d.s3.Reset()
			resp, e := put(t, tt.target, "")
			if resp.StatusCode != http.StatusBadRequest || e.Code != tt.code {
				t.Errorf("got %d %s (%s); want 400 %s", resp.StatusCode, e.Code, e.Message, tt.code)
			}
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3", n)
			}
		})
	}
	t.Run("%2F is a slash", func(t *testing.T) {
		if resp, e := put(t, b+"/dir%2Ffile", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s", resp.StatusCode, e.Code)
		}
		if _, token, ok := d.stored(t, "dir/file"); !ok || token != "3" {
			t.Fatalf("dir/file not written with token 3")
		}
		if hwm := d.mark(t, "dir/file"); hwm != 3 {
			t.Fatalf("mark of dir/file = %d; want 3", hwm)
		}
	})
	t.Run("Host is not read without a domain", func(t *testing.T) {
		victim := d.bucket + "-victim"
		sharedS3.CreateBucket(t, victim)
		// Virtual-hosted style for the victim: without a domain, the
		// path names the bucket ("k" is not one: refused).
		if resp, _ := put(t, "/k", victim+".localhost"); resp.StatusCode/100 == 2 {
			t.Fatalf("a virtual-hosted request was served without a domain")
		}
		if resp, e := put(t, b+"/hosted", victim+".localhost"); resp.StatusCode != http.StatusOK {
			t.Fatalf("path-style put with a spoofed Host: %d %s", resp.StatusCode, e.Code)
		}
		if _, _, ok := d.stored(t, "hosted"); !ok {
			t.Fatalf("the path's bucket did not get the object")
		}
		objs := d.minio.ListObjects(context.Background(), victim, minio.ListObjectsOptions{Recursive: true})
		for o := range objs {
			t.Fatalf("the Host's bucket got %q", o.Key)
		}
	})
}

// TestVirtualHostedStyle: with Config.Domain, BUCKET.DOMAIN addresses the
// bucket, and the path is the key.
func TestVirtualHostedStyle(t *testing.T) {
	d := newDoor(t, doorOptions{domain: "s3.example"})
	req, _ := http.NewRequest(http.MethodPut, d.url+"/vkey", strings.NewReader("virtual"))
	req.Host = d.bucket + ".s3.example"
	req.Header.Set("X-Amz-Meta-Fence-Token", "4")
	resp := d.rawRequest(t, writerKey, req, []byte("virtual"))
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("virtual-hosted put: %d %s", resp.StatusCode, b)
	}
	if body, token, _ := d.stored(t, "vkey"); body != "virtual" || token != "4" {
		t.Fatalf("stored %q token %q", body, token)
	}
	// Path style still works on the domain itself.
	req, _ = http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/pkey", strings.NewReader("path"))
	req.Host = "s3.example"
	req.Header.Set("X-Amz-Meta-Fence-Token", "4")
	if resp := d.rawRequest(t, writerKey, req, []byte("path")); resp.StatusCode != http.StatusOK {
		t.Fatalf("path-style put on the domain: %d", resp.StatusCode)
	}
}

// TestOversizeRequests: a header block over the gateway's MaxHeaderBytes
// and a target over its MaxTargetBytes are refused before anything else,
// and nothing reaches S3.
func TestOversizeRequests(t *testing.T) {
	d := newDoor(t, doorOptions{})
	t.Run("headers", func(t *testing.T) {
		d.s3.Reset()
		req, _ := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/k", strings.NewReader("x"))
		req.Header.Set("X-Amz-Meta-Fence-Token", "1")
		for i := range 20 {
			req.Header.Set(fmt.Sprintf("X-Amz-Meta-Pad%d", i), strings.Repeat("p", 4000))
		}
		resp := d.rawRequest(t, writerKey, req, []byte("x"))
		if e := readS3Error(t, resp); resp.StatusCode != http.StatusBadRequest || e.Code != "RequestHeaderSectionTooLarge" {
			t.Fatalf("got %d %s; want 400 RequestHeaderSectionTooLarge", resp.StatusCode, e.Code)
		}
		if n := d.s3.Count(); n != 0 {
			t.Fatalf("%d requests reached S3", n)
		}
	})
	t.Run("target", func(t *testing.T) {
		d.s3.Reset()
		req, _ := http.NewRequest(http.MethodGet, d.url+"/"+d.bucket+"?list-type=2&prefix="+strings.Repeat("a", 9000), nil)
		resp := d.rawRequest(t, writerKey, req, nil)
		if e := readS3Error(t, resp); resp.StatusCode != http.StatusRequestURITooLong || e.Code != "RequestURITooLong" {
			t.Fatalf("got %d %s; want 414 RequestURITooLong", resp.StatusCode, e.Code)
		}
		if n := d.s3.Count(); n != 0 {
			t.Fatalf("%d requests reached S3", n)
		}
	})
}
