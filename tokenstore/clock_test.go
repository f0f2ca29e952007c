package tokenstore_test

import (
	"context"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestRevisionAgesNeverOverestimate records a revision and reads it back
// until its age reaches a second: the age never exceeds the time since
// the call that recorded it began, a mark raised before it has a smaller
// revision, and a store on another client (another gateway) reads the
// same.
func TestRevisionAgesNeverOverestimate(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	if err := s.FenceCheck(ctx, "s3/b/k", 5); err != nil {
		t.Fatal(err)
	}
	page, err := s.Marks(ctx, "s3/", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r, err := s.RecordRevision(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r < page.Marks[0].Revision {
		t.Fatalf("recorded revision %d is below the mark's %d, raised before", r, page.Marks[0].Revision)
	}
	other := newStore(t, etcd.Client(t))
	var last api.RevisionAge
	testenv.WaitUntil(t, 10*time.Second, "the recorded revision is a second old", func() bool {
		ages, err := other.RevisionAges(ctx)
		if err != nil || len(ages) != 1 {
			t.Fatalf("RevisionAges = %v, %v; want one", ages, err)
		}
		elapsed := time.Since(before)
		if ages[0].Revision != r || ages[0].Age > elapsed || ages[0].Age < last.Age {
			t.Fatalf("RevisionAges = %+v after %v (last %+v); want revision %d, at most %v old, not younger than before", ages[0], elapsed, last, r, elapsed)
		}
		last = ages[0]
		return last.Age >= time.Second
	})
}
