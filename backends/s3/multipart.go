package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"fencegate/api"
)

// Multipart uploads. The object that an upload completes records the token
// given at CreateUpload (x-amz-meta-fence-token), as a single PUT records
// its own; the completion is conditional, as a PUT is: CompleteUpload sends
// If-Match the ETag of the version it replaces, or If-None-Match: * when
// there was none, and never a completion without a condition.
//
// S3 checks these conditions on CompleteMultipartUpload (AWS since
// November 2024); so does versitygw, which re-checks them under its
// per-key publish lock just before the object appears
// (backend/posix CompleteMultipartUploadWithCopy, v1.8.0), so that of
// concurrent completions with the same If-Match exactly one lands
// (TestConcurrentConditionalCompletes). A completion refused on its
// condition leaves the upload in place: the caller aborts it or tries
// again.

// newCompleteHTTP returns the HTTP client of completions: a pool of its
// own, of as many connections as cfg's, that waits CompleteTimeout for
// S3's answer.
func newCompleteHTTP(cfg Config) *awshttp.BuildableClient {
	conns := cfg.MaxConnsPerHost
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = conns
		t.MaxIdleConnsPerHost = conns
		t.MaxConnsPerHost = conns
		t.IdleConnTimeout = 90 * time.Second
		t.ResponseHeaderTimeout = cfg.CompleteTimeout
	})
}

// CreateUpload starts a multipart upload of in.Path that records in.Token
// and in.Metadata on the object it completes, and returns the upload's id.
func (c *Client) CreateUpload(ctx context.Context, in api.CreateUploadInput) (string, error) {
	create := &s3.CreateMultipartUploadInput{
		Bucket:   aws.String(in.Path.Bucket),
		Key:      aws.String(in.Path.Key),
		Metadata: sdkUserMetadata(in.Metadata, in.Token),

		CacheControl:       optional(in.Metadata.CacheControl),
		ContentDisposition: optional(in.Metadata.ContentDisposition),
		ContentEncoding:    optional(in.Metadata.ContentEncoding),
		ContentLanguage:    optional(in.Metadata.ContentLanguage),
		Expires:            sdkExpires(in.Metadata),
		Tagging:            optional(tagging(in.Metadata)),

		ServerSideEncryption:    types.ServerSideEncryption(in.Encryption.Algorithm),
		SSEKMSKeyId:             optional(in.Encryption.KMSKeyID),
		SSEKMSEncryptionContext: optional(in.Encryption.KMSContext),
		BucketKeyEnabled:        sdkBucketKey(in.Encryption),
	}
	create.SSECustomerAlgorithm, create.SSECustomerKey, create.SSECustomerKeyMD5 = sdkCustomerKey(in.Encryption.Customer)
	create.ChecksumAlgorithm = types.ChecksumAlgorithm(in.ChecksumAlgorithm)
	create.ChecksumType = types.ChecksumType(in.ChecksumType)
	if in.ContentType != "" {
		create.ContentType = aws.String(in.ContentType)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.CreateMultipartUpload(ctx, create)
	if err != nil {
		return "", c.multipartError(ctx, "create upload", in.Path, err)
	}
	if aws.ToString(out.UploadId) == "" {
		return "", fmt.Errorf("s3 create upload %s/%s: %w: no upload id in the answer", in.Path.Bucket, in.Path.Key, api.ErrUpstream)
	}
	return aws.ToString(out.UploadId), nil
}

// UploadPart stores one part, streaming in.Body, and returns its ETag. An
// unknown upload (completed, aborted, or never created) is
// api.ErrNotFound. A part with in.ChecksumAlgorithm goes with its
// checksum, computed as it streams, in a trailer (partchecksum.go).
func (c *Client) UploadPart(ctx context.Context, in api.UploadPartInput) (string, error) {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	if in.ChecksumAlgorithm != "" && c.signed != nil && in.Size >= 0 {
		etag, sdk, err := c.signed.uploadPart(ctx, in)
		if err != nil {
			return "", c.multipartError(ctx, fmt.Sprintf("upload part %d", in.Number), in.Path, err)
		}
		if !sdk {
			return etag, nil
		}
	}
	part := &s3.UploadPartInput{
		Bucket:        aws.String(in.Path.Bucket),
		Key:           aws.String(in.Path.Key),
		UploadId:      aws.String(in.UploadID),
		PartNumber:    aws.Int32(in.Number),
		Body:          in.Body,
		ContentLength: aws.Int64(in.Size),
	}
	part.SSECustomerAlgorithm, part.SSECustomerKey, part.SSECustomerKeyMD5 = sdkCustomerKey(in.Customer)
	// Through the SDK (an endpoint the signed path does not serve), the
	// SDK computes the checksum: in a trailer over TLS, and refusing an
	// unseekable body without it.
	part.ChecksumAlgorithm = types.ChecksumAlgorithm(strings.ToUpper(in.ChecksumAlgorithm))
	out, err := c.s3.UploadPart(ctx, part)
	if err != nil {
		return "", c.multipartError(ctx, fmt.Sprintf("upload part %d", in.Number), in.Path, err)
	}
	return aws.ToString(out.ETag), nil
}

// CopyPart stores one part copied from in.Source (S3's UploadPartCopy),
// and returns its ETag. A source that does not exist is S3's refusal
// NoSuchKey, of class api.ErrNotFound.
func (c *Client) CopyPart(ctx context.Context, in api.CopyPartInput) (string, error) {
	copyPart := &s3.UploadPartCopyInput{
		Bucket:     aws.String(in.Path.Bucket),
		Key:        aws.String(in.Path.Key),
		UploadId:   aws.String(in.UploadID),
		PartNumber: aws.Int32(in.Number),
		// The source is bucket/key with the key's characters
		// percent-encoded, as S3 wants x-amz-copy-source.
		CopySource: aws.String(in.Source.Bucket + "/" + url.PathEscape(in.Source.Key)),
	}
	if in.SourceRange != "" {
		copyPart.CopySourceRange = aws.String(in.SourceRange)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.UploadPartCopy(ctx, copyPart)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchKey" {
		// The source is missing: no condition of the gateway's was
		// sent, so it is not a lost race, as multipartError reads a
		// completion's NoSuchKey.
		return "", fmt.Errorf("s3 copy part %d %s/%s from %s/%s: %w", in.Number, in.Path.Bucket, in.Path.Key, in.Source.Bucket, in.Source.Key, storeError(api.ErrNotFound, err, true))
	}
	if err != nil {
		return "", c.multipartError(ctx, fmt.Sprintf("copy part %d", in.Number), in.Path, err)
	}
	if out.CopyPartResult == nil {
		return "", fmt.Errorf("s3 copy part %s/%s: %w: no result in the answer", in.Path.Bucket, in.Path.Key, api.ErrUpstream)
	}
	return aws.ToString(out.CopyPartResult.ETag), nil
}

// CompleteUpload makes the object of the upload from in.Parts if
// in.Replaces is still the object's current version, and returns the new
// ETag: If-Match its ETag, or If-None-Match: * when it did not exist. A
// lost race is api.ErrConcurrentModification, and the upload stays. A
// Replaces that exists without an ETag is an api.ErrUpstream, and nothing
// is sent (see writeCondition): no completion goes out without a
// condition. An unknown upload is api.ErrNotFound. The parts' checksums
// are named only in an upload created with an algorithm
// (in.ChecksumAlgorithm).
func (c *Client) CompleteUpload(ctx context.Context, in api.CompleteUploadInput) (string, error) {
	cond, err := writeCondition(api.PutObjectInput{Replaces: in.Replaces})
	if err == nil && cond.header == "" {
		err = errors.New("a completion without a condition") // unreachable: writeCondition always names one
	}
	if err != nil {
		return "", fmt.Errorf("s3 complete upload %s/%s: %w: %w", in.Path.Bucket, in.Path.Key, api.ErrUpstream, err)
	}
	parts := make([]types.CompletedPart, len(in.Parts))
	for i, p := range in.Parts {
		parts[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
		if in.ChecksumAlgorithm != "" {
			c := p.Checksums
			parts[i].ChecksumCRC32, parts[i].ChecksumCRC32C = optional(c.CRC32), optional(c.CRC32C)
			parts[i].ChecksumCRC64NVME = optional(c.CRC64NVME)
			parts[i].ChecksumSHA1, parts[i].ChecksumSHA256, parts[i].ChecksumSHA512 = optional(c.SHA1), optional(c.SHA256), optional(c.SHA512)
			parts[i].ChecksumMD5 = optional(c.MD5)
			parts[i].ChecksumXXHASH64, parts[i].ChecksumXXHASH3, parts[i].ChecksumXXHASH128 = optional(c.XXHASH64), optional(c.XXHASH3), optional(c.XXHASH128)
		}
	}
	complete := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(in.Path.Bucket),
		Key:             aws.String(in.Path.Key),
		UploadId:        aws.String(in.UploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	switch cond.header {
	case "If-Match":
		complete.IfMatch = aws.String(cond.value)
	case "If-None-Match":
		complete.IfNoneMatch = aws.String(cond.value)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.CompleteMultipartUpload(ctx, complete, func(o *s3.Options) {
		if c.completeHTTP != nil {
			o.HTTPClient = c.completeHTTP
		}
	})
	if err != nil {
		return "", c.multipartError(ctx, "complete upload", in.Path, err)
	}
	return aws.ToString(out.ETag), nil
}

// AbortUpload aborts the upload and frees its parts. An unknown upload is
// api.ErrNotFound.
func (c *Client) AbortUpload(ctx context.Context, p api.ObjectPath, uploadID string) error {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	_, err := c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(p.Bucket), Key: aws.String(p.Key), UploadId: aws.String(uploadID),
	})
	if err != nil {
		return c.multipartError(ctx, "abort upload", p, err)
	}
	return nil
}

// ListParts lists the upload's parts after part number marker, at most max
// of them (zero: the store's default, 1000). An unknown upload is
// api.ErrNotFound.
func (c *Client) ListParts(ctx context.Context, p api.ObjectPath, uploadID string, marker, max int32) (api.PartList, error) {
	list := &s3.ListPartsInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key), UploadId: aws.String(uploadID)}
	if marker > 0 {
		list.PartNumberMarker = aws.String(fmt.Sprint(marker))
	}
	if max > 0 {
		list.MaxParts = aws.Int32(max)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.ListParts(ctx, list)
	if err != nil {
		return api.PartList{}, c.multipartError(ctx, "list parts", p, err)
	}
	res := api.PartList{Truncated: aws.ToBool(out.IsTruncated), StorageClass: string(out.StorageClass), Parts: make([]api.Part, 0, len(out.Parts))}
	for _, part := range out.Parts {
		res.Parts = append(res.Parts, api.Part{
			Number: aws.ToInt32(part.PartNumber), ETag: aws.ToString(part.ETag),
			Size: aws.ToInt64(part.Size), LastModified: aws.ToTime(part.LastModified),
			Checksums: api.ObjectChecksums{
				CRC32: aws.ToString(part.ChecksumCRC32), CRC32C: aws.ToString(part.ChecksumCRC32C), CRC64NVME: aws.ToString(part.ChecksumCRC64NVME),
				SHA1: aws.ToString(part.ChecksumSHA1), SHA256: aws.ToString(part.ChecksumSHA256), SHA512: aws.ToString(part.ChecksumSHA512),
				MD5:      aws.ToString(part.ChecksumMD5),
				XXHASH64: aws.ToString(part.ChecksumXXHASH64), XXHASH3: aws.ToString(part.ChecksumXXHASH3), XXHASH128: aws.ToString(part.ChecksumXXHASH128),
			},
		})
	}
	if res.Truncated {
		var next int32
		if _, err := fmt.Sscan(aws.ToString(out.NextPartNumberMarker), &next); err != nil || next <= 0 {
			return api.PartList{}, fmt.Errorf("s3 list parts %s/%s: %w: truncated without a next marker", p.Bucket, p.Key, api.ErrUpstream)
		}
		res.NextMarker = next
	}
	return res, nil
}

// ListUploads lists a bucket's multipart uploads in progress.
func (c *Client) ListUploads(ctx context.Context, in api.ListUploadsInput) (api.UploadList, error) {
	list := &s3.ListMultipartUploadsInput{Bucket: aws.String(in.Bucket)}
	if in.Prefix != "" {
		list.Prefix = aws.String(in.Prefix)
	}
	if in.KeyMarker != "" {
		list.KeyMarker = aws.String(in.KeyMarker)
	}
	if in.UploadIDMarker != "" {
		list.UploadIdMarker = aws.String(in.UploadIDMarker)
	}
	if in.MaxUploads > 0 {
		list.MaxUploads = aws.Int32(in.MaxUploads)
	}
	if in.Delimiter != "" {
		list.Delimiter = aws.String(in.Delimiter)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.ListMultipartUploads(ctx, list)
	if err != nil {
		return api.UploadList{}, c.multipartError(ctx, "list uploads", api.ObjectPath{Bucket: in.Bucket}, err)
	}
	res := api.UploadList{
		Truncated:          aws.ToBool(out.IsTruncated),
		NextKeyMarker:      aws.ToString(out.NextKeyMarker),
		NextUploadIDMarker: aws.ToString(out.NextUploadIdMarker),
		Uploads:            make([]api.Upload, 0, len(out.Uploads)),
	}
	for _, u := range out.Uploads {
		res.Uploads = append(res.Uploads, api.Upload{Key: aws.ToString(u.Key), UploadID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)})
	}
	for _, p := range out.CommonPrefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, aws.ToString(p.Prefix))
	}
	return res, nil
}

// multipartError maps the failure of a multipart request, as an
// *api.StoreError with S3's code: an unknown upload is api.ErrNotFound;
// parts that do not make an object (a wrong ETag, out of order, too
// small) are api.ErrInvalidRequest; a completion
// that loses its condition is api.ErrConcurrentModification, as a write's
// (mapWriteError).
func (c *Client) multipartError(ctx context.Context, op string, p api.ObjectPath, err error) error {
	if waitErr := connWaitError(ctx, op, p, c.connWait); waitErr != nil {
		return waitErr
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchUpload":
			return fmt.Errorf("s3 %s %s/%s: %w", op, p.Bucket, p.Key, storeError(api.ErrNotFound, err, true))
		case "InvalidPart", "InvalidPartOrder", "EntityTooSmall", "EntityTooLarge", "InvalidArgument", "InvalidRange", "InvalidRequest":
			return fmt.Errorf("s3 %s %s/%s: %w", op, p.Bucket, p.Key, storeError(api.ErrInvalidRequest, err, true))
		}
	}
	return fmt.Errorf("s3 %s %s/%s: %w", op, p.Bucket, p.Key, mapWriteError(err))
}
