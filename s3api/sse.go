package s3api

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"fencegate/api"
)

// Server-side encryption, as S3 takes it: SSE-S3, SSE-KMS and DSSE-KMS
// (x-amz-server-side-encryption and its KMS headers) on the writes that
// create an object (PutObject, CreateMultipartUpload, CopyObject's
// destination), and a key of the client's own, SSE-C
// (x-amz-server-side-encryption-customer-*), on those writes, on
// UploadPart, on reads, and for a copy's source
// (x-amz-copy-source-server-side-encryption-customer-*). The door
// validates the headers as S3 does (InvalidArgument) and the gateway
// passes them to the store with its conditional write; the store's
// answer is passed back. A customer key is a secret: it goes to the store
// and nowhere else, never into a log line, an error message, the ETag
// cache, etcd or the event feed. Buckets in GCS have none of this
// (NotImplemented).

// The encryption headers, by their canonical names.
const (
	headerSSE              = "X-Amz-Server-Side-Encryption"
	headerSSEKMSKeyID      = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	headerSSEKMSContext    = "X-Amz-Server-Side-Encryption-Context"
	headerSSEBucketKey     = "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"
	headerCustomerPrefix   = "X-Amz-Server-Side-Encryption-Customer-"
	headerCopySourcePrefix = "X-Amz-Copy-Source-Server-Side-Encryption-Customer-"
)

// sseAlgorithms are the values S3 takes in x-amz-server-side-encryption.
var sseAlgorithms = []string{"AES256", "aws:kms", "aws:kms:dsse"}

// writeEncryption reads the server-side encryption a write asks for, in
// a bucket of store: SSE-S3 or SSE-KMS, or a customer key (SSE-C), as S3
// accepts them, else InvalidArgument; on a bucket that is not in S3, any
// of them is NotImplemented. No header is the zero value.
func writeEncryption(h http.Header, store string) (api.Encryption, error) {
	var e api.Encryption
	var values map[string]string // made for a write that sends one
	for _, name := range []string{headerSSE, headerSSEKMSKeyID, headerSSEKMSContext, headerSSEBucketKey} {
		v, ok, err := oneHeader(h, name)
		if err != nil {
			return e, err
		}
		if ok {
			if values == nil {
				values = make(map[string]string, 4)
			}
			values[name] = v
		}
	}
	customer, err := customerKey(h, headerCustomerPrefix)
	if err != nil {
		return e, err
	}
	if values == nil && customer.IsZero() {
		return e, nil // no encryption asked for
	}
	if len(values) > 0 || !customer.IsZero() {
		if err := encryptionInS3(store); err != nil {
			return e, err
		}
	}
	e = api.Encryption{Algorithm: values[headerSSE], KMSKeyID: values[headerSSEKMSKeyID],
		KMSContext: values[headerSSEKMSContext], BucketKeyEnabled: values[headerSSEBucketKey], Customer: customer}
	if _, ok := values[headerSSE]; ok && !slices.Contains(sseAlgorithms, e.Algorithm) {
		return e, fmt.Errorf("%w: x-amz-server-side-encryption %q: the encryption method specified is not supported (AES256, aws:kms or aws:kms:dsse)",
			errInvalidArgument, api.Truncate(e.Algorithm, 40))
	}
	if !customer.IsZero() && len(values) > 0 {
		return e, fmt.Errorf("%w: Server Side Encryption with Customer provided key is incompatible with the encryption method specified", errInvalidArgument)
	}
	kms := strings.HasPrefix(e.Algorithm, "aws:kms")
	for _, name := range []string{headerSSEKMSKeyID, headerSSEKMSContext} {
		if _, ok := values[name]; ok && !kms {
			return e, fmt.Errorf("%w: %s needs x-amz-server-side-encryption: aws:kms or aws:kms:dsse", errInvalidArgument, strings.ToLower(name))
		}
	}
	if _, ok := values[headerSSEKMSContext]; ok && !jsonObject(e.KMSContext) {
		return e, fmt.Errorf("%w: x-amz-server-side-encryption-context must be a base64-encoded JSON object", errInvalidArgument)
	}
	if _, ok := values[headerSSEBucketKey]; ok {
		switch strings.ToLower(e.BucketKeyEnabled) {
		case "true", "false":
			e.BucketKeyEnabled = strings.ToLower(e.BucketKeyEnabled)
		default:
			return e, fmt.Errorf("%w: x-amz-server-side-encryption-bucket-key-enabled must be true or false", errInvalidArgument)
		}
	}
	return e, nil
}

// readCustomerKey reads the customer key (SSE-C) of a request that takes
// no other encryption (a read, UploadPart), in a bucket of store; see
// customerKey. A key on a bucket that is not in S3 is NotImplemented.
func readCustomerKey(h http.Header, store string) (api.CustomerKey, error) {
	return customerKeyIn(h, headerCustomerPrefix, store)
}

// copySourceKey reads the customer key of a copy's source
// (x-amz-copy-source-server-side-encryption-customer-*), in a bucket of
// store.
func copySourceKey(h http.Header, store string) (api.CustomerKey, error) {
	return customerKeyIn(h, headerCopySourcePrefix, store)
}

func customerKeyIn(h http.Header, prefix, store string) (api.CustomerKey, error) {
	k, err := customerKey(h, prefix)
	if err == nil && !k.IsZero() {
		err = encryptionInS3(store)
	}
	return k, err
}

// encryptionInS3 refuses server-side encryption on a bucket of a store
// other than S3 (GCS): NotImplemented.
func encryptionInS3(store string) error {
	if store != "" && store != api.StoreS3 {
		return fmt.Errorf("%w: server-side encryption headers on a bucket in %s", errNotImplemented, store)
	}
	return nil
}

// customerKey reads the three headers of a customer key under prefix
// (Algorithm, Key, Key-MD5) and checks them as S3 does: all three or
// none, the algorithm AES256, the key 256 bits in base64, its MD5 the
// MD5 of those bits. Each failure is InvalidArgument, with S3's message;
// none repeats the key.
func customerKey(h http.Header, prefix string) (api.CustomerKey, error) {
	var k api.CustomerKey
	names, ok := customerKeyHeaders[prefix]
	if !ok { // unreachable: every caller names one of the two
		names = [3]string{prefix + "Algorithm", prefix + "Key", prefix + "Key-Md5"}
	}
	alg, hasAlg, err := oneHeader(h, names[0])
	if err != nil {
		return k, err
	}
	key, hasKey, err := oneHeader(h, names[1])
	if err != nil {
		return k, err
	}
	keyMD5, hasMD5, err := oneHeader(h, names[2])
	if err != nil {
		return k, err
	}
	const requests = "Requests specifying Server Side Encryption with Customer provided keys must provide"
	switch {
	case !hasAlg && !hasKey && !hasMD5:
		return k, nil
	case !hasAlg || alg != "AES256":
		return k, fmt.Errorf("%w: %s a valid encryption algorithm (AES256)", errInvalidArgument, requests)
	case !hasKey:
		return k, fmt.Errorf("%w: %s an appropriate secret key", errInvalidArgument, requests)
	case !hasMD5:
		return k, fmt.Errorf("%w: %s the client calculated MD5 of the secret key", errInvalidArgument, requests)
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		return k, fmt.Errorf("%w: The secret key was invalid for the specified algorithm", errInvalidArgument)
	}
	sum := md5.Sum(raw)
	clear(raw)
	want, err := base64.StdEncoding.DecodeString(keyMD5)
	if err != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return k, fmt.Errorf("%w: The calculated MD5 hash of the key did not match the hash that was provided", errInvalidArgument)
	}
	return api.CustomerKey{Algorithm: alg, Key: api.Secret(key), KeyMD5: keyMD5}, nil
}

// customerKeyHeaders are the three headers of a customer key (Algorithm,
// Key, Key-Md5) under each of its prefixes, built once rather than for
// every write.
var customerKeyHeaders = map[string][3]string{
	headerCustomerPrefix:   {headerCustomerPrefix + "Algorithm", headerCustomerPrefix + "Key", headerCustomerPrefix + "Key-Md5"},
	headerCopySourcePrefix: {headerCopySourcePrefix + "Algorithm", headerCopySourcePrefix + "Key", headerCopySourcePrefix + "Key-Md5"},
}

// oneHeader is the one value of header name, and whether it was sent;
// sent more than once it is InvalidArgument. name is canonical
// (http.CanonicalHeaderKey), as every caller's constant is.
func oneHeader(h http.Header, name string) (string, bool, error) {
	values := h[name]
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
		return strings.TrimSpace(values[0]), true, nil
	}
	return "", true, fmt.Errorf("%w: %s sent %d times", errInvalidArgument, strings.ToLower(name), len(values))
}

// jsonObject reports whether s is base64 of a JSON object, as S3 takes
// an SSE-KMS encryption context.
func jsonObject(s string) bool {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return false
	}
	var v map[string]any
	return json.Unmarshal(data, &v) == nil && v != nil
}

// setEncryptionAnswer sets on an answer the encryption the store
// answered, as S3 answers it: never a key, only its algorithm and MD5.
func setEncryptionAnswer(h http.Header, e api.Encryption) {
	if e == (api.Encryption{}) {
		return // the common case: no header to set
	}
	for _, f := range [...]struct{ name, value string }{{headerSSE, e.Algorithm}, {headerSSEKMSKeyID, e.KMSKeyID},
		{headerSSEKMSContext, e.KMSContext}, {headerSSEBucketKey, e.BucketKeyEnabled},
		{headerCustomerPrefix + "Algorithm", e.Customer.Algorithm}, {headerCustomerPrefix + "Key-Md5", e.Customer.KeyMD5}} {
		if f.value != "" {
			h[f.name] = []string{f.value}
		}
	}
}
