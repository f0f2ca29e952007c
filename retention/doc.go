// Package retention evicts high-water marks that carry no information
// their object does not already carry, so that etcd does not keep one key
// per object for ever. It owns the rule of which marks may go, and the
// argument that going is safe; the token store (tokenstore.Store's Marks
// and EvictMark) reads and deletes marks, the S3 backend observes objects,
// and whoever wires the gateway starts an Evictor.
//
// # The rule
//
// Only marks of S3 objects ("s3/{bucket}/{key}") are ever evicted; partner
// resources, whose upstream records no token, keep their marks for ever.
// A mark is evicted when, at a moment after it was last raised at least
// Config.Retention ago:
//
//   - the object exists and records (its fence-token metadata, as Observe
//     returns it) exactly the mark's token: the mark says nothing the
//     object does not; or
//   - the object is absent (the mark is a tombstone: left by a delete, by
//     a PUT that would have created the object and failed, or raised by
//     an upload's creation), the store confirms it (below), no multipart
//     upload of the object is in progress, and the mark was last raised
//     at least Config.TombstoneRetention ago, when that is not zero (zero,
//     the default, keeps tombstones for ever).
//
// A mark whose token differs from the object's (a write that raised the
// mark and then failed, or a store written to directly) is kept.
//
// "Absent" is the store's word, never a guess: a HEAD's 404 has no body,
// so S3 answers a missing bucket, and a proxy or load balancer its own
// 404, as it answers a missing key, and GCS answers a missing bucket as a
// missing object. A tombstone is evicted only when the store says that
// the bucket the mark names exists and holds no such key
// (ObjectObserver.ConfirmAbsent: S3's NoSuchKey, a GCS list of the
// bucket); anything else keeps the mark, counted as "unconfirmed" and
// logged.
//
// The
// eviction is one etcd transaction, If(ModRevision(key) == M)
// Then(Delete(key)), where M is the mod revision the evictor read before
// it observed the object: a raise at any point in between changes the mod
// revision, the compare fails and the raised mark stays. That compare
// alone makes eviction correct with any number of evictors at once.
//
// # Why evicting such a mark is safe
//
// A fenced write observes the object (a HEAD, step 3) before its fence
// check (step 4), refuses a token below the token the object records
// whatever the mark, and then writes conditionally: If-Match the ETag it
// observed, or If-None-Match: * when it observed no object. Take a stale
// writer, its token t below the evicted mark m, which the object recorded
// when the mark was evicted. Versions of an object carry non-decreasing
// tokens, and every write that changes the object raises (so re-creates)
// the mark first, so from then on the object records at least m, or a new
// mark holds at least m. If the stale writer observes after the eviction,
// it sees a token of at least m and is refused (409), or the fence check
// finds the new mark and refuses it. If it observed before, what it
// observed is an older version than the one that recorded m (or no object
// at all), and its conditional write names that older version: S3 refuses
// it (412, then the write observes again and is refused as above).
//
// # What weakens
//
// The conditional write compares ETags, and a single-part ETag is the MD5
// of the bytes. Without eviction, a stale writer slips through only if it
// was paused between its fence check and its write while the object went
// back to the bytes it had observed (the ETag ABA case). With eviction it
// also slips through if it observed before the mark was raised, did its
// fence check after the mark was evicted, and the object is back at the
// bytes it observed: its pause between observation and fence check,
// together with the pause of the writer of the current version between
// its fence check and its write, spans more than the retention. A gateway
// serves observations from its ETag cache as well; each is as old as the
// write that left it, so the gateway must not serve entries older than a
// fraction of the retention (Config.ETagCacheMaxAge gives the bound to set
// as the gateway's ETagCacheMaxAge). The gateway's fast reject of stale
// tokens from its cache of marks stays correct: it refuses only tokens
// below a mark that was once accepted, which are stale whether or not
// etcd still holds the mark.
//
// Evicting a tombstone gives up what the tombstone kept: once it is gone,
// a writer with a token below the deleter's, at or above every mark still
// held, can create the object again, since there is no object to record a
// token and no mark to refuse it. Hence tombstones have a retention of
// their own, for ever by default.
//
// # Writes in flight leave tombstones too
//
// A write that creates an object raises the mark before the object
// exists, so until it lands the mark is a tombstone that alone refuses
// writers below its token. Two kinds of write are in flight that long:
//
//   - A multipart upload, from CreateMultipartUpload to its completion:
//     up to the upload TTL (a day by default), longer than any tombstone
//     retention. Its mark is kept while the upload is bound in etcd
//     (Uploads.ResourcesUploading), whatever its age. The race with an
//     upload created while the evictor decides is closed without timing:
//     the gateway binds the upload before it writes the mark at the
//     upload's token (a write, so a new mod revision, even when the token
//     equals the mark), and the evictor reads the bindings after the
//     mark. A write after the evictor's read of the mark fails the
//     eviction's compare; a write before it follows the binding, which the
//     evictor then sees (Evictor.tombstoneKept says it in full).
//   - A PUT (or a multipart completion) that has raised the mark and not
//     been answered, or that the gateway gave up on: its conditional
//     write may still reach the store, bounded by the gateway's HTTP read
//     timeout (10 minutes by default) and S3's answer timeout (30
//     seconds), plus the moments S3 takes to apply a request whose sender
//     has gone; a completion, by 15 minutes. No record in etcd says it is
//     in flight, so it is covered by age: a tombstone retention is at
//     least MinTombstoneRetention, an hour. A gateway run with no read
//     timeout (or one above the tombstone retention) lets a slow PUT
//     outlive its tombstone: then a writer below its token can create the
//     object first, and the PUT, conditional on the absence it observed,
//     fails.
//
// So a finite tombstone retention evicts a tombstone at least that long
// after its last raise, once the store confirms the object absent and no
// upload of it is in progress; and from then on a writer with a smaller
// token, not below any mark still held, can create the object.
//
// A mark also protects against stale writers after a write that bypassed
// fencegate and left no fence-token metadata on the object; once the mark
// is evicted (it differed from the object, so only as a tombstone or if
// the direct write came after the eviction), nothing does.
//
// # Age without timestamps
//
// etcd keeps no times, only revisions. The evictor samples etcd's revision
// with each page of marks it reads, noting the time after the answer came
// back: every mark raised at or before that revision was raised by then.
// A mark is old enough when its mod revision is at most the revision of a
// sample taken at least the retention ago. Samples live in memory, on the
// process's monotonic clock; and so that a restarted gateway (or the next
// holder of the evictors' turn) need not run for the retention before it
// evicts anything, the evictor also records a revision in etcd every
// 1/256 of the retention (at least a second), bound to a lease whose
// countdown, on etcd's leader's clock, tells its age
// (tokenstore.Store.RecordRevision and RevisionAges). Such an age never
// exceeds the true one: the lease is granted after the revision is read,
// its remaining time is rounded down, and a new etcd leader restarts
// countdowns rather than advancing them. Where those records are missing
// (etcd unreachable, or never recorded), the evictor waits: it evicts
// nothing it cannot prove old.
package retention
