// Package tokenstore keeps fencing high-water marks in etcd. It owns the key
// layout, the fence-check transaction, linearizable high-water mark reads,
// and an in-memory cache of high-water marks learned from etcd's answers,
// which lets a gateway refuse stale tokens without a round trip.
//
// Key layout, below the configured prefix:
//
//	<prefix>hwm/<resource>  the resource's high-water mark, as a 20-digit
//	                        zero-padded decimal so that etcd's byte-wise
//	                        value comparison is numeric comparison
//
// The store never serves a request on its own: it decides, and the caller
// forwards.
package tokenstore
