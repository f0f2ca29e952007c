// Package gateway is fencegate's HTTP front: the chi router, the
// middleware (request ids, size bounds, authentication, per-client
// limits, access and audit logs, metrics, tracing), the REST API's
// handlers, and the exported operations another front door (package
// s3api) calls.
//
// Every fenced write runs through the engine (package fence), which holds
// the protocol and its ordering argument:
//
//	parse token -> fast reject (cache) -> observe object -> fence check -> conditional write
//
// The gateway parses the request, answers the engine's questions (which
// identity may do what, where a request logs) and records what it
// decided (metrics, the event feed), and maps every error to HTTP in one
// place (api.ProblemFor).
package gateway
