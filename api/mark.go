package api

import "time"

// Mark is a resource's high-water mark as the token store holds it, with
// the store revision of its last raise: what an evictor reads, and what it
// names when it removes the mark (the removal applies only if the mark was
// not raised since, see MarkPage).
type Mark struct {
	Resource Resource
	Token    Token
	// Revision is the store's revision at the mark's last raise (etcd's
	// mod revision of the key); every raise gives it a larger one.
	Revision int64
}

// MarkPage is one page of a scan of high-water marks, in resource order.
type MarkPage struct {
	Marks []Mark
	// More is true when marks past the page's last one may remain.
	More bool
	// Revision is the store's revision when the page was read: every mark
	// raised before the read began has a Revision at most this one.
	Revision int64
}

// RevisionAge says that the token store's revision Revision was reached
// at least Age ago: every mark whose Revision is at most it was last
// raised at least Age ago.
type RevisionAge struct {
	Revision int64
	Age      time.Duration
}
