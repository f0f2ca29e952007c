package tokenstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestMarksPages reads every mark under a prefix in pages, in resource
// order, with the revision of each one's last raise, and nothing from
// outside the prefix.
func TestMarksPages(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	var want []api.Resource
	for i := range 7 {
		r := api.Resource(fmt.Sprintf("s3/b/k%d", i))
		want = append(want, r)
		if err := s.FenceCheck(ctx, r, api.Token(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []api.Resource{"partner/p/1", "s3x/b/k", "s4/b/k"} {
		if err := s.FenceCheck(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FenceCheck(ctx, "s3/b/k3", 30); err != nil { // a second raise
		t.Fatal(err)
	}
	var got []api.Mark
	var after api.Resource
	pages := 0
	for {
		page, err := s.Marks(ctx, "s3/", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Marks) > 3 {
			t.Fatalf("Marks(limit 3) returned %d marks", len(page.Marks))
		}
		got = append(got, page.Marks...)
		for _, m := range page.Marks {
			if m.Revision <= 0 || m.Revision > page.Revision {
				t.Fatalf("mark %+v: revision outside (0, %d]", m, page.Revision)
			}
		}
		if !page.More {
			break
		}
		after = page.Marks[len(page.Marks)-1].Resource
	}
	var names []api.Resource
	for _, m := range got {
		names = append(names, m.Resource)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("marks read %v; want %v", names, want)
	}
	if pages != 3 {
		t.Fatalf("7 marks in pages of 3 took %d reads; want 3", pages)
	}
	if got[3].Token != 30 || got[2].Token != 12 || got[3].Revision <= got[6].Revision {
		t.Fatalf("k2 %+v, k3 %+v, k6 %+v: want tokens 12 and 30, k3 raised last", got[2], got[3], got[6])
	}
}

// TestEvictMarkComparesModRevision: a mark is deleted only if it was not
// raised (or re-created) since it was read; a raise in between stays.
func TestEvictMarkComparesModRevision(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	read := func(r api.Resource) api.Mark {
		t.Helper()
		page, err := s.Marks(ctx, r, "", 1)
		if err != nil || len(page.Marks) != 1 {
			t.Fatalf("Marks(%s) = %+v, %v; want one mark", r, page, err)
		}
		return page.Marks[0]
	}
	tests := []struct {
		name      string
		between   func(r api.Resource) // between the read and the eviction
		wantGone  bool
		wantStays api.Token
	}{
		{"untouched", func(api.Resource) {}, true, 0},
		{"raised", func(r api.Resource) {
			if err := s.FenceCheck(ctx, r, 8); err != nil {
				t.Fatal(err)
			}
		}, false, 8},
		{"re-raised to the same token", func(r api.Resource) {
			// A second store has no cached mark, so it writes the key
			// (a new mod revision) rather than confirming it.
			if err := newStore(t, etcd.Client(t)).FenceCheck(ctx, r, 7); err != nil {
				t.Fatal(err)
			}
		}, false, 7},
		{"evicted and created again", func(r api.Resource) {
			if ok, err := s.EvictMark(ctx, read(r)); !ok || err != nil {
				t.Fatalf("EvictMark = %v, %v", ok, err)
			}
			if err := s.FenceCheck(ctx, r, 9); err != nil {
				t.Fatal(err)
			}
		}, false, 9},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := api.Resource(fmt.Sprintf("s3/b/evict%d", i))
			if err := s.FenceCheck(ctx, r, 7); err != nil {
				t.Fatal(err)
			}
			m := read(r)
			tt.between(r)
			ok, err := s.EvictMark(ctx, m)
			if err != nil || ok != tt.wantGone {
				t.Fatalf("EvictMark(%+v) = %v, %v; want %v", m, ok, err, tt.wantGone)
			}
			hwm, err := newStore(t, etcd.Client(t)).HighWaterMark(ctx, r)
			if err != nil || hwm != tt.wantStays {
				t.Fatalf("mark after EvictMark = %d, %v; want %d", hwm, err, tt.wantStays)
			}
		})
	}
}
