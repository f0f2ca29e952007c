package fence

import (
	"testing"
	"time"

	"fencegate/api"
)

// TestETagCacheNeverHoldsExistingWithoutETag: a version that exists
// without an ETag names nothing a conditional write can match (an empty
// If-Match is no condition), so the cache neither learns nor serves one,
// and learning one drops the entry it would have replaced (a write has
// made that entry out of date).
func TestETagCacheNeverHoldsExistingWithoutETag(t *testing.T) {
	const r = api.Resource("s3/b/k")
	good := api.ObjectVersion{Exists: true, ETag: `"abc"`, Token: 3}
	tests := []struct {
		name   string
		before []api.ObjectVersion // learned first
		learn  api.ObjectVersion
	}{
		{"empty", nil, api.ObjectVersion{Exists: true, Token: 4}},
		{"empty between quotes", nil, api.ObjectVersion{Exists: true, ETag: `""`, Token: 4}},
		{"after a version with an ETag", []api.ObjectVersion{good}, api.ObjectVersion{Exists: true, Token: 4}},
		{"after absent", []api.ObjectVersion{{Token: 2}}, api.ObjectVersion{Exists: true, ETag: `""`, Token: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newETagCache(16, time.Hour, time.Now)
			for _, v := range tt.before {
				c.learn(r, v)
			}
			c.learn(r, tt.learn)
			if v, ok := c.get(r); ok {
				t.Fatalf("after learn(%+v), get = %+v, true; want no entry", tt.learn, v)
			}
		})
	}
}

// TestETagCacheServesNoEntryOlderThanMaxAge: an entry is served while it
// is younger than the bound, and never after, whatever happens to it; an
// entry learned again is young again. Without a bound (negative) entries
// are served at any age.
func TestETagCacheServesNoEntryOlderThanMaxAge(t *testing.T) {
	const r = api.Resource("s3/b/k")
	v := api.ObjectVersion{Exists: true, ETag: `"abc"`, Token: 3}
	tests := []struct {
		name   string
		maxAge time.Duration
		age    time.Duration // of the entry when read
		want   bool
	}{
		{"young", time.Minute, 59 * time.Second, true},
		{"at the bound", time.Minute, time.Minute, false},
		{"older", time.Minute, time.Hour, false},
		{"no bound", -1, 1000 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			c := newETagCache(16, tt.maxAge, func() time.Time { return now })
			c.learn(r, v)
			now = now.Add(tt.age)
			if got, ok := c.get(r); ok != tt.want || ok && got != v {
				t.Fatalf("get after %v with max age %v = %+v, %v; want %v", tt.age, tt.maxAge, got, ok, tt.want)
			}
			c.learn(r, v) // learned again: young
			if _, ok := c.get(r); !ok {
				t.Fatalf("get of an entry just learned again = false; want true")
			}
		})
	}
}

// TestETagCacheHoldsTicketedKeys: a hold (a ticket issued for the key)
// forgets the entry, and nothing is learned or served until it ends.
func TestETagCacheHoldsTicketedKeys(t *testing.T) {
	const r = api.Resource("s3/b/k")
	now := time.Unix(1000, 0)
	c := newETagCache(16, time.Hour, func() time.Time { return now })
	v1 := api.ObjectVersion{Exists: true, ETag: `"one"`, Token: 3}
	v2 := api.ObjectVersion{Exists: true, ETag: `"two"`, Token: 4}
	c.learn(r, v1)
	c.hold(r, now.Add(10*time.Second))
	if v, ok := c.get(r); ok {
		t.Fatalf("after hold, get = %+v, true; want no entry", v)
	}
	c.learn(r, v2)
	now = now.Add(9 * time.Second)
	if v, ok := c.get(r); ok {
		t.Fatalf("learn during the hold, get = %+v, true; want no entry", v)
	}
	now = now.Add(time.Second)
	c.learn(r, v2)
	if v, ok := c.get(r); !ok || v != v2 {
		t.Fatalf("learn after the hold, get = %+v, %v; want %+v, true", v, ok, v2)
	}
}
