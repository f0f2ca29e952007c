package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"fencegate/api"
	"fencegate/backends/upstream"
)

// CreateBucket creates in.Bucket in the client's region (Config.Region;
// the location constraint AWS S3 needs outside us-east-1), with object
// ownership BucketOwnerEnforced when in asks for it. S3's refusals keep
// their code and status (api.StoreError, Refused): BucketAlreadyOwnedByYou
// and BucketAlreadyExists (409), InvalidBucketName (400)...; a refusal of
// the gateway's credentials, S3's 5xx and no answer are api.ErrUpstream
// (api.ErrUpstreamTimeout).
func (c *Client) CreateBucket(ctx context.Context, in api.CreateBucketInput) error {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	create := &s3.CreateBucketInput{Bucket: aws.String(in.Bucket)}
	if c.region != "us-east-1" {
		create.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(c.region)}
	}
	if in.OwnerEnforced {
		create.ObjectOwnership = types.ObjectOwnershipBucketOwnerEnforced
	}
	_, err := c.s3.CreateBucket(ctx, create)
	if waitErr := connWaitError(ctx, "create bucket", api.ObjectPath{Bucket: in.Bucket}, c.connWait); err != nil && waitErr != nil {
		return waitErr
	}
	if err != nil {
		return fmt.Errorf("s3 create bucket %s: %w", in.Bucket, mapBucketError(err))
	}
	return nil
}

// DeleteBucket deletes bucket, which S3 does only when it holds no
// object. S3's refusals keep their code and status, as CreateBucket's:
// BucketNotEmpty (409), NoSuchBucket (404, api.ErrNotFound)...
func (c *Client) DeleteBucket(ctx context.Context, bucket string) error {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	_, err := c.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	if waitErr := connWaitError(ctx, "delete bucket", api.ObjectPath{Bucket: bucket}, c.connWait); err != nil && waitErr != nil {
		return waitErr
	}
	if err != nil {
		return fmt.Errorf("s3 delete bucket %s: %w", bucket, mapBucketError(err))
	}
	return nil
}

// mapBucketError maps the failure of a bucket's creation or deletion: a
// bucket that does not exist is api.ErrNotFound; any other refusal of
// what the client asked (a 4xx with a code, but for the refusals of the
// gateway's credentials) keeps S3's code and status; the rest is an
// upstream failure.
func mapBucketError(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket" {
		return storeError(api.ErrNotFound, err, true)
	}
	if statusCode(err) == http.StatusNotFound {
		return storeError(api.ErrNotFound, err, false)
	}
	return storeError(classOf(upstream.Transport(err)), err, refusedOther(err))
}
