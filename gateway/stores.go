package gateway

import "fencegate/fence"

// The stores the gateway's engine runs the protocol over (see package
// fence for each contract), under the names New and its options take.
type (
	FenceStore     = fence.FenceStore
	ObjectStore    = fence.ObjectStore
	BucketStores   = fence.BucketStores
	TagReader      = fence.TagReader
	MultipartStore = fence.MultipartStore
	UploadStore    = fence.UploadStore
	TicketSigner   = fence.TicketSigner
)
