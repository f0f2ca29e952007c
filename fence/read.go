package fence

import (
	"context"
	"fmt"

	"fencegate/api"
)

// ReadObject reads in.Path (Get, or Head when head is true) after
// checking that the caller of ctx may read it (the Authorizer): the
// store answers the read's own preconditions and range (api.Object.NotModified,
// api.ErrPreconditionFailed, api.ErrRangeNotSatisfiable). The caller closes a returned Body. A read of one
// part (in.PartNumber, which a front door whose dialect has parts
// sets) must name a part from 1 to api.MaxParts, no Range, and an
// object of an S3 bucket, else it is api.ErrInvalidRequest and nothing is
// read: a store that does not know parts would answer the whole object.
func (e *Engine) ReadObject(ctx context.Context, in api.GetObjectInput, head bool) (*api.Object, error) {
	if err := e.access.Authorize(ctx, Read, in.Path.Resource()); err != nil {
		return nil, err
	}
	if err := checkPartRead(in); err != nil {
		return nil, err
	}
	if head {
		return e.objects.Head(ctx, in)
	}
	return e.objects.Get(ctx, in)
}

// checkPartRead refuses a read of a part (in.PartNumber) that no store
// reads as one part: see ReadObject.
func checkPartRead(in api.GetObjectInput) error {
	switch {
	case in.PartNumber == 0:
		return nil
	case in.PartNumber < 0 || in.PartNumber > api.MaxParts:
		return fmt.Errorf("%w: part number %d, want 1 to %d", api.ErrInvalidRequest, in.PartNumber, api.MaxParts)
	case in.Range != "":
		return fmt.Errorf("%w: a part number and a Range", api.ErrInvalidRequest)
	case in.Path.Store != "" && in.Path.Store != api.StoreS3:
		return fmt.Errorf("%w: parts of objects in %s buckets", api.ErrInvalidRequest, in.Path.Store)
	}
	return nil
}
