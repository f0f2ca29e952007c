// Package gateway is fencegate's REST API: the chi router and the
// handlers of objects, fences, locks, sessions, inspection, the event
// stream and the partner routes, and New, which builds the edge (package
// edge) and the engine (package fence) they run on.
//
// Every request passes through the edge first (edge.Edge.Track, request
// size bounds, authentication), which is shared with the other doors (the
// S3 API, package s3api). Every fenced write runs through the engine,
// which holds the protocol and its ordering argument:
//
//	parse token -> fast reject (cache) -> observe object -> fence check -> conditional write
//
// The gateway parses its dialect, asks the edge who may do what, calls
// the engine, and maps every error to HTTP in one place (api.ProblemFor,
// answered as problem+json by writeError).
package gateway
