package s3

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/api"
)

// Tags reads the tags of the object's current version (S3's
// GetObjectTagging), key to value; an object without tags has none (an
// empty map). A missing object is api.ErrNotFound, with S3's code
// (NoSuchKey, NoSuchBucket) for the client.
//
// S3 answers tags apart from the object's bytes: a write of the object
// between a read of its bytes and this request makes the tags another
// version's. Callers that need both of one version say how they cope.
func (c *Client) Tags(ctx context.Context, p api.ObjectPath) (map[string]string, error) {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if waitErr := connWaitError(ctx, "get tags", p, c.connWait); err != nil && waitErr != nil {
		return nil, waitErr
	}
	if err != nil {
		return nil, fmt.Errorf("s3 get tags %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
	}
	tags := make(map[string]string, len(out.TagSet))
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}
