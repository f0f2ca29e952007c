package main

import (
	"context"
	"strconv"

	"fencegate/api"
	"fencegate/tokenstore"
)

// The raise shape: writers that hold a fresh token for each write (a new
// lock grant per job, per batch, per leader term), so that every accepted
// write raises its object's high-water mark: one etcd write each, where
// the same-token shapes' repeated writes only confirm the mark with a
// read.
const (
	// patternRaise is patternDistinct (a key per worker) where each of a
	// worker's writes carries a new token, one above its last: for the
	// gateway and for client-side fencing alike (the client-side peer
	// raises with a transaction of its own, as a client fencing for
	// itself would). Direct writers, which do not fence, write as in
	// patternDistinct.
	patternRaise = "raise"
	// modeStoreRaise is a fence raise alone, through tokenstore with
	// group commit (as the gateway runs it), without S3: the ceiling of
	// raises that etcd and the store reach. Its cells carry no body
	// (size 0).
	modeStoreRaise = "store-raise"
	// modeStoreRaiseUnbatched is modeStoreRaise with group commit off:
	// one etcd transaction per raise.
	modeStoreRaiseUnbatched = "store-raise-unbatched"
	// raiseCeilingConcurrency is the concurrency of the store-raise cells
	// that the summary line compares.
	raiseCeilingConcurrency = 256
)

// storeMode reports whether m is a mode of fence raises alone, without S3.
func storeMode(m string) bool { return m == modeStoreRaise || m == modeStoreRaiseUnbatched }

// writeToken returns the token a worker's next write carries in pattern:
// a new one, one above its last, under patternRaise; benchToken (one lock
// holder) otherwise.
func writeToken(pattern string) func(*worker) api.Token {
	if pattern != patternRaise {
		return func(*worker) api.Token { return benchToken }
	}
	return func(w *worker) api.Token {
		w.token++
		return w.token
	}
}

// writeTokenHeader is writeToken as the gateway's header value; the
// same-token shapes format it once.
func writeTokenHeader(pattern string) func(*worker) string {
	if pattern != patternRaise {
		s := benchToken.String()
		return func(*worker) string { return s }
	}
	next := writeToken(pattern)
	return func(w *worker) string { return strconv.FormatUint(uint64(next(w)), 10) }
}

// storeRaise is modeStoreRaise and modeStoreRaiseUnbatched (as fences is
// configured): a fence check of the worker's object with a new, larger
// token each time, which must be accepted.
func storeRaise(fences *tokenstore.Store, bucket string) operation {
	next := writeToken(patternRaise)
	return func(ctx context.Context, w *worker) (outcome, error) {
		resource := api.ObjectResource(bucket, w.key)
		if err := fences.FenceCheck(ctx, resource, next(w)); err != nil {
			return outcomeError, err
		}
		return outcomeOK, nil
	}
}
