// Package s3api is fencegate's S3-compatible front door: an http.Handler
// that speaks the S3 REST protocol, so that unmodified S3 clients (aws-cli,
// the AWS SDKs, boto3, rclone, s3cmd, minio-go) write through the gateway
// with fencing.
//
// It owns the S3 dialect only: addressing (path-style, and virtual-hosted
// style under Config.Domain), the choice of operation from method, query
// and headers, the fencing token's S3 spellings, S3's XML answers and
// errors (errors.go holds the one table from error classes to S3 codes).
// Every other decision is made elsewhere, by the same code as for the REST
// API: package sigv4 authenticates (Signature Version 4, bodies verified
// as they stream); the edge (package edge) tracks, limits and logs each
// request and authorizes the identity by its grants; the engine (package
// fence) runs the fencing protocol (fence.Engine.PutFenced,
// fence.Engine.DeleteFenced: fast reject, observe, fence check,
// conditional write, bounded retry, ETag cache); a BucketLister (package
// backends/s3) lists, re-signing with the gateway's own credentials. The
// door imports no other door.
//
// # Operations
//
// Fenced writes: PutObject, DeleteObject, DeleteObjects (each key fenced
// on its own with the request's token), CopyObject (the destination
// fenced, the source read with the read grant), PutObjectTagging and
// DeleteObjectTagging (tagging.go: a fenced rewrite of the object), and
// the multipart uploads (multipart.go: the token bound at create, each
// part and the completion fenced). Server-side encryption headers are
// validated here (sse.go) and passed with the write. Reads, with the read
// grant: GetObject, HeadObject, GetObjectTagging, ListObjectsV2,
// ListObjects, ListParts, ListMultipartUploads, ListBuckets, HeadBucket,
// GetBucketLocation. CreateBucket and DeleteBucket (bucketadmin.go) for
// an identity with admin on the whole bucket. Everything else (object
// lock, ACLs, policies, bucket tagging, versioning, POST uploads, ...)
// answers NotImplemented and never reaches the store.
//
// # The token
//
// A write carries its fencing token as x-amz-meta-fence-token (the
// object's user metadata, as aws-cli --metadata fence-token=N, boto3
// Metadata, rclone --header-upload and s3cmd --add-header send it; in the
// query of a presigned URL as X-Amz-Meta-Fence-Token), or as
// X-Fence-Token, which must then be signed. Every spelling present must
// hold the same token (else InvalidArgument, 400).
package s3api
