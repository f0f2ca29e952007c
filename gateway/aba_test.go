package gateway_test

import (
	"net/http"
	"testing"

	"fencegate/api"
	"fencegate/gateway"
)

// TestStaleWriterAfterObjectWentBackToObservedBytes is the ETag ABA
// interleaving, on each store:
//
//	object holds "A" (token 1)
//	stale writer S (token 5) observes it, passes its fence check, pauses
//	newer holder N (token 6) writes "B", then "A" again
//	S resumes and sends its conditional write
//
// On S3 the condition is If-Match on the ETag S observed, the MD5 of "A",
// and the object's ETag is that again: S's write lands over N's. That is
// the documented limit (README, "Known limit: ETag ABA"), shown here so
// that it is known to hold. On GCS the condition is ifGenerationMatch on
// the generation S observed, and N's writes made two new ones: GCS
// refuses S's write (412), the gateway observes again, finds N's token on
// the object and answers 409 stale-token; the object keeps N's bytes, as
// a client the gateway does not use reads them.
func TestStaleWriterAfterObjectWentBackToObservedBytes(t *testing.T) {
	for _, tc := range []struct {
		store      string
		staleLands bool
	}{
		{api.StoreS3, true},
		{api.StoreGCS, false},
	} {
		t.Run(tc.store, func(t *testing.T) {
			pause := newPauser(5)
			e := newEnvOn(t, tc.store, gateway.Config{TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook}})
			if r := e.put(t, "k", 1, "A"); r.status != http.StatusCreated {
				t.Fatalf("PUT token 1 = %s", r)
			}
			staleDone := make(chan result, 1)
			go func() { staleDone <- e.put(t, "k", 5, "stale from 5") }()
			<-pause.reached
			for _, body := range []string{"B", "A"} {
				if r := e.put(t, "k", 6, body); r.status != http.StatusOK {
					t.Fatalf("PUT token 6 %q = %s", body, r)
				}
			}
			close(pause.release)
			stale := <-staleDone
			body, token, _ := e.stored(t, "k")
			t.Logf("%s: stale write answered %d; the store holds %q with fence-token %q", tc.store, stale.status, body, token)
			if tc.staleLands {
				if stale.status != http.StatusOK || body != "stale from 5" || token != "5" {
					t.Fatalf("S3: stale write = %s, S3 holds %q token %q; want the documented limit (200, the stale bytes landed)", stale, body, token)
				}
				return
			}
			wantProblem(t, stale, http.StatusConflict, "stale-token")
			if body != "A" || token != "6" {
				t.Fatalf("%s holds %q token %q; want the newer holder's \"A\" with token 6", tc.store, body, token)
			}
			if stale.problem.Resource != api.StoreObjectResource(tc.store, e.bucket, "k") {
				t.Fatalf("refusal names resource %q; want %q", stale.problem.Resource, api.StoreObjectResource(tc.store, e.bucket, "k"))
			}
		})
	}
}
