// Package gateway is fencegate's composition root: from one Config and
// the stores, New builds the edge (package edge: identities, limits,
// logs, metrics, traces, the event feed), the engine over the stores
// (package fence: the fencing protocol and its ordering argument), and
// the doors on them: the REST API (package rest), with the partner routes
// (package partners) mounted on its router. A Gateway serves them; the
// S3 API (package s3api) is built on its Edge and Engine, so that every
// door shares one edge and one engine.
//
// cmd/fencegate wires its stores here, and so do the tests that exercise
// fencegate whole.
package gateway
