package api

// The read-only views of the token store that the console shows: lock
// queues and partner requests in flight, paged like MarkPage.

// LockQueue is one lock's queue as a listing reads it.
type LockQueue struct {
	Name string
	// Holder is the token of the session holding the lock (the create
	// revision of its place in the queue, as Acquire grants it). A listed
	// queue always has one.
	Holder Token
	// QueueLength counts the holder and the waiters behind it.
	QueueLength int64
	// Waiters are the tokens that the waiters will be granted, in queue
	// order (the holder excluded). It may be shorter than QueueLength-1
	// when the queue is longer than a listing reads (see LockPage).
	Waiters []Token
}

// LockPage is one page of a listing of lock queues, in name order.
type LockPage struct {
	Locks []LockQueue
	// More is true when queues past the page's last one may remain.
	More bool
}

// InFlightMarker is a partner request in flight: the marker that keeps
// every other request to its resource out until it is answered.
type InFlightMarker struct {
	Resource Resource
	// Token is the fencing token of the request that holds the marker.
	Token Token
	// Revision is the store's revision when the marker was taken.
	Revision int64
}

// InFlightPage is one page of a listing of in-flight markers, in resource
// order.
type InFlightPage struct {
	Markers []InFlightMarker
	// More is true when markers past the page's last one may remain.
	More bool
}
