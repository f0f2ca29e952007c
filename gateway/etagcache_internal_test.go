package gateway

import (
	"testing"

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
			c := newETagCache(16)
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
