package clients_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/fence"
)

// exitCode is err's exit status: 0 for nil, -1 for an error that is not
// an exit (the client did not run).
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
}

// TestSeedScenario: each client writes an object with token 33, then 34:
// both accepted (exit 0); then 33 again: refused, the client exits
// non-zero and prints StaleFenceToken, and versitygw still holds 34's
// bytes, recorded with token 34, the mark 34.
func TestSeedScenario(t *testing.T) {
	d := newDoor(t)
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "seed/" + name
			dir := t.TempDir()
			for _, token := range []int{33, 34} {
				file, _ := writeFile(t, dir, fmt.Sprint(token), 1<<10, fmt.Sprintf("%s %d", name, token))
				if out, err := c.put(key, file, token); err != nil {
					t.Fatalf("%s put with token %d: exit %d, %v\n%s", name, token, exitCode(err), err, out)
				}
			}
			file, _ := writeFile(t, dir, "33-again", 1<<10, name+" 33 again")
			out, err := c.put(key, file, 33)
			if exitCode(err) <= 0 || !strings.Contains(out, "StaleFenceToken") {
				t.Errorf("%s put with token 33 after 34: exit %d (%v), printed\n%s\nwant a non-zero exit and StaleFenceToken", name, exitCode(err), err, out)
			}
			_, want := writeFile(t, t.TempDir(), "34", 1<<10, fmt.Sprintf("%s %d", name, 34))
			body, token, ok := d.stored(t, key)
			if !ok || !bytes.Equal(body, want) || token != "34" {
				t.Errorf("versitygw holds %d bytes (token 34's: %v), fence-token %q, present %v; want token 34's bytes and 34", len(body), bytes.Equal(body, want), token, ok)
			}
			if mark := d.mark(t, key); mark != 34 {
				t.Errorf("high-water mark %d; want 34", mark)
			}
		})
	}
}

// TestMultipartUpload: each client uploads 100 MiB, split by the client
// into parts of 16 MiB (a multipart upload), with token 7: it exits 0,
// and versitygw holds exactly the file's bytes, recorded with token 7. The
// same upload with stale token 5 then fails naming StaleFenceToken, and
// the object stays token 7's.
func TestMultipartUpload(t *testing.T) {
	d := newDoor(t)
	file, want := writeFile(t, t.TempDir(), "big", 100<<20, "100 MiB")
	wantSum := sha256.Sum256(want)
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "big/" + name
			if out, err := c.upload(key, file, 7, 16); err != nil {
				t.Fatalf("%s upload of 100 MiB in 16 MiB parts: exit %d, %v\n%s", name, exitCode(err), err, tail(out))
			}
			body, token, ok := d.stored(t, key)
			if !ok || sha256.Sum256(body) != wantSum || token != "7" {
				t.Errorf("versitygw holds %d bytes (the file's: %v), fence-token %q; want the 100 MiB file and 7", len(body), sha256.Sum256(body) == wantSum, token)
			}
			if mark := d.mark(t, key); mark != 7 {
				t.Errorf("high-water mark %d; want 7", mark)
			}
			// A stale holder's multipart upload is refused at its
			// creation, and the client says why.
			out, err := c.upload(key, file, 5, 16)
			if err == nil || !strings.Contains(string(out), "StaleFenceToken") {
				t.Errorf("%s upload with stale token 5: exit %d; want a failure naming StaleFenceToken\n%s", name, exitCode(err), tail(out))
			}
			if body, token, _ := d.stored(t, key); sha256.Sum256(body) != wantSum || token != "7" {
				t.Errorf("after the stale upload versitygw holds token %q; want token 7's object untouched", token)
			}
		})
	}
}

// TestStaleMultipartRefusedAtCompletion: each client uploads 40 MiB in
// parts of 16 MiB with token 33; as its CompleteMultipartUpload arrives,
// a newer holder writes the key with token 34. The completion is the
// upload's write, fenced like a PUT: refused, the client exits non-zero
// printing StaleFenceToken, versitygw holds the newer holder's bytes with
// token 34, and no upload is left behind.
func TestStaleMultipartRefusedAtCompletion(t *testing.T) {
	d := newDoor(t)
	file, _ := writeFile(t, t.TempDir(), "late", 40<<20, "40 MiB")
	newer := []byte("the newer holder's bytes")
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "late/" + name
			var raised atomic.Int32
			hook := func(k string) {
				if k != key || raised.Add(1) != 1 {
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
			d.beforeComplete.Store(&hook)
			defer d.beforeComplete.Store(nil)
			out, err := c.upload(key, file, 33, 16)
			if err == nil || !strings.Contains(out, "StaleFenceToken") {
				t.Errorf("%s upload whose completion is stale: exit %d; want a failure naming StaleFenceToken\n%s", name, exitCode(err), tail(out))
			}
			if raised.Load() == 0 {
				t.Fatalf("%s sent no CompleteMultipartUpload", name)
			}
			if body, token, _ := d.stored(t, key); !bytes.Equal(body, newer) || token != "34" {
				t.Errorf("versitygw holds %d bytes with token %q; want the newer holder's %d bytes with token 34", len(body), token, len(newer))
			}
			for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, key, true) {
				t.Errorf("upload %s of %s left behind (err %v)", u.UploadID, u.Key, u.Err)
			}
		})
	}
}

// TestSinglePartUpload100MiB: each client uploads 100 MiB in one
// PutObject (its multipart threshold above the size: aws-cli's and
// rclone's configured, s3cmd --disable-multipart, boto3 put_object) with
// token 8: it exits 0, and versitygw holds exactly the file's bytes,
// recorded with token 8. TestMultipartUpload is the same size in parts.
func TestSinglePartUpload100MiB(t *testing.T) {
	d := newDoor(t)
	file, want := writeFile(t, t.TempDir(), "big", 100<<20, "100 MiB at once")
	wantSum := sha256.Sum256(want)
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "single/" + name
			if out, err := c.put(key, file, 8); err != nil {
				t.Fatalf("%s PutObject of 100 MiB: exit %d, %v\n%s", name, exitCode(err), err, tail(out))
			}
			body, token, ok := d.stored(t, key)
			if !ok || sha256.Sum256(body) != wantSum || token != "8" {
				t.Errorf("versitygw holds %d bytes (the file's: %v), fence-token %q; want the 100 MiB file and 8", len(body), sha256.Sum256(body) == wantSum, token)
			}
		})
	}
}

// TestListing: each client lists a prefix and prints every key under
// it, and none outside it.
func TestListing(t *testing.T) {
	d := newDoor(t)
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			dir := t.TempDir()
			keys := []string{"list/" + name + "/a.txt", "list/" + name + "/sub/b.txt", "list/" + name + "-other/c.txt"}
			for i, key := range keys {
				file, _ := writeFile(t, dir, fmt.Sprint(i), 100, key)
				if out, err := c.put(key, file, 1); err != nil {
					t.Fatalf("%s put %s: %v\n%s", name, key, err, out)
				}
			}
			out, err := c.list("list/" + name + "/")
			if err != nil {
				t.Fatalf("%s list: exit %d, %v\n%s", name, exitCode(err), err, out)
			}
			for _, want := range []string{"a.txt", "b.txt"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s list printed\n%s\nwant %s", name, out, want)
				}
			}
			if strings.Contains(out, "c.txt") {
				t.Errorf("%s list printed\n%s\nwant nothing outside the prefix", name, out)
			}
		})
	}
}

// TestRangedRead: each client reads an object from byte 1000 on (a GET
// with a Range header) and gets exactly those bytes.
func TestRangedRead(t *testing.T) {
	d := newDoor(t)
	for _, name := range clientNames {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "range/" + name
			file, want := writeFile(t, t.TempDir(), "obj", 4<<10, key)
			if out, err := c.put(key, file, 3); err != nil {
				t.Fatalf("%s put: %v\n%s", name, err, out)
			}
			got, out, err := c.readFrom(key, 1000)
			if err != nil || !bytes.Equal(got, want[1000:]) {
				t.Errorf("%s read from byte 1000: %d bytes (want's: %v), exit %d, %v\n%s\nwant the %d bytes from 1000 on", name, len(got), bytes.Equal(got, want[1000:]), exitCode(err), err, out, len(want)-1000)
			}
		})
	}
}

// tail is the last lines of a client's output, which for an upload can
// be long (progress).
func tail(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// TestRcloneModTimeSurvives: rclone records a file's modification time as
// x-amz-meta-mtime on upload and reads it back to decide whether to
// upload again; through the door the metadata is stored, so rclone reads
// back the file's time, not the upload's.
func TestRcloneModTimeSurvives(t *testing.T) {
	d := newDoor(t)
	c := newClient(t, "rclone", d)
	file, _ := writeFile(t, t.TempDir(), "old", 1<<10, "rclone mtime")
	modTime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(file, modTime, modTime); err != nil {
		t.Fatal(err)
	}
	if out, err := c.put("mtime/old", file, 3); err != nil {
		t.Fatalf("rclone put: exit %d, %v\n%s", exitCode(err), err, out)
	}
	got, err := c.modTime("mtime/old")
	if want := modTime.Format(time.DateTime); err != nil || got != want {
		t.Fatalf("rclone reads back mod time %q (%v); want the file's, %s", got, err, want)
	}
}
