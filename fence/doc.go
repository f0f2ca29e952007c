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
// A ticket (Engine.Ticket) is the protocol with its step 5 handed to the
// client: steps 1 to 4 run in the engine, in the same order, with a real
// observation (a HEAD, never the ETag cache), and then, instead of the
// conditional write, the store signs one (TicketSigner): the condition the
// engine would have sent (If-Match the observed ETag, If-None-Match: *
// for an absent object), the token as the object's recorded token, the
// length, the content type and the metadata, for a short life
// (Config.TicketExpiry). The client sends the bytes to the store itself.
//
// Why a ticket cannot let a stale token land: the write it signs is the
// engine's own conditional write, only sent later and by someone else.
// The argument above needs two things of it, and both hold. (1) The
// version it replaces was observed before a fence check that passed with
// its token: so a write that lands carries a token at least as large as
// the one of the version it replaces. (2) It lands only if that version
// is still current: the store checks the signed condition when the write
// arrives, however late, so any write that landed in between (a newer
// holder's through the gateway, another ticket's) makes it fail (412).
// The token cannot be changed (it is signed), nor the condition, the key
// or the length; an x-amz-* header that is not signed is refused.
//
// What a client that pauses between ticket and upload can and cannot do:
// if nothing wrote the object meanwhile, its write lands, even when a
// newer holder's fence check passed meanwhile without a write; that is
// the case of a gateway writer paused between its fence check and its
// write, which lands as well, and is linearizable as a write that came
// just before the newer holder's (whose own write, conditional on the
// version it observed, then fails and retries from a fresh observation).
// It cannot land after any write to the object (412), after its ticket
// expired (403), nor land twice (its first write changes the version,
// but for the ETag ABA below). While it pauses it holds nothing: the
// mark was raised at issue, and newer holders are never blocked.
//
// What a leaked URL allows: exactly what the ticket's holder could do
// with it, no more: one write of the signed length, with the signed
// token, content type and metadata, to that key, while the version
// observed is current and until the expiry, with bytes of its choosing.
// It grants no read, no other key and no other token, and it cannot be
// extended. Treat it as the token itself for its life.
//
// S3's ETag ABA case (docs/guarantees.md) applies to a ticket as to the
// gateway's own write, with a window as long as the ticket lives rather
// than a request's: keep the expiry short. A ticket's write is not seen
// by the engine, so the ETag cache never serves a key with a ticket
// outstanding (etagCache.hold), and the event feed has the ticket's
// issue, never its write. A multipart ticket signs parts only: they carry
// no condition and no token, and the upload is fenced at its creation and
// its completion, which go through the engine as every upload's do, so
// parts sent on the tickets of an upload whose token went stale are never
// completed into the object. Its creator asks for fresh part tickets as
// the upload goes (Engine.PartTickets), each as short-lived as the first,
// checked as a part sent through the engine is: none is signed for an
// upload whose token is below the mark.
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
