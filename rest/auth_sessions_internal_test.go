package rest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"fencegate/api"
	"fencegate/edge"
)

// TestSessionsNeedALockNameGrant: sessions (create, keepalive, revoke)
// need a grant of lock (or admin) on a prefix that lock names can have:
// a grant on an object or partner prefix, which contains '/', names no
// lock, and allows no session.
func TestSessionsNeedALockNameGrant(t *testing.T) {
	tests := []struct {
		name    string
		grants  []edge.Grant
		allowed bool
	}{
		{"lock on a lock-name prefix", []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpLock}}}, true},
		{"lock on every name", []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpLock}}}, true},
		{"admin on everything", []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpAdmin}}}, true},
		{"lock on a dot prefix", []edge.Grant{{Prefix: "..", Operations: []edge.Operation{edge.OpLock}}}, true},
		{"admin on an object prefix", []edge.Grant{{Prefix: "s3/dev/", Operations: []edge.Operation{edge.OpAdmin}}}, false},
		{"lock on a partner prefix", []edge.Grant{{Prefix: "partner/payments/", Operations: []edge.Operation{edge.OpLock}}}, false},
		{"write on a lock-name prefix", []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpWrite}}}, false},
		{"lock on a prefix no name has", []edge.Grant{{Prefix: "jobs nightly", Operations: []edge.Operation{edge.OpLock}}}, false},
		{"read on an object prefix", []edge.Grant{{Prefix: "s3/dev/", Operations: []edge.Operation{edge.OpRead}}}, false},
		{"write and delete on an object prefix", []edge.Grant{{Prefix: "s3/dev/batch/", Operations: []edge.Operation{edge.OpWrite, edge.OpDelete}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := edge.New(edge.Config{Auth: edge.Auth{
				Identities: []edge.Identity{{Name: "x", Grants: tt.grants}},
				APIKeys:    []edge.APIKey{{SHA256: sha256.Sum256([]byte("k")), Identity: "x"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			g := &API{edge: e}
			ctx, err := e.WithIdentity(context.Background(), "x", "")
			if err != nil {
				t.Fatal(err)
			}
			err = g.authorizeSessions(ctx)
			if (err == nil) != tt.allowed || err != nil && !errors.Is(err, api.ErrForbidden) {
				t.Errorf("authorizeSessions with %+v = %v; want allowed %v", tt.grants, err, tt.allowed)
			}
		})
	}
}
