// Package gateway is fencegate's HTTP front: the chi router, the middleware,
// and the handlers that put every write through the fencing protocol in the
// order that makes it correct:
//
//	parse token -> fast reject (cache) -> observe object -> fence check -> conditional write
//
// Observing the object's version before the fence check is what makes a
// write that succeeds carry a token at least as large as the one of the
// version it replaces. The gateway fails closed: when the fence check
// cannot complete, nothing is forwarded.
//
// It reaches the token store and the object store only through the small
// interfaces declared here, and maps every error to HTTP in one place
// (api.ProblemFor).
package gateway
