// Package tokenstore keeps fencing high-water marks in etcd, and the other
// state the gateway shares through etcd: lock-API sessions and lock
// queues, and partner routes' in-flight markers and idempotency records.
// It owns the key layout, the fence-check transaction, linearizable
// high-water mark reads, and an in-memory cache of high-water marks
// learned from etcd's answers, which lets a gateway refuse stale tokens
// without a round trip. Concurrent fence checks share etcd transactions,
// each with its own answer: read-only confirmations of an unchanged mark
// (confirm.go), and raises of a mark (group commit, groupcommit.go).
//
// Key layout, below the configured prefix:
//
//	<prefix>hwm/<resource>           the resource's high-water mark, as a
//	                                 20-digit zero-padded decimal so that
//	                                 etcd's byte-wise value comparison is
//	                                 numeric comparison (store.go);
//	                                 scanned and evicted by marks.go
//	<prefix>sessions/<session>       a lock-API session's owner, bound to
//	                                 the session's lease (locks.go)
//	<prefix>locks/<name>/<session>   a session's place in lock name's
//	                                 queue, bound to its lease; the oldest
//	                                 holds the lock (locks.go)
//	<prefix>revoking/<session>       a session being revoked, bound to
//	                                 its lease, so that its end is told
//	                                 from an expiry (lockexpiry.go)
//	<prefix>inflight/<resource>      a partner request in flight for the
//	                                 resource, bound to a gateway's lease
//	                                 (partner.go)
//	<prefix>idem/<scope>/<key>       a partner route's idempotency record,
//	                                 bound to the in-flight lease, then to
//	                                 a retention lease (idempotency.go)
//	<prefix>clock/<revision>         a revision the mark evictor noted,
//	                                 bound to a lease whose countdown
//	                                 tells its age (clock.go)
//	<prefix>uploads/<upload id>      a multipart upload's resource and
//	                                 token, bound to a shared lease of the
//	                                 upload TTL; once completed or aborted
//	                                 as stale, marked so on a shorter
//	                                 lease (uploads.go)
//	<prefix>turns/<name>             which gateway runs a background job
//	                                 (the mark evictor), bound to a lease
//	                                 its holder renews (turns.go)
//
// The store never serves a request on its own: it decides, and the caller
// forwards.
package tokenstore
