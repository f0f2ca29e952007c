package gateway

// Object tags (S3's object tagging) for a front door: reads, and fenced
// writes of an object's tags alone (PutObjectTagging,
// DeleteObjectTagging). Tags that a write of the object carries ride on
// that write (api.ObjectMetadata.Tags, PutFenced, CreateUpload).

import (
	"context"
	"fmt"

	"fencegate/api"
	"fencegate/fence"
)

// ObjectTags returns the tags of the object at path (none: an empty map)
// once the identity of ctx may read it. A missing object is
// api.ErrNotFound; a store that keeps no tags (GCS) api.ErrInvalidRequest,
// with nothing sent.
func (g *Gateway) ObjectTags(ctx context.Context, path api.ObjectPath) (map[string]string, error) {
	if err := g.authorize(ctx, OpRead, path.Resource()); err != nil {
		return nil, err
	}
	if g.tags == nil {
		return nil, fmt.Errorf("%w: the store keeps no object tags", api.ErrInvalidRequest)
	}
	ctx, span, start := startS3(ctx, "s3 get tags", path.Bucket)
	tags, err := g.tags.Tags(ctx, path)
	g.metrics.doneS3("get_tags", start, span, err)
	return tags, err
}

// TagRequest is a fenced write of an object's tags alone, as a front door
// parsed it (see fence.TagRequest).
type TagRequest = fence.TagRequest

// PutTagsFenced replaces the tags of the object at in.Path, fenced like
// any other write of it (see fence.Engine.PutTagsFenced).
func (g *Gateway) PutTagsFenced(ctx context.Context, in TagRequest) (WriteResult, error) {
	return g.engine.PutTagsFenced(ctx, in)
}
