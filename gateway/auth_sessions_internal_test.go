package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"fencegate/api"
)

// TestSessionsNeedALockNameGrant: sessions (create, keepalive, revoke)
// need a grant of lock (or admin) on a prefix that lock names can have:
// a grant on an object or partner prefix, which contains '/', names no
// lock, and allows no session.
func TestSessionsNeedALockNameGrant(t *testing.T) {
	tests := []struct {
		name    string
		grants  []Grant
		allowed bool
	}{
		{"lock on a lock-name prefix", []Grant{{Prefix: "jobs-", Operations: []Operation{OpLock}}}, true},
		{"lock on every name", []Grant{{Prefix: "", Operations: []Operation{OpLock}}}, true},
		{"admin on everything", []Grant{{Prefix: "", Operations: []Operation{OpAdmin}}}, true},
		{"lock on a dot prefix", []Grant{{Prefix: "..", Operations: []Operation{OpLock}}}, true},
		{"admin on an object prefix", []Grant{{Prefix: "s3/dev/", Operations: []Operation{OpAdmin}}}, false},
		{"lock on a partner prefix", []Grant{{Prefix: "partner/payments/", Operations: []Operation{OpLock}}}, false},
		{"write on a lock-name prefix", []Grant{{Prefix: "jobs-", Operations: []Operation{OpWrite}}}, false},
		{"lock on a prefix no name has", []Grant{{Prefix: "jobs nightly", Operations: []Operation{OpLock}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Gateway{}
			WithAuth(Auth{
				Identities: []Identity{{Name: "x", Grants: tt.grants}},
				APIKeys:    []APIKey{{SHA256: sha256.Sum256([]byte("k")), Identity: "x"}},
			})(g)
			if g.optionErr != nil {
				t.Fatal(g.optionErr)
			}
			ctx := withExchange(context.Background(), &exchange{identity: &Identity{Name: "x", Grants: tt.grants}})
			err := g.authorizeSessions(ctx)
			if (err == nil) != tt.allowed || err != nil && !errors.Is(err, api.ErrForbidden) {
				t.Errorf("authorizeSessions with %+v = %v; want allowed %v", tt.grants, err, tt.allowed)
			}
		})
	}
}
