package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/gateway"
)

// TestStaleWriteOverObjectWithoutETag runs, on an object that exists
// without an ETag (a file placed in versitygw's directory on disk, as an
// operator's file that was there before fencegate), the interleaving that
// the conditional write exists to refuse:
//
//	stale writer S (token 5) observes the object, passes its fence check, pauses
//	newer holder N (token 6) PUTs its bytes
//	S resumes and sends its PUT or DELETE
//
// With no ETag, S's write has no version to be conditional on, and an
// If-Match with an empty ETag is no condition at all: S's write would land
// on top of N's. Neither write may be blind: S3 must never hold S's bytes
// (or have lost N's to S's delete). The gateway answers both 502
// upstream-error, without writing, so S3 still holds the placed file.
func TestStaleWriteOverObjectWithoutETag(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			pause := newPauser(5)
			e := newEnv(t, gateway.Config{TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook}})
			sharedS3.PlaceFile(t, e.bucket, "k", []byte("placed"))

			staleDone := make(chan result, 1)
			go func() {
				if method == http.MethodPut {
					staleDone <- e.put(t, "k", 5, "stale from 5")
				} else {
					staleDone <- e.delete(t, "k", 5)
				}
			}()
			var stale result
			staleAnswered := false
			select {
			case <-pause.reached: // S passed its fence check
			case stale = <-staleDone: // S was refused before its fence check
				staleAnswered = true
			}
			newer := e.put(t, "k", 6, "from 6")
			close(pause.release)
			if !staleAnswered {
				stale = <-staleDone
			}

			body, token, ok := e.stored(t, "k")
			switch {
			case newer.status/100 == 2 && (!ok || body != "from 6" || token != "6"):
				t.Fatalf("token 6's PUT answered %d, then token 5's %s answered %d; S3 holds %q token %q (present %v); want token 6's write",
					newer.status, method, stale.status, body, token, ok)
			case newer.status/100 != 2 && (!ok || body != "placed"):
				t.Fatalf("token 6's PUT answered %s, then token 5's %s answered %d; S3 holds %q token %q (present %v); want the placed file untouched",
					newer, method, stale.status, body, token, ok)
			}
			wantProblem(t, stale, http.StatusBadGateway, "upstream-error")
			wantProblem(t, newer, http.StatusBadGateway, "upstream-error")
			if !strings.Contains(stale.problem.Detail, "ETag") {
				t.Errorf("detail %q does not say that the object has no ETag", stale.problem.Detail)
			}
			if n := e.s3.CountMethod(http.MethodPut) + e.s3.CountMethod(http.MethodDelete); n != 0 {
				t.Errorf("%d PUT or DELETE requests reached S3; want none", n)
			}
		})
	}
}

// TestObjectWithoutETagWritableOnceRewritten: what an operator does with a
// file that versitygw serves without an ETag. Fenced writes to it answer
// 502 until it is written once through S3 (outside fencegate, as the
// object's owner); versitygw then records its ETag, and fenced writes and
// deletes work as on any other object.
func TestObjectWithoutETagWritableOnceRewritten(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	sharedS3.PlaceFile(t, e.bucket, "k", []byte("placed"))
	wantProblem(t, e.put(t, "k", 1, "v1"), http.StatusBadGateway, "upstream-error")

	// The owner writes the same bytes back through S3.
	if _, err := e.minio.PutObject(context.Background(), e.bucket, "k", strings.NewReader("placed"), 6, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := e.put(t, "k", 1, "v1"); r.status != http.StatusOK {
		t.Fatalf("PUT token 1 after the rewrite = %s; want 200", r)
	}
	if body, token, _ := e.stored(t, "k"); body != "v1" || token != "1" {
		t.Fatalf("S3 holds %q token %q; want \"v1\" token 1", body, token)
	}
	if r := e.delete(t, "k", 2); r.status != http.StatusNoContent {
		t.Fatalf("DELETE token 2 = %s; want 204", r)
	}
}
