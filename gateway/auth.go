package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"fencegate/api"
	"fencegate/edge"
)

// WithAuth authenticates every request but /healthz, /readyz and /metrics
// (and the console's files) with a's keys and client certificates, and
// authorizes each operation against the identity's grants (401 and 403 as
// problem+json): the edge does both (edge.Edge.Authenticate, Authorize).
// New fails when a is not valid (see edge.Auth.Validate). The zero Auth
// leaves the gateway open, as without WithAuth.
func WithAuth(a edge.Auth) Option {
	return func(g *Gateway) {
		if !a.Enabled() && len(a.Identities) == 0 {
			return
		}
		if err := a.Validate(); err != nil {
			g.optionErr = errors.Join(g.optionErr, fmt.Errorf("gateway: auth: %w", err))
			return
		}
		g.auth = a
	}
}

// authorize is the edge's Authorize, for the REST handlers.
func (g *Gateway) authorize(ctx context.Context, op edge.Operation, resource api.Resource) error {
	return g.edge.Authorize(ctx, op, resource)
}

// authorizeSessions is authorize for the session calls (create,
// keepalive, revoke), which have no resource: the identity needs OpLock
// (or edge.OpAdmin) on a prefix that lock names can have. A session is only
// good for locks, so a grant on prefixes no lock name has (object and
// partner resources, which contain '/') allows none: an identity that may
// take no lock may not make etcd keep leases for it either. Without auth
// it always allows.
func (g *Gateway) authorizeSessions(ctx context.Context) error {
	if !g.edge.AuthEnabled() {
		return nil
	}
	id := edge.Caller(ctx)
	if id == nil {
		return fmt.Errorf("authorize sessions: %w: request not authenticated", api.ErrUnauthorized)
	}
	for _, gr := range id.Grants {
		if gr.Allows(edge.OpLock) && namesLocks(gr.Prefix) {
			return nil
		}
	}
	return fmt.Errorf("%w: identity %q may not lock any resource: no lock or admin grant on a prefix that lock names can have", api.ErrForbidden, id.Name)
}

// namesLocks reports whether some lock name starts with prefix.
func namesLocks(prefix string) bool {
	return prefix == "" || api.ValidateLockName(prefix) == nil || api.ValidateLockName(prefix+"x") == nil
}

// isWrite reports whether r asks to change something fenced: a PUT or
// DELETE of an object, or any partner request (it may change the
// partner's state). Its refusals are audited (edge.Edge.NoteProblem).
func isWrite(r *http.Request) bool {
	switch {
	case strings.HasPrefix(r.URL.Path, objectsPrefix):
		return r.Method == http.MethodPut || r.Method == http.MethodDelete
	case strings.HasPrefix(r.URL.Path, partnersPrefix):
		return true
	}
	return false
}
