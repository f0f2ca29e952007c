package s3api_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fencegate/api"
	"fencegate/s3api/sigv4"
)

// BenchmarkPutObject is one accepted write per op through each door, in
// process, against real etcd and a real versitygw: s3api is the PutObject
// that fencebench's S3 API cell sends (aws-sdk-go-v2 as fencebench sets it
// up: unsigned payload, no checksum, the token in the metadata, 1 KiB),
// read off the wire as the gateway's server reads it; rest is the REST
// API's PUT of the same object. Both write one key again with one token
// (fencebench's distinct pattern), so each op is one conditional PUT to
// the store after a fence check in etcd; the difference between the two
// is what the S3 door does that the REST door does not.
func BenchmarkPutObject(b *testing.B) {
	d := newDoor(b, doorOptions{noAuth: true})
	body := strings.Repeat("x", 1<<10)
	b.Run("s3api", func(b *testing.B) {
		raw := signedPutObject(b, d, "bench/s3api", body)
		benchServe(b, d.srv.Config.Handler, raw, http.StatusOK)
	})
	b.Run("rest", func(b *testing.B) {
		r, err := http.NewRequest(http.MethodPut, "http://127.0.0.1/v1/objects/"+d.bucket+"/bench/rest", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r.Header.Set(api.HeaderFenceToken, "1")
		r.Header.Set("User-Agent", "Go-http-client/1.1")
		var wire bytes.Buffer
		if err := r.Write(&wire); err != nil {
			b.Fatal(err)
		}
		benchServe(b, d.gw, wire.Bytes(), http.StatusOK)
	})
}

// signedPutObject is a PutObject of key with token 1 as fencebench's
// aws-sdk-go-v2 client sends it, on the wire.
func signedPutObject(tb testing.TB, d *door, key, body string) []byte {
	tb.Helper()
	r, err := http.NewRequest(http.MethodPut, "http://127.0.0.1/"+d.bucket+"/"+key+"?x-id=PutObject", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	r.Header.Set("X-Amz-Meta-Fence-Token", "1")
	r.Header.Set("User-Agent", "aws-sdk-go-v2/1.41.0 ua/2.1 os/linux lang/go#1.26 md/GOOS#linux md/GOARCH#amd64 api/s3#1.95.0 m/E,Z")
	r.Header.Set("Amz-Sdk-Invocation-Id", "0b6c6c4e-1f7a-4a3e-9a55-6d1c1a0e7f11")
	r.Header.Set("Amz-Sdk-Request", "attempt=1; max=1")
	r.Header.Set("Accept-Encoding", "identity")
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: writerKey, SecretAccessKey: d.keys[writerKey][0]}
	if err := signer.SignHTTP(context.Background(), creds, r, sigv4.UnsignedPayload, "s3", "us-east-1", time.Now()); err != nil {
		tb.Fatal(err)
	}
	var wire bytes.Buffer
	if err := r.Write(&wire); err != nil {
		tb.Fatal(err)
	}
	return wire.Bytes()
}

// benchServe serves the request raw, read as net/http's server reads it,
// to h once to create the object, then once per op, each answered status.
// Besides ns/op, which is mostly waiting for etcd and the store, it
// reports cpu-µs/op: the CPU time of the whole process (the gateway, the
// embedded etcd, the benchmark; not versitygw, a process of its own) per
// op.
func benchServe(b *testing.B, h http.Handler, raw []byte, status int) {
	b.Helper()
	serveRaw(b, h, raw)
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		if code := serveRaw(b, h, raw); code != status {
			b.Fatalf("status %d; want %d", code, status)
		}
	}
	b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func serveRaw(b *testing.B, h http.Handler, raw []byte) int {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{header: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.status
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
