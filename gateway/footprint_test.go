package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/gateway"
)

// marks counts the high-water marks in e's etcd (keys under the token
// store's default prefix's hwm/).
func (e *env) marks(tb testing.TB) int64 {
	tb.Helper()
	resp, err := e.etcd.Client(tb).Get(tb.Context(), "fencegate/hwm/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		tb.Fatalf("counting marks: %v", err)
	}
	return resp.Count
}

// TestDeleteAbsentLeavesNoMark: deletes of objects that are not there
// answer 204, send nothing to S3 beyond the observation, and leave no
// high-water mark in etcd (by default), even with keys near the
// longest; a
// stale token is still refused, by a gateway with no cache of the mark.
func TestDeleteAbsentLeavesNoMark(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	const n = 50
	// Near the longest keys, in segments that a file system takes.
	long := strings.Repeat(strings.Repeat("k", 240)+"/", 4)
	e.s3.Reset()
	for i := range n {
		key := fmt.Sprintf("%s%04d", long, i)
		if r := e.delete(t, key, api.Token(100+i)); r.status != http.StatusNoContent {
			t.Fatalf("DELETE of absent %d = %s; want 204", i, r)
		}
	}
	if got := e.marks(t); got != 0 {
		t.Fatalf("%d deletes of absent objects left %d high-water marks in etcd; want 0", n, got)
	}
	if d := e.s3.CountMethod(http.MethodDelete); d != 0 {
		t.Fatalf("deletes of absent objects sent %d DELETEs to S3; want 0", d)
	}

	// A delete of an absent object still refuses a stale token: the mark
	// that a delete of the object left (a tombstone), read by a gateway
	// that has not cached it.
	e.put(t, "gone", 10, "v10")
	if r := e.delete(t, "gone", 11); r.status != http.StatusNoContent {
		t.Fatalf("DELETE token 11 = %s; want 204", r)
	}
	e2 := newEnvSharing(t, e)
	r := e2.delete(t, "gone", 10)
	wantProblem(t, r, http.StatusConflict, "stale-token")
	if r.problem.HighWaterMark != 11 {
		t.Fatalf("stale problem = %+v; want high_water_mark 11", r.problem)
	}
	// Equal and larger tokens pass, and raise nothing.
	for _, tok := range []api.Token{11, 12} {
		if r := e2.delete(t, "gone", tok); r.status != http.StatusNoContent {
			t.Fatalf("DELETE of absent, token %d = %s; want 204", tok, r)
		}
	}
	if hwm := readFence(t, e, "gone"); hwm != 11 {
		t.Fatalf("mark after deletes of absent = %d; want 11, unraised", hwm)
	}
	// What that gives up: the delete of nothing is as if it never
	// happened, so a smaller token may create the object after it.
	if r := e.delete(t, "never", 9); r.status != http.StatusNoContent {
		t.Fatalf("DELETE of a missing object = %s; want 204", r)
	}
	if r := e.put(t, "never", 8, "v8"); r.status != http.StatusCreated {
		t.Fatalf("PUT token 8 after a delete of nothing with 9 = %s; want 201", r)
	}
}

// TestDeleteAbsentTombstonesOption: with Config.TombstonesForAbsent, a
// delete of an absent object raises the mark as before, and a smaller
// token may not create the object afterwards.
func TestDeleteAbsentTombstonesOption(t *testing.T) {
	e := newEnv(t, gateway.Config{TombstonesForAbsent: true})
	if r := e.delete(t, "never", 9); r.status != http.StatusNoContent {
		t.Fatalf("DELETE of a missing object = %s; want 204", r)
	}
	if got := e.marks(t); got != 1 {
		t.Fatalf("marks after a delete of nothing = %d; want 1 (a tombstone)", got)
	}
	wantProblem(t, e.put(t, "never", 8, "stale"), http.StatusConflict, "stale-token")
	if _, _, ok := e.stored(t, "never"); ok {
		t.Fatal("stale create landed in S3")
	}
}

// readFence reads key's mark through GET /v1/fences.
func readFence(tb testing.TB, e *env, key string) api.Token {
	tb.Helper()
	r := do(tb, http.MethodGet, e.url+"/v1/fences/"+string(api.ObjectResource(e.bucket, key)), nil, nil)
	if r.status != http.StatusOK {
		tb.Fatalf("GET fence = %s", r)
	}
	var f api.Fence
	if err := json.Unmarshal(r.body, &f); err != nil {
		tb.Fatal(err)
	}
	return f.HighWaterMark
}

// TestLockNoWaitOnHeldLockWritesNothing: POST /v1/locks/{name} with
// wait 0 on a lock another session holds answers 409 lock-timeout and
// writes nothing to etcd (its revision does not move).
func TestLockNoWaitOnHeldLockWritesNothing(t *testing.T) {
	e := newLockEnv(t, nil)
	holder := e.newSession(t, 30)
	grant, r := e.acquire(t, "job", holder.ID, 0)
	if r.status != http.StatusOK {
		t.Fatalf("acquire a free lock: %s", r)
	}
	other := e.newSession(t, 30)
	client := e.etcd.Client(t)
	revision := func() int64 {
		resp, err := client.Get(t.Context(), "revision-probe", clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := revision()
	for range 3 {
		_, r := e.acquire(t, "job", other.ID, 0)
		wantProblem(t, r, http.StatusConflict, "lock-timeout")
	}
	if after := revision(); after != before {
		t.Fatalf("three acquires with wait 0 of a held lock moved etcd's revision from %d to %d; want no write", before, after)
	}
	if st := e.lockStateWith(t, "job", holder.ID); st.QueueLength != 1 || st.Holder != grant.Token {
		t.Fatalf("lock state = %+v; want the holder %d alone", st, grant.Token)
	}
}

// TestDeleteAbsentRacesCreate: an object created between a delete's
// observation (absent) and its read-only check is left in place. A
// create with a larger token than the deleter's makes the check refuse
// it (409); one with a smaller token lets it answer 204, true of the
// moment it observed, and the mark stays the creator's.
func TestDeleteAbsentRacesCreate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		create     api.Token
		wantStatus int
	}{{"smaller create", 20, http.StatusNoContent}, {"larger create", 40, http.StatusConflict}} {
		t.Run(tc.name, func(t *testing.T) {
			pause := newPauser(30)
			e := newEnv(t, gateway.Config{TestHooks: &gateway.TestHooks{AfterObserve: pause.hook}})
			other := newEnvSharing(t, e)
			done := make(chan result, 1)
			go func() { done <- e.delete(t, "k", 30) }()
			<-pause.reached
			if r := other.put(t, "k", tc.create, "created"); r.status != http.StatusCreated {
				t.Fatalf("PUT token %d = %s; want 201", tc.create, r)
			}
			close(pause.release)
			if r := <-done; r.status != tc.wantStatus {
				t.Fatalf("DELETE token 30 = %s; want %d", r, tc.wantStatus)
			}
			if body, _, ok := e.stored(t, "k"); !ok || body != "created" {
				t.Fatalf("S3 holds %q (present %v); want the create, left in place", body, ok)
			}
			if hwm := readFence(t, e, "k"); hwm != tc.create {
				t.Fatalf("mark = %d; want the creator's %d", hwm, tc.create)
			}
		})
	}
}
