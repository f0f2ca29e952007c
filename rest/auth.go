package rest

import (
	"context"
	"fmt"

	"fencegate/api"
	"fencegate/edge"
)

// authorize is the edge's Authorize, for the REST handlers.
func (g *API) authorize(ctx context.Context, op edge.Operation, resource api.Resource) error {
	return g.edge.Authorize(ctx, op, resource)
}

// authorizeSessions is authorize for the session calls (create,
// keepalive, revoke), which have no resource: the identity needs OpLock
// (or edge.OpAdmin) on a prefix that lock names can have. A session is only
// good for locks, so a grant on prefixes no lock name has (object and
// partner resources, which contain '/') allows none: an identity that may
// take no lock may not make etcd keep leases for it either. Without auth
// it always allows.
func (g *API) authorizeSessions(ctx context.Context) error {
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
