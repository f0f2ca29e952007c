package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fencegate/internal/testenv"
)

// TestPutTicket: `put --ticket` sends the file straight to the store on a
// ticket, with the token; a stale token gets no ticket, and the newer
// bytes stay. What landed is read with minio-go, not through fencectl.
func TestPutTicket(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(file, []byte("bytes on a ticket"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.fencectl(t, nil, "", "put", "--ticket", e.bucket+"/big.bin", file, "--token", "5")
	if code != 0 || !strings.Contains(out, "created") || !strings.Contains(out, "on a ticket") {
		t.Fatalf("put --ticket: exit %d, %q, %s", code, out, stderr)
	}
	if body, token, _ := testenv.ReadStored(t, sharedS3.Minio(t), e.bucket, "big.bin"); string(body) != "bytes on a ticket" || token != "5" {
		t.Fatalf("stored %q with token %q; want the file with token 5", body, token)
	}
	if code, _, stderr := e.fencectl(t, nil, "newer", "put", e.bucket+"/big.bin", "-", "--token", "7"); code != 0 {
		t.Fatalf("put 7: exit %d, %s", code, stderr)
	}
	code, _, stderr = e.fencectl(t, nil, "", "put", "--ticket", e.bucket+"/big.bin", file, "--token", "6")
	if code != exitRefused || !strings.Contains(stderr, "stale") {
		t.Fatalf("stale put --ticket: exit %d, %s; want %d", code, stderr, exitRefused)
	}
	if body, token, _ := testenv.ReadStored(t, sharedS3.Minio(t), e.bucket, "big.bin"); string(body) != "newer" || token != "7" {
		t.Fatalf("stored %q with token %q; want the newer bytes with token 7", body, token)
	}
}
