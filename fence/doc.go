// Package fence is fencegate's engine: the fencing protocol, the same for
// every front door (the REST API, the S3 API), in the vocabulary of
// package api. Every write runs its steps in the order that makes it
// correct:
//
//	parse token -> fast reject (cache) -> observe object -> fence check -> conditional write
//
// The door parses (step 1); the engine refuses a token that the fence
// store's cache already knows to be stale (step 2, FastReject), observes
// the object's current version (step 3, from the ETag cache or a HEAD),
// checks the fence (step 4, which raises the resource's high-water mark),
// and writes conditionally on the version observed (step 5), retrying a
// lost race from a fresh observation a bounded number of times.
//
// Observing the object's version before the fence check is what makes a
// write that succeeds carry a token at least as large as the one of the
// version it replaces: the version observed was written by a writer whose
// fence check finished before this one began, so if this check passes,
// this token is at least that writer's (Engine.observeAndFence carries
// the argument out, and says how the ETag cache, the object's recorded
// token and a client's own condition keep it). The engine fails closed:
// when the fence check cannot complete, nothing is written.
//
// Multipart uploads are fenced at their completion, which runs the same
// steps; their parts are refused once the upload's token is below the
// mark (Engine.CreateUpload). Reads pass the store's answers to their
// own conditions through (Engine.ReadObject). Bodies that may be
// replayed after a lost race are held in memory within one budget for
// all requests (Engine.ReadBody).
//
// The engine reaches the fence store and the object stores only through
// the small interfaces declared here (FenceStore, ObjectStore,
// MultipartStore, UploadStore, ...), asks the edge whether a caller may
// touch a resource (Authorizer), and tells it what it decided (Monitor).
// Its errors are api error classes, which package api maps to statuses in
// one table; it knows nothing of HTTP.
package fence
