package api

// CreateBucketInput is a bucket that a front door asks the object store
// to create, with what it asked for that the store is to honour.
type CreateBucketInput struct {
	// Bucket is the bucket's name, valid for a new S3 bucket.
	Bucket string
	// OwnerEnforced asks for S3's object ownership BucketOwnerEnforced:
	// the bucket's owner owns every object, and ACLs are disabled. False
	// leaves the store's default.
	OwnerEnforced bool
}
