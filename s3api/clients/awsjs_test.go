package clients_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/fence"
)

// awsJS runs the AWS SDK for JavaScript v3 (testdata/aws-sdk-js, its
// pinned packages installed by `make awsjs`) against a door, one node
// process per operation (testdata/aws-sdk-js/fencegate_awsjs.mjs says
// what each does).
type awsJS struct {
	t      *testing.T
	node   string
	script string
	dir    string
	env    []string
}

// newAWSJS returns the JavaScript client for d, failing the test with the
// make target that installs it when node or the SDK is missing.
func newAWSJS(t *testing.T, d *door) *awsJS {
	t.Helper()
	node := os.Getenv("FENCEGATE_NODE")
	if node == "" {
		node = "node"
	}
	if _, err := exec.LookPath(node); err != nil {
		t.Fatalf("aws-sdk-js: %s not found: run `make awsjs` (or set FENCEGATE_NODE)", node)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "aws-sdk-js", "fencegate_awsjs.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"client-s3", "lib-storage", "s3-request-presigner"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "@aws-sdk", pkg, "package.json")); err != nil {
			t.Fatalf("aws-sdk-js: @aws-sdk/%s is not installed in %s: run `make awsjs`", pkg, filepath.Dir(script))
		}
	}
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"FENCEGATE_S3_ENDPOINT=" + d.endpoint, "AWS_ACCESS_KEY_ID=" + accessKeyID, "AWS_SECRET_ACCESS_KEY=" + secretKey,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true"}
	if d.certFile != "" {
		env = append(env, "NODE_EXTRA_CA_CERTS="+d.certFile)
	}
	return &awsJS{t: t, node: node, script: script, dir: dir, env: env}
}

// run runs one operation: its stdout, stderr, and error (an
// *exec.ExitError for a non-zero exit).
func (c *awsJS) run(args ...string) (stdout []byte, stderr string, err error) {
	cmd := exec.Command(c.node, append([]string{c.script}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.String(), err
}

// runPrinted is run with stdout and stderr as one text.
func (c *awsJS) runPrinted(args ...string) (string, error) {
	out, errOut, err := c.run(args...)
	return string(out) + errOut, err
}

// awsJSClient is the JavaScript SDK as one of the clients every client
// test runs (clientNames).
func awsJSClient(t *testing.T, d *door) client {
	t.Helper()
	js := newAWSJS(t, d)
	return client{
		name: "aws-sdk-js",
		put: func(key, file string, token int) (string, error) {
			return js.runPrinted("put", d.bucket, key, file, fmt.Sprint(token))
		},
		upload: func(key, file string, token, partMiB int) (string, error) {
			return js.runPrinted("upload", d.bucket, key, file, fmt.Sprint(token), fmt.Sprint(partMiB<<20))
		},
		checksumUpload: func(key, file string, token, partMiB int, algorithm string) (string, error) {
			return js.runPrinted("upload-checksum", d.bucket, key, file, fmt.Sprint(token), fmt.Sprint(partMiB<<20), algorithm)
		},
		list: func(prefix string) (string, error) { return js.runPrinted("list", d.bucket, prefix) },
		readFrom: func(key string, first int64) ([]byte, string, error) {
			return js.run("range", d.bucket, key, fmt.Sprint(first))
		},
	}
}

// overHTTPAndTLS runs test as a subtest on a door over plain HTTP and on
// one over HTTPS, each with its own JavaScript client.
func overHTTPAndTLS(t *testing.T, test func(t *testing.T, d *door, js *awsJS)) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			d := newDoor(t)
			if scheme == "https" {
				d = newTLSDoor(t)
			}
			test(t, d, newAWSJS(t, d))
		})
	}
}

// wantS3Error checks that an operation failed with the S3 error code the
// SDK parsed and its HTTP status, as fencegate_awsjs.mjs prints them.
func wantS3Error(t *testing.T, what string, printed string, err error, code string, status int) {
	t.Helper()
	want := fmt.Sprintf("S3 error %s (HTTP %d)", code, status)
	if exitCode(err) != 1 || !strings.Contains(printed, want) {
		t.Errorf("%s: exit %d (%v), printed\n%s\nwant exit 1 and %q", what, exitCode(err), err, tail(printed), want)
	}
}

// TestAWSJSFencedPut: PutObject with the token as metadata (33, then 34)
// and as a signed X-Fence-Token header (35) is accepted; 34 again is
// refused 409, the SDK parsing StaleFenceToken, and versitygw still holds
// 35's bytes with token 35.
func TestAWSJSFencedPut(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		dir := t.TempDir()
		key := "put/obj"
		for _, token := range []int{33, 34} {
			file, _ := writeFile(t, dir, fmt.Sprint(token), 3<<10, fmt.Sprint(token))
			if out, err := js.runPrinted("put", d.bucket, key, file, fmt.Sprint(token)); err != nil {
				t.Fatalf("put with token %d as metadata: exit %d, %v\n%s", token, exitCode(err), err, out)
			}
		}
		file, want := writeFile(t, dir, "35", 3<<10, "35")
		if out, err := js.runPrinted("put-header", d.bucket, key, file, "35"); err != nil {
			t.Fatalf("put with token 35 as X-Fence-Token: exit %d, %v\n%s", exitCode(err), err, out)
		}
		for _, op := range []string{"put", "put-header"} {
			stale, _ := writeFile(t, dir, "stale", 3<<10, "stale")
			out, err := js.runPrinted(op, d.bucket, key, stale, "34")
			wantS3Error(t, op+" with stale token 34", out, err, "StaleFenceToken", 409)
		}
		if body, token, ok := d.stored(t, key); !ok || !bytes.Equal(body, want) || token != "35" {
			t.Errorf("versitygw holds %d bytes (35's: %v) with token %q, present %v; want 35's bytes and 35", len(body), bytes.Equal(body, want), token, ok)
		}
		if mark := d.mark(t, key); mark != 35 {
			t.Errorf("high-water mark %d; want 35", mark)
		}
	})
}

// TestAWSJSMultipart: lib-storage's Upload of 24 MiB in parts of 8 MiB
// with token 7 lands whole with token 7; the same upload with stale
// token 5 fails with the 409 StaleFenceToken the SDK parsed, and the
// object stays token 7's, with no upload left behind.
func TestAWSJSMultipart(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		file, want := writeFile(t, t.TempDir(), "big", 24<<20, "24 MiB")
		key := "multipart/obj"
		if out, err := js.runPrinted("upload", d.bucket, key, file, "7", fmt.Sprint(8<<20)); err != nil {
			t.Fatalf("upload of 24 MiB in 8 MiB parts: exit %d, %v\n%s", exitCode(err), err, tail(out))
		}
		if body, token, ok := d.stored(t, key); !ok || !bytes.Equal(body, want) || token != "7" {
			t.Fatalf("versitygw holds %d bytes (the file's: %v) with token %q; want the file and 7", len(body), bytes.Equal(body, want), token)
		}
		stale, _ := writeFile(t, t.TempDir(), "stale", 24<<20, "stale 24 MiB")
		out, err := js.runPrinted("upload", d.bucket, key, stale, "5", fmt.Sprint(8<<20))
		wantS3Error(t, "upload with stale token 5", out, err, "StaleFenceToken", 409)
		if body, token, _ := d.stored(t, key); !bytes.Equal(body, want) || token != "7" {
			t.Errorf("after the stale upload versitygw holds token %q (the first file's bytes: %v); want token 7's object untouched", token, bytes.Equal(body, want))
		}
		for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, key, true) {
			t.Errorf("upload %s of %s left behind (err %v)", u.UploadID, u.Key, u.Err)
		}
	})
}

// TestAWSJSUploadOvertaken: lib-storage's Upload of 32 MiB in parts of
// 8 MiB with token 33; as its second part arrives, a newer holder writes
// the key with token 34. The parts after that are stale: the upload fails
// with the 409 StaleFenceToken the SDK parsed (not an error of its own
// abort of the upload the gateway already aborted), versitygw holds the
// newer holder's bytes with token 34, and no upload is left behind.
func TestAWSJSUploadOvertaken(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		file, _ := writeFile(t, t.TempDir(), "overtaken", 32<<20, "32 MiB")
		key := "overtaken/obj"
		newer := []byte("the newer holder's bytes")
		var raised atomic.Int32
		hook := func(k, part string) {
			if k != key || part != "2" || raised.Add(1) != 1 {
				return
			}
			ctx, err := d.gw.Edge().WithIdentity(context.Background(), "clients", "")
			if err == nil {
				_, err = d.gw.Engine().PutFenced(ctx, fence.PutRequest{Path: api.ObjectPath{Bucket: d.bucket, Key: key}, Token: 34, Body: bytes.NewReader(newer), Size: int64(len(newer))})
			}
			if err != nil {
				t.Errorf("the newer holder's write with token 34: %v", err)
			}
		}
		d.beforePart.Store(&hook)
		defer d.beforePart.Store(nil)
		out, err := js.runPrinted("upload", d.bucket, key, file, "33", fmt.Sprint(8<<20))
		if raised.Load() == 0 {
			t.Fatalf("the SDK sent no part 2\n%s", tail(out))
		}
		wantS3Error(t, "upload overtaken at its second part", out, err, "StaleFenceToken", 409)
		if body, token, _ := d.stored(t, key); !bytes.Equal(body, newer) || token != "34" {
			t.Errorf("versitygw holds %d bytes with token %q; want the newer holder's %d bytes with token 34", len(body), token, len(newer))
		}
		for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, key, true) {
			t.Errorf("upload %s of %s left behind (err %v)", u.UploadID, u.Key, u.Err)
		}
	})
}

// TestAWSJSPresigned: URLs from the JavaScript presigner with its default
// settings, used with fetch. A PUT URL presigned without a body carries
// the CRC32 of the empty body, so a PUT of bytes to it is 400 BadDigest
// and stores nothing, as on S3; one presigned with the file's CRC32 and
// the token as metadata (fence-token, in the query) stores the file with
// its token; a stale one is 409 StaleFenceToken; a presigned GET (its
// query asking for checksums) reads the bytes back; a PUT URL presigned
// with tags (which the presigner moves into the query, x-amz-tagging)
// stores them, as minio-go reads them from versitygw.
func TestAWSJSPresigned(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		dir := t.TempDir()
		key := "presigned/obj"
		file, want := writeFile(t, dir, "fresh", 70<<10, "presigned")
		out, err := js.runPrinted("presigned-put", d.bucket, key, file, "3", "default")
		wantS3Error(t, "PUT of 70 KiB to a URL presigned without a body (the empty body's CRC32 signed)", out, err, "BadDigest", 400)
		if _, _, ok := d.stored(t, key); ok {
			t.Fatalf("versitygw holds %s after a PUT whose checksum did not match; want nothing", key)
		}
		if out, err := js.runPrinted("presigned-put", d.bucket, key, file, "3", "checksum"); err != nil {
			t.Fatalf("PUT to a URL presigned with the file's CRC32 and token 3: exit %d, %v\n%s", exitCode(err), err, out)
		}
		stale, _ := writeFile(t, dir, "stale", 70<<10, "stale")
		out, err = js.runPrinted("presigned-put", d.bucket, key, stale, "2", "checksum")
		wantS3Error(t, "PUT to a presigned URL with stale token 2", out, err, "StaleFenceToken", 409)
		if body, token, ok := d.stored(t, key); !ok || !bytes.Equal(body, want) || token != "3" {
			t.Errorf("versitygw holds %d bytes (the file's: %v) with token %q, present %v; want the file and 3", len(body), bytes.Equal(body, want), token, ok)
		}
		got, printed, err := js.run("presigned-get", d.bucket, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("GET of a presigned URL: %d bytes (the file's: %v), exit %d, %v\n%s", len(got), bytes.Equal(got, want), exitCode(err), err, printed)
		}
		tagged := "presigned/tagged"
		if out, err := js.runPrinted("presigned-put", d.bucket, tagged, file, "3", "tagging"); err != nil {
			t.Fatalf("PUT to a URL presigned with tags (x-amz-tagging in its query): exit %d, %v\n%s", exitCode(err), err, out)
		}
		tags, err := d.minio.GetObjectTagging(context.Background(), d.bucket, tagged, minio.GetObjectTaggingOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tags.ToMap(); len(got) != 2 || got["project"] != "fence" || got["team"] != "a b" {
			t.Errorf("versitygw holds the tags %v for %s; want project=fence, team=a b", got, tagged)
		}
	})
}

// TestAWSJSPresignedCopy: a CopyObject URL from the JavaScript presigner,
// which moves x-amz-copy-source, x-amz-metadata-directive and the token
// (x-amz-meta-fence-token) into the query, used with fetch: it copies the
// source with the token, as minio-go reads from versitygw, and a stale one
// is 409 StaleFenceToken and changes nothing.
func TestAWSJSPresignedCopy(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		file, want := writeFile(t, t.TempDir(), "src", 5<<10, "presigned copy source")
		if out, err := js.runPrinted("put", d.bucket, "pc/src", file, "4"); err != nil {
			t.Fatalf("put: exit %d, %v\n%s", exitCode(err), err, out)
		}
		if out, err := js.runPrinted("presigned-copy", d.bucket, "pc/src", "pc/dst", "5"); err != nil {
			t.Fatalf("presigned copy with token 5: exit %d, %v\n%s", exitCode(err), err, out)
		}
		if body, token, ok := d.stored(t, "pc/dst"); !ok || !bytes.Equal(body, want) || token != "5" {
			t.Errorf("the copy in versitygw: %d bytes (the source's: %v), token %q, present %v; want the source's bytes and 5", len(body), bytes.Equal(body, want), token, ok)
		}
		out, err := js.runPrinted("presigned-copy", d.bucket, "pc/src", "pc/dst", "3")
		wantS3Error(t, "presigned copy with stale token 3", out, err, "StaleFenceToken", 409)
		if body, token, ok := d.stored(t, "pc/dst"); !ok || !bytes.Equal(body, want) || token != "5" {
			t.Errorf("after a stale copy, versitygw holds %d bytes (the first copy's: %v), token %q; want the first copy's, 5", len(body), bytes.Equal(body, want), token)
		}
	})
}

// TestAWSJSCopyListRangeDelete: CopyObject (the token as X-Fence-Token),
// ListObjectsV2, a ranged GetObject, DeleteObject and DeleteObjects, each
// checked in versitygw with minio-go; a stale delete is 409
// StaleFenceToken and removes nothing, and DeleteObjects with a stale
// token answers each key's StaleFenceToken.
func TestAWSJSCopyListRangeDelete(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		dir := t.TempDir()
		file, want := writeFile(t, dir, "src", 5<<10, "copy source")
		if out, err := js.runPrinted("put", d.bucket, "cld/src", file, "4"); err != nil {
			t.Fatalf("put: exit %d, %v\n%s", exitCode(err), err, out)
		}
		if out, err := js.runPrinted("copy", d.bucket, "cld/src", "cld/dst", "4"); err != nil {
			t.Fatalf("copy with token 4: exit %d, %v\n%s", exitCode(err), err, out)
		}
		if body, token, ok := d.stored(t, "cld/dst"); !ok || !bytes.Equal(body, want) || token != "4" {
			t.Errorf("the copy in versitygw: %d bytes (the source's: %v), token %q, present %v; want the source's bytes and 4", len(body), bytes.Equal(body, want), token, ok)
		}
		if out, err := js.runPrinted("put", d.bucket, "cld-other/x", file, "4"); err != nil {
			t.Fatalf("put: exit %d, %v\n%s", exitCode(err), err, out)
		}
		listed, printed, err := js.run("list", d.bucket, "cld/")
		if err != nil || string(listed) != "cld/dst\ncld/src\n" {
			t.Errorf("list cld/: exit %d (%v), printed %q; want %q\n%s", exitCode(err), err, listed, "cld/dst\ncld/src\n", printed)
		}
		got, printed, err := js.run("range", d.bucket, "cld/dst", "1000")
		if err != nil || !bytes.Equal(got, want[1000:]) {
			t.Errorf("range from byte 1000: %d bytes (want's: %v), exit %d, %v\n%s", len(got), bytes.Equal(got, want[1000:]), exitCode(err), err, printed)
		}

		out, err := js.runPrinted("delete", d.bucket, "cld/src", "3")
		wantS3Error(t, "delete with stale token 3", out, err, "StaleFenceToken", 409)
		if _, _, ok := d.stored(t, "cld/src"); !ok {
			t.Errorf("a stale delete removed cld/src")
		}
		if out, err := js.runPrinted("delete", d.bucket, "cld/src", "5"); err != nil {
			t.Fatalf("delete with token 5: exit %d, %v\n%s", exitCode(err), err, out)
		}
		if _, _, ok := d.stored(t, "cld/src"); ok {
			t.Errorf("cld/src is still in versitygw after its delete")
		}

		out, err = js.runPrinted("delete-objects", d.bucket, "2", "cld/dst", "cld-other/x")
		if exitCode(err) != 1 || strings.Count(out, "StaleFenceToken") != 2 {
			t.Errorf("DeleteObjects with stale token 2: exit %d (%v), printed\n%s\nwant each key's StaleFenceToken", exitCode(err), err, out)
		}
		out, err = js.runPrinted("delete-objects", d.bucket, "6", "cld/dst", "cld-other/x")
		if err != nil || !strings.Contains(out, "deleted cld/dst") || !strings.Contains(out, "deleted cld-other/x") {
			t.Errorf("DeleteObjects with token 6: exit %d (%v), printed\n%s\nwant both deleted", exitCode(err), err, out)
		}
		for _, key := range []string{"cld/dst", "cld-other/x"} {
			if _, _, ok := d.stored(t, key); ok {
				t.Errorf("%s is still in versitygw after DeleteObjects", key)
			}
		}
	})
}

// TestAWSJSIncompleteUploads: an upload started with one part and left
// incomplete is listed by ListMultipartUploads, under the store's id (the
// part of the creator's id before its "."; the secret after it is told to
// the creator only), and removed by AbortMultipartUpload with the id the
// creator was answered; versitygw then holds no upload of the key.
func TestAWSJSIncompleteUploads(t *testing.T) {
	overHTTPAndTLS(t, func(t *testing.T, d *door, js *awsJS) {
		key := "incomplete/obj"
		out, printed, err := js.run("start-upload", d.bucket, key, "9")
		if err != nil {
			t.Fatalf("start-upload: exit %d, %v\n%s", exitCode(err), err, printed)
		}
		uploadID := strings.TrimSpace(string(out))
		storeID, _, ok := api.SplitCapability(uploadID)
		if !ok {
			t.Fatalf("CreateMultipartUpload answered %q; want the store's id, \".\" and the creator's secret", uploadID)
		}
		listed, printed, err := js.run("uploads", d.bucket, "incomplete/")
		if err != nil || strings.TrimSpace(string(listed)) != key+" "+storeID {
			t.Fatalf("uploads: exit %d (%v), printed %q; want %q (the store's id, without the secret)\n%s", exitCode(err), err, listed, key+" "+storeID, printed)
		}
		if printed, err := js.runPrinted("abort", d.bucket, key, uploadID); err != nil {
			t.Fatalf("abort: exit %d, %v\n%s", exitCode(err), err, printed)
		}
		listed, printed, err = js.run("uploads", d.bucket, "incomplete/")
		if err != nil || strings.TrimSpace(string(listed)) != "" {
			t.Errorf("uploads after the abort: exit %d (%v), printed %q; want none\n%s", exitCode(err), err, listed, printed)
		}
		for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, key, true) {
			t.Errorf("upload %s of %s left in versitygw after its abort (err %v)", u.UploadID, u.Key, u.Err)
		}
	})
}
