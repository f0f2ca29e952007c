package s3

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
)

// Server-side encryption: the headers of api.Encryption, sent as the
// front door validated them, and read back from S3's answers. A customer
// key (SSE-C) is sent on the write, on every read and on the observation
// of the object, and never kept.

// The encryption headers, by their canonical names.
const (
	headerSSE               = "X-Amz-Server-Side-Encryption"
	headerSSEKMSKeyID       = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	headerSSEKMSContext     = "X-Amz-Server-Side-Encryption-Context"
	headerSSEBucketKey      = "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"
	headerSSECustomerAlg    = "X-Amz-Server-Side-Encryption-Customer-Algorithm"
	headerSSECustomerKey    = "X-Amz-Server-Side-Encryption-Customer-Key"
	headerSSECustomerKeyMD5 = "X-Amz-Server-Side-Encryption-Customer-Key-Md5"
)

// setEncryptionHeaders sets e's headers on a write's request h.
func setEncryptionHeaders(h http.Header, e api.Encryption) {
	for name, v := range map[string]string{headerSSE: e.Algorithm, headerSSEKMSKeyID: e.KMSKeyID,
		headerSSEKMSContext: e.KMSContext, headerSSEBucketKey: e.BucketKeyEnabled} {
		if v != "" {
			h[name] = []string{v}
		}
	}
	setCustomerKeyHeaders(h, e.Customer)
}

// setCustomerKeyHeaders sets k's headers on a request h.
func setCustomerKeyHeaders(h http.Header, k api.CustomerKey) {
	if k.IsZero() {
		return
	}
	h[headerSSECustomerAlg] = []string{k.Algorithm}
	h[headerSSECustomerKey] = []string{string(k.Key)}
	h[headerSSECustomerKeyMD5] = []string{k.KeyMD5}
}

// answeredEncryption is the encryption S3 answered in h: never a key.
func answeredEncryption(h http.Header) api.Encryption {
	return api.Encryption{
		Algorithm:        h.Get(headerSSE),
		KMSKeyID:         h.Get(headerSSEKMSKeyID),
		KMSContext:       h.Get(headerSSEKMSContext),
		BucketKeyEnabled: h.Get(headerSSEBucketKey),
		Customer:         api.CustomerKey{Algorithm: h.Get(headerSSECustomerAlg), KeyMD5: h.Get(headerSSECustomerKeyMD5)},
	}
}

// sdkEncryption is the encryption the SDK's output fields say, as
// answeredEncryption reads it from headers.
func sdkEncryption(sse types.ServerSideEncryption, kmsKeyID, kmsContext *string, bucketKey *bool, customerAlg, customerMD5 *string) api.Encryption {
	e := api.Encryption{Algorithm: string(sse), KMSKeyID: aws.ToString(kmsKeyID), KMSContext: aws.ToString(kmsContext),
		Customer: api.CustomerKey{Algorithm: aws.ToString(customerAlg), KeyMD5: aws.ToString(customerMD5)}}
	if bucketKey != nil {
		e.BucketKeyEnabled = fmt.Sprint(*bucketKey)
	}
	return e
}

// sdkCustomerKey is k as the SDK's three SSE-C fields.
func sdkCustomerKey(k api.CustomerKey) (alg, key, md5 *string) {
	if k.IsZero() {
		return nil, nil, nil
	}
	return aws.String(k.Algorithm), aws.String(string(k.Key)), aws.String(k.KeyMD5)
}

// sdkBucketKey is e.BucketKeyEnabled as the SDK's field.
func sdkBucketKey(e api.Encryption) *bool {
	if e.BucketKeyEnabled == "" {
		return nil
	}
	return aws.Bool(e.BucketKeyEnabled == "true")
}

// ObserveWithKey is Observe of an object encrypted with the client's own
// key (SSE-C): S3 answers a HEAD of such an object only with the key
// (400 without it, 403 with another), and that refusal is an error, never
// an absent object.
func (c *Client) ObserveWithKey(ctx context.Context, p api.ObjectPath, key api.CustomerKey) (api.ObjectVersion, error) {
	return c.observe(ctx, api.GetObjectInput{Path: p, Customer: key})
}
